"""The exported rules running in a real Prometheus: a local exporter replays the prefill-bound scenario's
series with their own timestamps shifted to now (tests/prom_replay.py, the session's ``replayed``
server), a real `prometheus` scrapes it and evaluates `diag rules export --format prometheus`, and the
alerts that fire are the findings diag reports on that scenario's logs over the same stretch of the run.
About 65 s of the real-time replay; bounded in time.
"""

from __future__ import annotations

import json
import time
from datetime import datetime, timedelta

import pytest
import yaml
from prom_replay import RUN, Replayed, diag, query


@pytest.mark.prometheus
def test_exported_alerts_fire_as_diag_finds(replayed: Replayed) -> None:
    url, real_start, real_from = replayed.url, replayed.real_start, replayed.real_from
    exported = {r["labels"]["code"] for g in yaml.safe_load(diag("rules", "export", "--format",
                                                                 "prometheus").stdout)["groups"]
                for r in g["rules"] if "alert" in r}
    firing_b001 = 'ALERTS{alertstate="firing",code="DIAG-B001"}'
    deadline = real_start + 110
    while time.time() < deadline:
        try:
            if query(url, firing_b001):
                break
        except OSError:
            pass  # still starting
        time.sleep(1)
    else:
        pytest.fail(f"DIAG-B001 did not fire within 110 s of the real-time replay (step {replayed.replay.k})")
    now = time.time()
    assert now > real_start + 30  # the alert waited for its `for` (50 s), on data replayed in real time
    span = int(now - real_start + 60) + 1
    fired = {tuple(sorted(r["metric"].items())) for r in query(
        url, f'group by(code, diag_role, diag_worker) (max_over_time(ALERTS{{alertstate="firing"}}[{span}s]))')}
    # diag's findings (exported codes) on the logs that hold over the replayed real-time stretch
    real_to = real_from + timedelta(seconds=now - real_start)
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
    (alert,) = query(url, firing_b001)
    assert (alert["metric"]["severity"], alert["metric"]["role"]) == ("warning", "prefill")
