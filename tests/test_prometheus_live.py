"""Live metric sources over loopback: /metrics scrapes of a local http.server, and a real Prometheus
server (the `prometheus` binary) scraping it every second, queried through prometheus-api-client.

The server test skips when the binary is absent, unless DIAG_REQUIRE_PROMETHEUS=1 (CI), where
it fails. Every loop here is bounded in time; only 127.0.0.1 is contacted.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from itertools import pairwise
from pathlib import Path
from statistics import median

import pytest
from schemas import validate

from diag.prom import (
    PromSourceError,
    Scraper,
    ScrapeSource,
    ServerSource,
    Target,
    extra_sources,
    query_server,
    series_endpoint,
    watch_sources,
)

from helpers import stop_server

ROOT = Path(__file__).resolve().parents[1]
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
Route = Callable[[], tuple[int, str]]


class _Handler(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        route = self.server.routes.get(self.path)  # type: ignore[attr-defined]
        status, body = route() if route else (404, "not found\n")
        data = body.encode()
        self.send_response(status)
        self.send_header("Content-Type", CONTENT_TYPE)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def exporter() -> Iterator[tuple[str, dict[str, Route]]]:
    """A local exposition server on an ephemeral port: (base URL, routes to fill)."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    server.daemon_threads = True
    server.routes = {}  # type: ignore[attr-defined]
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", server.routes  # type: ignore[attr-defined]
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _engines(lines: dict[str, str], engines: dict[str, dict[str, float]]) -> str:
    """Exposition text: ``lines`` maps a sample name to its TYPE; ``engines`` gives per engine values."""
    out = []
    for name, typ in lines.items():
        family = name.removesuffix("_total")
        out += [f"# HELP {family} test", f"# TYPE {family} {typ}"]
        for eng, vals in engines.items():
            if name in vals:
                extra = ',source="local_compute"' if "by_source" in name else ""
                out.append(f'{name}{{engine="{eng}",model_name="m"{extra}}} {vals[name]}')
    return "\n".join(out) + "\n"


VLLM = {"vllm:num_requests_running": "gauge", "vllm:num_requests_waiting": "gauge",
        "vllm:kv_cache_usage_perc": "gauge", "vllm:gpu_cache_usage_perc": "gauge",
        "vllm:prompt_tokens_total": "counter", "vllm:prompt_tokens_by_source_total": "counter",
        "vllm:generation_tokens_total": "counter", "vllm:num_preemptions_total": "counter"}


def _counting_route(extra: str = "") -> Route:
    """Each request advances the counters by a fixed step: prompt +1000, gen +100, preemptions +1."""
    n = {"requests": 0}

    def route() -> tuple[int, str]:
        n["requests"] += 1
        k = n["requests"]
        vals = {e: {"vllm:num_requests_running": run, "vllm:num_requests_waiting": 2.0,
                    "vllm:kv_cache_usage_perc": 0.125, "vllm:prompt_tokens_total": 1000.0 * k,
                    "vllm:generation_tokens_total": 100.0 * k, "vllm:num_preemptions_total": float(k)}
                for e, run in (("0", 4.0), ("1", 5.0))}
        return 200, extra + _engines(VLLM, vals)

    return route


# ---------------------------------------------------------------- /metrics scrapes

def test_scrape_named_and_labelled_targets(exporter) -> None:
    base, routes = exporter
    routes["/named"] = _counting_route()
    routes["/prefill"] = _counting_route('dynamo_component_uptime_seconds{dynamo_component="prefill"} 12\n')
    sc = Scraper([f"decode-w3={base}/named", f"{base}/prefill"], timeout_s=2)
    assert sc.poll() == []
    t_between = datetime.now(tz=UTC)
    time.sleep(0.2)
    assert sc.poll() == []
    named, pre = sc.logs()
    info = named.info
    assert (named.kind, info.role, info.index, info.node) == ("prometheus", "decode", 3, "127.0.0.1")
    assert (pre.info.role, pre.info.index) == ("prefill", 0)
    for log in (named, pre):
        assert [r.engine for r in log.records] == [0, 1]  # the first poll is the counters' baseline
        for r in log.records:
            assert r.variant == "prom" and r.ts > t_between and r.line == 2
            assert (r.running, r.waiting, r.kv_usage, r.preemptions) == (4 + r.engine, 2, 12.5, 1)
            assert r.prompt_tps is None   # vllm:prompt_tokens alone: every source, not split (prompt_all_tps)
            assert r.prompt_all_tps == pytest.approx(10 * r.gen_tps)  # +1000 and +100 over the same interval
            assert 1000 / 5 < r.prompt_all_tps < 1000 / 0.2  # the interval was at least 0.2 s, and short
    assert log.counts.lines == 2 and log.size > 0


def test_scrape_failures_are_one_line_errors(exporter) -> None:
    base, routes = exporter
    routes["/metrics"] = _counting_route()
    routes["/garbage"] = lambda: (200, "<html>hello</html>\n")
    routes["/slow"] = lambda: (time.sleep(1.5), (200, "x 1\n"))[1]
    closed = f"http://127.0.0.1:{_free_port()}/metrics"
    logs = extra_sources([f"{base}/metrics", f"{base}/nope", f"{base}/garbage", closed, f"{base}/slow"], None,
                         rounds=2, interval_s=0.05, timeout_s=0.5)
    ok, missing, garbage, refused, slow = logs
    assert ok.error is None and len(ok.records) == 2
    assert missing.error == f"{base}/nope: HTTP 404 Not Found"
    assert garbage.error.startswith(f"{base}/garbage: not Prometheus text: line 1")
    assert refused.error.startswith(f"{closed}: cannot connect")
    assert slow.error.startswith(f"{base}/slow: no response within 0.5 s")
    assert all("\n" not in lg.error for lg in logs[1:])
    big = Scraper([f"{base}/metrics"], max_bytes=100)
    assert big.poll() == [f"{base}/metrics: response larger than 100 bytes"]
    for bad in ("ftp://127.0.0.1/metrics", "127.0.0.1:8000", "router-w1=http://127.0.0.1/metrics"):
        with pytest.raises(PromSourceError):
            Target(bad)


def _diag(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "diag", *args], capture_output=True, text=True, cwd=ROOT,
                          timeout=120)


def test_tail_scrape_adds_a_live_endpoint(exporter) -> None:
    base, routes = exporter
    routes["/metrics"] = _counting_route()
    run = str(ROOT / "samples" / "runs" / "healthy")
    res = _diag("tail", run, "--scrape", f"decode-w7={base}/metrics", "--format", "json")
    assert res.returncode in (0, 1), res.stderr
    doc = json.loads(res.stdout)
    validate(doc, "tail")
    eps = {e["id"]: e for e in doc["endpoints"]}
    # none of its samples lies in the run's verdict window (C=1024 of the logs, long before the scrapes):
    # its figures are over its own active window
    stats = eps["decode-w7"]["stats"]
    assert eps["decode-w7"]["samples"] == 2 and eps["decode-w0"]["stats"]["window"]["label"] == "C=1,024 steady"
    assert (stats["window"]["label"], stats["running_mean"], stats["kv_usage_mean"]) == ("active", 9, 12.5)
    assert [s["path"] for s in doc["sources"] if s["kind"] == "prometheus"] == [f"{base}/metrics"]
    one_log = str(ROOT / "samples" / "runs" / "stats-missing" / "logs" / "gb200-r09-n12_prefill_w0.out")
    bad = _diag("tail", one_log, "--scrape", f"http://127.0.0.1:{_free_port()}/metrics")
    assert bad.returncode == 2 and "cannot connect" in bad.stderr
    assert len(bad.stderr.strip().splitlines()) == 1
    bad = _diag("tail", one_log, "--prom", "http://127.0.0.1:9/", "--prom-start", "yesterday")
    assert bad.returncode == 2 and "--prom-start 'yesterday': not an ISO time" in bad.stderr


def test_watch_sources_follow_the_follower_interface(exporter) -> None:
    base, routes = exporter
    routes["/metrics"] = _counting_route()
    (src,) = watch_sources([f"prefill-w1={base}/metrics"], None)
    assert isinstance(src, ScrapeSource) and src.label == f"scraping {base}/metrics"
    assert src.poll()[:2] == ([], [f"{base}/metrics"])  # the baseline scrape: a new source, no rows yet
    assert src.poll()[:2] == ([], [])                    # within min_interval_s: nothing is fetched
    time.sleep(src.min_interval_s)
    new, added, _ = src.poll()
    assert added == []
    url = f"{base}/metrics"
    assert [(p, r.engine, r.running) for p, r in new] == [(url, 0, 4), (url, 1, 5)]
    (log,) = src.logs()
    assert (log.info.role, log.info.index, len(log.records)) == ("prefill", 1, 2) and src.flush()[:2] == ([], [])
    with pytest.raises(PromSourceError):
        watch_sources(None, "127.0.0.1:9090")


def test_series_endpoint_labels() -> None:
    assert series_endpoint({"dynamo_component": "prefill", "job": "vllm"}) == ("prefill", None)
    assert series_endpoint({"dynamo_component": "backend", "job": "decode-w2"}) == ("decode", 2)
    assert series_endpoint({"worker_type": "decode", "instance": "n1:7500"}) == ("decode", None)
    assert series_endpoint({"job": "prefill_3", "instance": "n1:7500"}) == ("prefill", 3)
    assert series_endpoint({"job": "vllm", "instance": "n1:7500"}) == ("unknown", None)


# ---------------------------------------------------------------- a real Prometheus server

def _prometheus_binary() -> str:
    found = shutil.which("prometheus")
    if found:
        return found
    reason = "the prometheus binary is not installed (apt-get install prometheus; .ci/run installs it)"
    if os.environ.get("DIAG_REQUIRE_PROMETHEUS") == "1":
        pytest.fail(reason + " and DIAG_REQUIRE_PROMETHEUS=1")
    pytest.skip(reason)


def _get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=2) as resp:
            return resp.status, resp.read().decode()
    except OSError:
        return 0, ""


def _timed_route(t0: float, text: Callable[[float], str]) -> Route:
    return lambda: (200, text(time.time() - t0))


@pytest.mark.prometheus
def test_real_prometheus_server(exporter, tmp_path: Path) -> None:
    binary = _prometheus_binary()
    base, routes = exporter
    t0 = time.time()
    # decode: job "decode-w0" names it; counters grow 1000/250/2 per second
    routes["/decode"] = _timed_route(t0, lambda t: _engines(VLLM, {
        e: {"vllm:num_requests_running": run, "vllm:num_requests_waiting": 3.0,
            "vllm:kv_cache_usage_perc": 0.42, "vllm:prompt_tokens_total": 1000 * t,
            "vllm:generation_tokens_total": 250 * t, "vllm:num_preemptions_total": 2 * t} for e, run in (("0", 7.0), ("1", 9.0))}))
    # prefill: an old vLLM's KV name, a dynamo_component target label, local-compute prompt tokens
    routes["/prefill"] = _timed_route(t0, lambda t: _engines(VLLM, {"0": {
        "vllm:num_requests_running": 1.0, "vllm:num_requests_waiting": 6.0, "vllm:gpu_cache_usage_perc": 0.25,
        "vllm:prompt_tokens_total": 5000 * t, "vllm:prompt_tokens_by_source_total": 3000 * t,
        "vllm:generation_tokens_total": 10 * t}}))
    target = base.removeprefix("http://")
    (tmp_path / "prometheus.yml").write_text(
        "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\nscrape_configs:\n"
        f"  - job_name: decode-w0\n    metrics_path: /decode\n"
        f"    static_configs:\n      - targets: ['{target}']\n"
        f"  - job_name: vllm\n    metrics_path: /prefill\n"
        f"    static_configs:\n      - targets: ['{target}']\n"
        "        labels:\n          dynamo_component: prefill\n")
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    log = (tmp_path / "prometheus.log").open("w")
    proc = subprocess.Popen([binary, f"--config.file={tmp_path / 'prometheus.yml'}",
                             f"--storage.tsdb.path={tmp_path / 'data'}",
                             f"--web.listen-address=127.0.0.1:{port}"],
                            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 20
        query = f"{url}/api/v1/query?query=min(count_over_time(vllm:num_requests_running%5B1m%5D))"
        while time.monotonic() < deadline:  # ready, and at least 6 scrapes of both targets ingested
            status, body = _get(query)
            res = json.loads(body)["data"]["result"] if status == 200 else []
            if res and float(res[0]["value"][1]) >= 6:
                break
            assert proc.poll() is None, (tmp_path / "prometheus.log").read_text()[-2000:]
            time.sleep(0.25)
        else:
            pytest.fail("Prometheus ingested fewer than 6 scrapes in 20 s: " + (tmp_path / "prometheus.log")
                        .read_text()[-2000:])
        end = datetime.now(tz=UTC)
        logs = query_server(url, end - timedelta(seconds=time.time() - t0 + 2), end)
        by_ep = {(lg.info.role, lg.info.index): lg for lg in logs}
        assert set(by_ep) == {("decode", 0), ("prefill", 0)}
        dec = [r for r in by_ep[("decode", 0)].records if r.prompt_all_tps is not None]   # unsplit: every source
        assert {r.engine for r in dec} == {0, 1} and len(dec) >= 6
        for r in dec:
            assert r.variant == "prom"
            assert (r.running, r.waiting, r.kv_usage) == (7 + 2 * r.engine, 3, 42.0)
        # while its window holds < 3 scrapes rate() extrapolates half an interval back only: judge the rest
        full = [r for r in dec if r.ts >= dec[0].ts + timedelta(seconds=2)]
        assert len(full) >= 4
        assert median(r.prompt_all_tps for r in full) == pytest.approx(1000, rel=0.1)
        assert median(r.gen_tps for r in full) == pytest.approx(250, rel=0.1)
        assert median(r.preemptions for r in full) == 2  # rate 2/s over the 1 s step
        pre = [r for r in by_ep[("prefill", 0)].records if r.prompt_tps is not None]
        assert pre and all((r.engine, r.running, r.waiting, r.kv_usage) == (0, 1, 6, 25.0) for r in pre)
        full = [r for r in pre if r.ts >= pre[0].ts + timedelta(seconds=2)]
        assert median(r.prompt_tps for r in full) == pytest.approx(3000, rel=0.1)  # local compute, not 5000
        ts0 = [r.ts for r in dec if r.engine == 0]
        steps = sorted({(b - a).total_seconds() for a, b in pairwise(ts0)})
        assert steps == [1.0]  # the 1 s scrape interval, read from the targets API, is the step
        live = ServerSource(url, window=timedelta(seconds=60), min_interval_s=0)
        first, added, _ = live.poll()
        assert sorted(added) == sorted(lg.path for lg in logs) and len(first) >= len(dec)
        time.sleep(1.2)
        again, added, _ = live.poll()  # only samples newer than those already passed on
        assert added == [] and all(r.ts > max(r0.ts for _, r0 in first) for _, r in again)
        res = _diag("tail", str(ROOT / "samples" / "runs" / "stats-missing"), "--prom", url,
                    "--format", "json",
                    "--prom-start", (end - timedelta(seconds=30)).isoformat(), "--prom-end", end.isoformat())
        assert res.returncode in (0, 1), res.stderr
        eps = {e["id"]: e for e in json.loads(res.stdout)["endpoints"]}
        assert eps["decode-w0"]["samples"] > 32 and eps["decode-w0"]["engines"] == 8
    finally:
        stop_server(proc, log)
