"""`diag tail --prom URL` with no paths: a real Prometheus scraping a replay of the prefill-bound
scenario's series (tests/prom_replay.py, the session's ``replayed`` server) gives the same endpoints and
runtime findings as `diag tail` on that run's logs.

The server holds the scenario from its start up to ``real_from`` caught up, the rest arrives in real time
for the alert test; the query window ends at ``real_from`` (DIAG-B001 has held nine minutes by then), so
what it sees does not depend on when this test runs.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest
from prom_replay import RUN, Replayed, capture, diag
from schemas import validate
from test_prometheus_live import _free_port

from diag.prom import query_server
from diag.telemetry import telemetry_logs


def _iso(wall: float) -> str:
    return datetime.fromtimestamp(wall, tz=UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


def _window(replayed: Replayed) -> tuple[str, ...]:
    start = datetime(2026, 8, 12, 14, 5, tzinfo=UTC)  # before the scenario's first scrape (14:05:56)
    replayed.wait_served(replayed.real_from)
    return "--prom-start", _iso(replayed.wall(start)), "--prom-end", _iso(replayed.wall(replayed.real_from))


def _runtime(doc: dict) -> set[tuple[str, str]]:
    return {(f["code"], f.get("endpoint") or "") for f in doc["findings"]
            if f["code"].startswith(("DIAG-B", "DIAG-K001", "DIAG-K002", "DIAG-E", "DIAG-L001"))}


def _log_stats(until: datetime) -> dict[str, list[dict]]:
    """The logs' stats records per endpoint file role, up to ``until`` (scenario time)."""
    res = diag("tail", str(RUN), "--format", "jsonl")
    out: dict[str, list[dict]] = {}
    for line in res.stdout.splitlines():
        rec = json.loads(line)
        if rec["type"] == "record" and rec["kind"] == "stats" and datetime.fromisoformat(rec["ts"]) <= until:
            out.setdefault("decode" if "_decode_" in rec["path"] else "prefill", []).append(rec)
    return out


@pytest.mark.prometheus
def test_server_alone_matches_the_logs(replayed: Replayed) -> None:
    res = diag("tail", "--prom", replayed.url, *_window(replayed), "--format", "json")
    assert res.returncode in (0, 1), res.stderr
    doc = json.loads(res.stdout)
    validate(doc, "tail")
    logs = json.loads(diag("tail", str(RUN), "--format", "json").stdout)
    eps = {e["id"]: (e["role"], e["engines"]) for e in doc["endpoints"]}
    assert eps == {e["id"]: (e["role"], e["engines"]) for e in logs["endpoints"]}
    assert _runtime(doc) == _runtime(logs) == {("DIAG-B001", "")}
    assert [s["kind"] for s in doc["sources"]] == ["prometheus"] * len(doc["sources"])
    # the numbers over the same stretch: a gauge as scraped; a rate pushed down to the server, rate() over
    # 4 scrape intervals of the 10 s capture sampled at each step, smooths the ramps the log intervals show
    decode = next(e for e in doc["endpoints"] if e["id"] == "decode-w0")["stats"]
    # no benchmark output: the figures are over the run's active window (any request running or waiting)
    assert decode["window"]["label"] == "active"
    start, end = (datetime.fromisoformat(decode["window"][k]) for k in ("start", "end"))
    wall = [(r, datetime.fromtimestamp(replayed.wall(datetime.fromisoformat(r["ts"]) - timedelta(seconds=5)), tz=UTC))
            for r in _log_stats(replayed.real_from)["decode"]]   # the replay maps scenario time to wall time
    recs = [r for r, t in wall if start <= t <= end]
    assert decode["kv_usage_peak"] == round(max(r["kv_usage"] for r in recs), 1)
    per_interval: dict[str, float] = {}
    for r in recs:
        key = r["ts"][:18]  # the 10 s interval
        per_interval[key] = per_interval.get(key, 0.0) + r["gen_tps"]
    assert decode["gen_tps_mean"] == pytest.approx(sum(per_interval.values()) / len(per_interval), rel=0.15)


@pytest.mark.prometheus
def test_server_quantiles_are_the_bucket_deltas(replayed: Replayed) -> None:
    """The server's histogram_quantile(irate(..._bucket)) at each step equals diag's quantiles of the
    bucket deltas of the same two scrapes, read from the Tachometer file the exporter replays."""
    _window(replayed)
    start = datetime.fromtimestamp(replayed.wall(datetime(2026, 8, 12, 14, 5, tzinfo=UTC)), tz=UTC)
    server = query_server(replayed.url, start, datetime.fromtimestamp(replayed.real_start, tz=UTC))
    files = {(lg.info.role, lg.info.index, lg.info.node): lg for lg in telemetry_logs([capture()], "tachometer")}
    matched, intervals = set(), set()
    end_ms = replayed.real_start * 1000
    for lg in server:
        key = (lg.info.role, lg.info.index, lg.info.node)
        mine = sorted((int((r.ts.timestamp() + replayed.offset_s) * 1000), r.engine, r.latency)
                      for r in files[key].records)
        intervals |= {(key, ms, eng) for ms, eng, lat in mine if lat and ms <= end_ms}
        for r in lg.records:
            if not r.latency:
                continue
            at = round(r.ts.timestamp() * 1000)
            ms, _, want = max((m for m in mine if m[1] == r.engine and m[0] <= at), key=lambda m: m[0])
            assert r.latency == pytest.approx(want, rel=1e-9), (lg.path, r.ts, r.engine)
            matched.add((key, ms, r.engine))
    # one step per 10 s scrape interval: a step sees the latest pair of scrapes, so where a process's
    # scrapes (±50 ms apart from 10 s) drift across a step two steps share a pair and one is skipped
    assert matched <= intervals and len(matched) > 0.95 * len(intervals) > 700
    assert {k for lg in server for r in lg.records for k in r.latency or {}} == {
        "ttft_p50_s", "ttft_p90_s", "ttft_p99_s", "itl_p50_s", "itl_p90_s", "itl_p99_s",
        "e2e_p50_s", "e2e_p90_s", "e2e_p99_s"}


@pytest.mark.prometheus
def test_server_alone_errors_are_one_line(replayed: Replayed) -> None:
    server = replayed.url
    old = ("--prom-start", "2020-01-01T00:00:00Z", "--prom-end", "2020-01-01T00:15:00Z")
    empty = diag("tail", "--prom", server, *old)  # years before the replayed series
    assert empty.returncode == 2 and empty.stdout == ""
    assert empty.stderr.startswith(f"diag tail: {server}: no vLLM, SGLang or TensorRT-LLM series between ")
    assert len(empty.stderr.strip().splitlines()) == 1
    missing = diag("tail", "--prom", f"{server}/nowhere", *old)
    assert missing.returncode == 2 and len(missing.stderr.strip().splitlines()) == 1
    assert "Prometheus query failed" in missing.stderr and "Traceback" not in missing.stderr
    closed = f"http://127.0.0.1:{_free_port()}"
    refused = diag("tail", "--prom", closed, "--since", "15m")
    assert (refused.returncode, refused.stderr) == (2, f"diag tail: {closed}: cannot connect: Connection refused\n")
    for args, msg in ((("--since", "soon"), "--since 'soon': not a duration"),
                      (("--since", "5m", "--prom-start", old[1]), "--since and --prom-start both set the start")):
        bad = diag("tail", "--prom", server, *args)
        assert bad.returncode == 2 and msg in bad.stderr
    assert diag("tail").returncode == 2
    assert timedelta(0) < replayed.real_from - datetime(2026, 8, 12, 14, 5, tzinfo=UTC)
