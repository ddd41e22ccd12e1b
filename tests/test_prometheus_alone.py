"""`diag tail --prom URL` with no paths: a real Prometheus holding the prefill-bound scenario's series
(the sample generator's Tachometer capture, backfilled with ``promtool tsdb create-blocks-from
openmetrics``) gives the same endpoints and runtime findings as `diag tail` on that run's logs."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import polars as pl
import pytest
from schemas import validate
from test_prometheus_live import _free_port, _prometheus_binary

from helpers import stop_server

ROOT = Path(__file__).resolve().parents[1]
RUN = ROOT / "samples" / "runs" / "prefill-bound"
TACH = ROOT / "samples" / "telemetry" / "prefill-bound-tachometer"
WINDOW = ("--prom-start", "2026-08-12T14:10:00Z", "--prom-end", "2026-08-12T14:27:00Z")


def _diag(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "diag", *args], capture_output=True, text=True, cwd=ROOT,
                          timeout=120)


def openmetrics(capture: Path) -> str:
    """The capture's counters and gauges as OpenMetrics, each process a target (job, instance and the
    target labels worker_role/worker_index a scrape config would add)."""
    df = pl.read_parquet(capture).filter(pl.col("histogram_bucket_upper").is_null()
                                         & ~pl.col("metric_name").str.contains("le="))
    out = []
    for (family,), part in df.sort("metric_name_clean").partition_by("metric_name_clean", as_dict=True,
                                                                     maintain_order=True).items():
        out.append(f"# TYPE {family.removesuffix('_total')} {'counter' if family.endswith('_total') else 'gauge'}")
        for row in part.sort("scraper_endpoint", "metric_name", "timestamp_ns").iter_rows(named=True):
            labels = row["metric_name"].partition("{")[2].rstrip("}")
            target = (f'job="vllm",instance="{row["hostname"]}:7500",worker_role="{row["worker_role"]}",'
                      f'worker_index="{row["worker_index"]}"')
            out.append(f'{family}{{{labels},{target}}} {row["metric_value"]} {row["timestamp_ns"] / 1e9:.3f}')
    return "\n".join([*out, "# EOF"]) + "\n"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    binary = _prometheus_binary()
    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.fail("promtool is missing next to prometheus (Debian's prometheus package ships both)")
    tmp = tmp_path_factory.mktemp("prom-alone")
    (capture,) = TACH.rglob("final.parquet")
    (tmp / "data.om").write_text(openmetrics(capture))
    subprocess.run([promtool, "tsdb", "create-blocks-from", "openmetrics", str(tmp / "data.om"), str(tmp / "tsdb")],
                   check=True, capture_output=True, timeout=120)
    (tmp / "prometheus.yml").write_text("global:\n  scrape_interval: 15s\nscrape_configs: []\n")
    port = _free_port()
    log = (tmp / "prometheus.log").open("w")
    proc = subprocess.Popen([binary, f"--config.file={tmp / 'prometheus.yml'}", f"--storage.tsdb.path={tmp / 'tsdb'}",
                             "--storage.tsdb.retention.time=100y", f"--web.listen-address=127.0.0.1:{port}"],
                            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(f"{url}/-/ready", timeout=2) as resp:
                    if resp.status == 200:
                        break
            except OSError:
                pass
            assert proc.poll() is None, (tmp / "prometheus.log").read_text()[-2000:]
            time.sleep(0.25)
        else:
            pytest.fail("Prometheus not ready in 30 s: " + (tmp / "prometheus.log").read_text()[-2000:])
        yield url
    finally:
        stop_server(proc, log)


def _runtime(doc: dict) -> set[tuple[str, str]]:
    return {(f["code"], f.get("endpoint") or "") for f in doc["findings"]
            if f["code"].startswith(("DIAG-B", "DIAG-K001", "DIAG-K002", "DIAG-E", "DIAG-L001"))}


@pytest.mark.prometheus
def test_server_alone_matches_the_logs(server: str) -> None:
    res = _diag("tail", "--prom", server, *WINDOW, "--format", "json")
    assert res.returncode in (0, 1), res.stderr
    doc = json.loads(res.stdout)
    validate(doc, "tail")
    logs = json.loads(_diag("tail", str(RUN), "--format", "json").stdout)
    eps = {e["id"]: (e["role"], e["engines"]) for e in doc["endpoints"]}
    assert eps == {e["id"]: (e["role"], e["engines"]) for e in logs["endpoints"]}
    assert _runtime(doc) == _runtime(logs) == {("DIAG-B001", "")}
    decode = next(e for e in doc["endpoints"] if e["id"] == "decode-w0")["stats"]
    want = next(e for e in logs["endpoints"] if e["id"] == "decode-w0")["stats"]
    assert decode["kv_usage_max"] == want["kv_usage_max"]  # a gauge, as scraped
    # a rate pushed down to the server: rate() over 4 scrape intervals of the 10 s capture, sampled at
    # each step, smooths the ramps the 10 s log intervals show
    assert decode["gen_tps_mean"] == pytest.approx(want["gen_tps_mean"], rel=0.15)
    assert [s["kind"] for s in doc["sources"]] == ["prometheus"] * len(doc["sources"])


@pytest.mark.prometheus
def test_server_alone_errors_are_one_line(server: str) -> None:
    empty = _diag("tail", "--prom", server, "--since", "5m")  # the capture is months away from now
    assert empty.returncode == 2 and empty.stdout == ""
    assert empty.stderr.startswith(f"diag tail: {server}: no vLLM series between ")
    assert len(empty.stderr.strip().splitlines()) == 1
    missing = _diag("tail", "--prom", f"{server}/nowhere", *WINDOW)
    assert missing.returncode == 2 and len(missing.stderr.strip().splitlines()) == 1
    assert "Prometheus query failed" in missing.stderr and "Traceback" not in missing.stderr
    closed = f"http://127.0.0.1:{_free_port()}"
    refused = _diag("tail", "--prom", closed, "--since", "15m")
    assert (refused.returncode, refused.stderr) == (2, f"diag tail: {closed}: cannot connect: Connection refused\n")
    for args, msg in ((("--since", "soon"), "--since 'soon': not a duration"),
                      (("--since", "5m", "--prom-start", WINDOW[1]), "--since and --prom-start both set the start")):
        bad = _diag("tail", "--prom", server, *args)
        assert bad.returncode == 2 and msg in bad.stderr
    assert _diag("tail").returncode == 2
