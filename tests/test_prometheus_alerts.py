"""The exported rules running in a real Prometheus: a local exporter replays the prefill-bound scenario's
series with their own timestamps shifted to now (tests/prom_replay.py, the session's ``replayed``
server), a real `prometheus` scrapes it and evaluates `diag rules export --format prometheus`, and the
alerts that fire are the findings diag reports on that scenario's logs over the same stretch of the run.
About 65 s of the real-time replay after the server starts; bounded in time. The test looks back at
the first evaluation that fired DIAG-B001, so it holds whenever the session runs it.
"""

from __future__ import annotations

import json
import time
from datetime import datetime, timedelta

import pytest
import yaml
from prom_replay import CATCH_UP_S, RUN, Replayed, diag, query


@pytest.mark.prometheus
def test_exported_alerts_fire_as_diag_finds(replayed: Replayed) -> None:
    url, real_start, real_from = replayed.url, replayed.real_start, replayed.real_from
    begin = real_start - CATCH_UP_S  # Prometheus' start: rules evaluate from here on
    exported = {r["labels"]["code"] for g in yaml.safe_load(diag("rules", "export", "--format",
                                                                 "prometheus").stdout)["groups"]
                for r in g["rules"] if "alert" in r}
    # the first evaluation at which DIAG-B001 fired (this test may run long after the replay started)
    first = None
    while first is None:
        span = int(time.time() - begin) + 1
        try:
            res = query(url, f'min_over_time(timestamp(ALERTS{{alertstate="firing",code="DIAG-B001"}})[{span}s:1s])')
            first = float(res[0]["value"][1]) if res else None
        except OSError:
            pass  # still starting
        if first is None:
            if time.time() > real_start + 110:
                pytest.fail(f"DIAG-B001 did not fire within 110 s of the real-time replay (step {replayed.served()['k']})")
            time.sleep(1)
    assert first > real_start + 30  # the alert waited for its `for` (50 s), on data replayed in real time
    # every alert that fired up to then, and diag's findings (exported codes) on the logs that hold over
    # the replayed real-time stretch up to then
    fired = {tuple(sorted(r["metric"].items())) for r in query(
        url, f'group by(code, diag_role, diag_worker) (max_over_time(ALERTS{{alertstate="firing"}}'
             f'[{int(first - begin) + 1}s]))', at=first + 0.5)}
    real_to = real_from + timedelta(seconds=first - real_start)
    logs = json.loads(diag("tail", str(RUN), "--format", "json").stdout)
    want = set()
    for f in logs["findings"]:
        if f["code"] in exported and f.get("first_ts") and \
                datetime.fromisoformat(f["first_ts"]) <= real_from and \
                (f.get("open") or datetime.fromisoformat(f["last_ts"]) >= real_to):
            labels = {"code": f["code"]}
            if f.get("endpoint"):
                role, idx = f["endpoint"].split("-w")
                labels.update(diag_role=role, diag_worker=idx)
            want.add(tuple(sorted(labels.items())))
    assert fired == want == {(("code", "DIAG-B001"),)}
    (alert,) = query(url, 'ALERTS{alertstate="firing",code="DIAG-B001"}', at=first + 0.5)
    assert (alert["metric"]["severity"], alert["metric"]["role"]) == ("warning", "prefill")
