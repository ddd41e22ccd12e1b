"""A real Prometheus scraping a local exporter that replays a sample scenario's series (test helper).

The exporter serves the prefill-bound scenario's Tachometer capture (the sample generator's
``final.parquet``: gauges, counters and the latency histograms as ``_bucket`` series) one scrape step
at a time, every sample with its own timestamp shifted to now, each process a target (``job``,
``instance`` and the ``worker_role``/``worker_index`` target labels a scrape config would add).

Prometheus evaluates rules at the wall clock only, so the replay catches up on the scenario's first
minutes (one 10 s step per 200 ms scrape, timestamps in the past) and then plays it in real time from
``real_from``, a point inside diag's DIAG-B001 window (the last five minutes of it: the top
concurrency level, a queue that never dips). One server serves every test of the session
(:func:`start`); the exported rules are loaded into it.
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
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import polars as pl
from test_prometheus_live import _free_port, _prometheus_binary

from helpers import stop_server

ROOT = Path(__file__).resolve().parents[1]
RUN = ROOT / "samples" / "runs" / "prefill-bound"
TACH = ROOT / "samples" / "telemetry" / "prefill-bound-tachometer"
CATCH_UP_S = 20.0     # wall seconds before the replay reaches real_from
SCRAPE = "200ms"


def diag(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "diag", *args], capture_output=True, text=True, cwd=ROOT,
                          timeout=120)


def capture() -> Path:
    (path,) = TACH.rglob("final.parquet")
    return path


def steps(path: Path) -> list[list[tuple[float, str]]]:
    """Per scrape step (the k-th scrape of every process): (timestamp s, exposition line without it).
    A histogram bucket row (``le`` inline, the family name) becomes its ``_bucket`` series."""
    df = pl.read_parquet(path)
    out: list[list[tuple[float, str]]] = []
    for (_,), part in df.partition_by("scraper_endpoint", as_dict=True, maintain_order=True).items():
        times = sorted(part["timestamp_ns"].unique().to_list())
        for row in part.iter_rows(named=True):
            k = times.index(row["timestamp_ns"])
            family, _, labels = row["metric_name"].partition("{")
            if 'le="' in labels:
                family += "_bucket"
            target = (f'job="vllm",instance="{row["hostname"]}:7500",worker_role="{row["worker_role"]}",'
                      f'worker_index="{row["worker_index"]}"')
            line = f'{family}{{{labels.rstrip("}")},{target}}} {row["metric_value"]}'
            while len(out) <= k:
                out.append([])
            out[k].append((row["timestamp_ns"] / 1e9, line))
    return out


class Replay:
    """Serves step k of the scenario, its timestamps shifted by ``offset_s``; a scrape moves on to the
    next step once that step's shifted time has come (so the past is caught up one step per scrape). A
    step counts as served once its response was written whole: a scrape that timed out on a loaded
    machine gets the same step again, so no step is missing from the server (its irate would span two)."""

    def __init__(self, series: list[list[tuple[float, str]]], offset_s: float) -> None:
        self.steps, self.offset_s, self.k = series, offset_s, 0
        self.lock = threading.Lock()

    def body(self) -> tuple[int, str]:
        """The step to serve now and its exposition text."""
        with self.lock:
            k = self.k + 1
            if k >= len(self.steps) or max(t for t, _ in self.steps[k]) + self.offset_s > time.time():
                k = self.k
            return k, "".join(f"{line} {int((t + self.offset_s) * 1000)}\n" for t, line in self.steps[k])

    def delivered(self, k: int) -> None:
        with self.lock:
            self.k = max(self.k, k)

    def served_until(self) -> float:
        """The scenario time (s) of the newest step served so far."""
        with self.lock:
            return max(t for t, _ in self.steps[self.k])


def _handler(replay: Replay) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            k = None
            if self.path == "/served":  # the tests' view of the replay (they may run in other processes)
                data, kind = json.dumps({"until": replay.served_until(), "k": replay.k}).encode(), "application/json"
            else:
                k, text = replay.body()
                data, kind = text.encode(), "text/plain; version=0.0.4"
            try:
                self.send_response(200)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
                self.wfile.flush()
            except (BrokenPipeError, ConnectionResetError):
                return  # the scraper gave up (its timeout): this step is served again
            if k is not None:
                replay.delivered(k)

        def log_message(self, *args: object) -> None:
            pass

    return Handler


def query(url: str, expr: str, at: float | None = None) -> list[dict]:
    """An instant query (at ``at``, epoch seconds, else now): its result vector."""
    params = {"query": expr} | ({"time": f"{at:.3f}"} if at is not None else {})
    with urllib.request.urlopen(f"{url}/api/v1/query?{urllib.parse.urlencode(params)}", timeout=5) as resp:
        return json.loads(resp.read())["data"]["result"]


@dataclass(frozen=True)
class Replayed:
    """A running replay: the Prometheus URL, the exporter's URL, the wall time at which it plays
    ``real_from`` (scenario time) in real time, and the shift from scenario to wall time. Plain values, so
    the process that started it hands it to the test workers through the environment (tests/conftest.py)."""

    url: str
    exporter: str
    real_start: float
    real_from: datetime
    offset_s: float

    def to_env(self) -> str:
        return json.dumps({**self.__dict__, "real_from": self.real_from.isoformat()})

    @classmethod
    def from_env(cls, text: str) -> Replayed:
        fields = json.loads(text)
        return cls(**{**fields, "real_from": datetime.fromisoformat(fields["real_from"])})

    def served(self) -> dict:
        """The replay's progress: ``until`` (scenario time, s, of the newest step served) and step ``k``."""
        with urllib.request.urlopen(f"{self.exporter}/served", timeout=5) as resp:
            return json.loads(resp.read())

    def wall(self, scenario: datetime) -> float:
        return scenario.timestamp() + self.offset_s

    def wait_served(self, scenario: datetime, timeout_s: float = 60.0) -> None:
        """Wait until Prometheus has scraped the scenario up to ``scenario`` (raises on timeout)."""
        deadline = time.time() + timeout_s
        while self.served()["until"] < scenario.timestamp():
            if time.time() > deadline:
                raise TimeoutError(f"the replay did not reach {scenario} in {timeout_s:g} s")
            time.sleep(0.2)
        time.sleep(1.0)  # the next scrapes store it


@contextmanager
def start(tmp: Path, logs: dict) -> Iterator[Replayed]:
    """Start the exporter and a Prometheus scraping it with the exported rules loaded; ``logs`` is
    ``diag tail --format json`` of the scenario's logs (it places ``real_from``)."""
    binary = _prometheus_binary()
    b001 = next(f for f in logs["findings"] if f["code"] == "DIAG-B001")
    real_from = datetime.fromisoformat(b001["last_ts"]) - timedelta(minutes=5)
    begin = time.time()
    offset = begin + CATCH_UP_S - real_from.timestamp()
    replay = Replay(steps(capture()), offset)
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(replay))
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    rules = diag("rules", "export", "--format", "prometheus")
    assert rules.returncode == 0, rules.stderr
    (tmp / "rules.yml").write_text(rules.stdout)
    (tmp / "prometheus.yml").write_text(
        f"global:\n  scrape_interval: {SCRAPE}\n  scrape_timeout: {SCRAPE}\n  evaluation_interval: 1s\n"
        f"rule_files: ['{tmp / 'rules.yml'}']\nscrape_configs:\n"
        f"  - job_name: replay\n    honor_labels: true\n"
        f"    static_configs:\n      - targets: ['127.0.0.1:{server.server_address[1]}']\n")
    port = _free_port()
    log = (tmp / "prometheus.log").open("w")
    proc = subprocess.Popen([binary, f"--config.file={tmp / 'prometheus.yml'}",
                             f"--storage.tsdb.path={tmp / 'data'}", f"--web.listen-address=127.0.0.1:{port}"],
                            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    try:
        yield Replayed(f"http://127.0.0.1:{port}", f"http://127.0.0.1:{server.server_address[1]}",
                       begin + CATCH_UP_S, real_from, offset)
    finally:
        stop_server(proc, log)
        server.shutdown()
        server.server_close()


@contextmanager
def running(tmp: Path) -> Iterator[Replayed]:
    """The replay in a process of its own (``python prom_replay.py TMP``): its exporter answers each scrape
    in time however busy the test process is (a scrape that times out loses its step's irate pair)."""
    proc = subprocess.Popen([sys.executable, __file__, str(tmp)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            text=True, cwd=ROOT)
    try:
        line = proc.stdout.readline()
        if not line:
            raise RuntimeError(f"the replay did not start (exit {proc.wait(timeout=30)}); see {tmp}")
        yield Replayed.from_env(line)
    finally:
        proc.stdin.close()  # end of input: the replay stops its server and exits
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()


if __name__ == "__main__":
    out = Path(sys.argv[1])
    with start(out, json.loads(diag("tail", str(RUN), "--format", "json").stdout)) as replayed:
        print(replayed.to_env(), flush=True)
        sys.stdin.read()
