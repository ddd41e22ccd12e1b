"""The exported rules running in a real Prometheus: a local exporter replays the prefill-bound scenario's
series (the sample generator's Tachometer capture) with their own timestamps shifted to now, a real
`prometheus` scrapes it and evaluates `diag rules export --format prometheus`, and the alerts that fire
are the findings diag reports on that scenario's logs over the same stretch of the run.

Rules evaluate at the wall clock only, so the replay catches up on the scenario's first minutes (one
10 s step per 200 ms scrape, timestamps in the past) and then plays it in real time from a point inside
diag's DIAG-B001 window until the alert fires (its `for` is 50 s). About 65 s; bounded in time.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from datetime import datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import polars as pl
import pytest
import yaml
from test_prometheus_live import _free_port, _prometheus_binary

from helpers import stop_server

ROOT = Path(__file__).resolve().parents[1]
RUN = ROOT / "samples" / "runs" / "prefill-bound"
TACH = ROOT / "samples" / "telemetry" / "prefill-bound-tachometer"
CATCH_UP_S = 15.0     # wall seconds before the replay reaches REAL_TIME_FROM
SCRAPE = "200ms"


def _steps(capture: Path) -> list[list[tuple[float, str]]]:
    """Per scrape step (the k-th scrape of every process): (timestamp s, exposition line without it)."""
    df = pl.read_parquet(capture).filter(pl.col("histogram_bucket_upper").is_null()
                                         & ~pl.col("metric_name").str.contains("le="))
    steps: list[list[tuple[float, str]]] = []
    for (_,), part in df.partition_by("scraper_endpoint", as_dict=True, maintain_order=True).items():
        times = sorted(part["timestamp_ns"].unique().to_list())
        for row in part.iter_rows(named=True):
            k = times.index(row["timestamp_ns"])
            family, _, labels = row["metric_name"].partition("{")
            target = (f'job="vllm",instance="{row["hostname"]}:7500",worker_role="{row["worker_role"]}",'
                      f'worker_index="{row["worker_index"]}"')
            line = f'{family}{{{labels.rstrip("}")},{target}}} {row["metric_value"]}'
            while len(steps) <= k:
                steps.append([])
            steps[k].append((row["timestamp_ns"] / 1e9, line))
    return steps


class Replay:
    """Serves step k of the scenario, its timestamps shifted by ``offset_s``; a scrape moves on to the
    next step once that step's shifted time has come (so the past is caught up one step per scrape)."""

    def __init__(self, steps: list[list[tuple[float, str]]], offset_s: float) -> None:
        self.steps, self.offset_s, self.k = steps, offset_s, 0
        self.lock = threading.Lock()

    def body(self) -> str:
        with self.lock:
            nxt = self.k + 1
            if nxt < len(self.steps) and max(t for t, _ in self.steps[nxt]) + self.offset_s <= time.time():
                self.k = nxt
            return "".join(f"{line} {int((t + self.offset_s) * 1000)}\n" for t, line in self.steps[self.k])


def _handler(replay: Replay) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            data = replay.body().encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: object) -> None:
            pass

    return Handler


def _query(url: str, expr: str) -> list[dict]:
    q = urllib.parse.urlencode({"query": expr})
    with urllib.request.urlopen(f"{url}/api/v1/query?{q}", timeout=5) as resp:
        return json.loads(resp.read())["data"]["result"]


def _diag(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "diag", *args], capture_output=True, text=True, cwd=ROOT,
                          timeout=120)


@pytest.fixture
def replayed(tmp_path: Path) -> Iterator[tuple[str, Replay, float, datetime]]:
    """(Prometheus URL, the replay, wall time of the real-time start, scenario time of it)."""
    binary = _prometheus_binary()
    logs = json.loads(_diag("tail", str(RUN), "--format", "json").stdout)
    b001 = next(f for f in logs["findings"] if f["code"] == "DIAG-B001")
    # the last 5 minutes of diag's window: the top concurrency level, a queue that never dips (the
    # earlier levels' ramps dip between them; diag's keep_firing_for bridges those, a pending alert not)
    real_from = datetime.fromisoformat(b001["last_ts"]) - timedelta(minutes=5)
    (capture,) = TACH.rglob("final.parquet")
    start = time.time()
    replay = Replay(_steps(capture), start + CATCH_UP_S - real_from.timestamp())
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(replay))
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    rules = _diag("rules", "export", "--format", "prometheus")
    assert rules.returncode == 0, rules.stderr
    (tmp_path / "rules.yml").write_text(rules.stdout)
    (tmp_path / "prometheus.yml").write_text(
        f"global:\n  scrape_interval: {SCRAPE}\n  scrape_timeout: {SCRAPE}\n  evaluation_interval: 1s\n"
        f"rule_files: ['{tmp_path / 'rules.yml'}']\nscrape_configs:\n"
        f"  - job_name: replay\n    honor_labels: true\n"
        f"    static_configs:\n      - targets: ['127.0.0.1:{server.server_address[1]}']\n")
    port = _free_port()
    log = (tmp_path / "prometheus.log").open("w")
    proc = subprocess.Popen([binary, f"--config.file={tmp_path / 'prometheus.yml'}",
                             f"--storage.tsdb.path={tmp_path / 'data'}", f"--web.listen-address=127.0.0.1:{port}"],
                            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    try:
        yield f"http://127.0.0.1:{port}", replay, start + CATCH_UP_S, real_from
    finally:
        stop_server(proc, log)
        server.shutdown()
        server.server_close()


@pytest.mark.prometheus
def test_exported_alerts_fire_as_diag_finds(replayed) -> None:
    url, replay, real_start, real_from = replayed
    exported = {r["labels"]["code"] for g in yaml.safe_load(_diag("rules", "export", "--format",
                                                                  "prometheus").stdout)["groups"]
                for r in g["rules"] if "alert" in r}
    firing_b001 = 'ALERTS{alertstate="firing",code="DIAG-B001"}'
    deadline = real_start + 110
    while time.time() < deadline:
        try:
            if _query(url, firing_b001):
                break
        except OSError:
            pass  # still starting
        time.sleep(1)
    else:
        pytest.fail(f"DIAG-B001 did not fire within 110 s of the real-time replay (step {replay.k})")
    now = time.time()
    assert now > real_start + 30  # the alert waited for its `for` (50 s), on data replayed in real time
    span = int(now - real_start + CATCH_UP_S) + 1
    fired = {tuple(sorted(r["metric"].items())) for r in _query(
        url, f'group by(code, diag_role, diag_worker) (max_over_time(ALERTS{{alertstate="firing"}}[{span}s]))')}
    # diag's findings (exported codes) on the logs that hold over the replayed real-time stretch
    real_to = real_from + timedelta(seconds=now - real_start)
    logs = json.loads(_diag("tail", str(RUN), "--format", "json").stdout)
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
    (alert,) = _query(url, firing_b001)
    assert (alert["metric"]["severity"], alert["metric"]["role"]) == ("warning", "prefill")
