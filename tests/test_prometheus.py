"""Prometheus exposition -> StatsSample: real pasted scrapes, aliases, counter resets, the
stats-missing sample's raw_prometheus.jsonl (values checked against the file) and `diag tail` on it."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from itertools import pairwise
from pathlib import Path

import polars as pl
import pytest
from loading import load_run
from prometheus_client.parser import text_string_to_metric_families
from schemas import validate

from diag.parsers.prom_vocab import ALIASES, FIELDS, canonical, prefill_deployments, series_endpoint
from diag.parsers.prometheus import (
    ExpositionError,
    StatsConverter,
    engine_values,
    parse_exposition,
    read_capture,
    role_from_samples,
    scrapes_to_stats,
    worker_of,
)
from diag.parsers.promql import choose_step, parse_duration, server_queries
from diag.parsers.records import StatsSample
from diag.prom import capture_logs

ROOT = Path(__file__).resolve().parents[1]
RUN = ROOT / "samples" / "runs" / "stats-missing"
CAPTURE = RUN / "logs" / "raw_prometheus.jsonl"
T0 = datetime(2026, 8, 20, 9, 0, tzinfo=UTC)


def _expo(prompt: float, gen: float, pre: float, kv: float = 0.5, running: int = 3, engine: str = "0") -> str:
    lab = f'{{engine="{engine}",model_name="m"}}'
    return "\n".join([
        "# TYPE vllm:num_requests_running gauge", f"vllm:num_requests_running{lab} {running}",
        "# TYPE vllm:num_requests_waiting gauge", f"vllm:num_requests_waiting{lab} 1",
        "# TYPE vllm:kv_cache_usage_perc gauge", f"vllm:kv_cache_usage_perc{lab} {kv}",
        "# TYPE vllm:prompt_tokens counter", f"vllm:prompt_tokens_total{lab} {prompt}",
        f"vllm:prompt_tokens_created{lab} 1.7e9",
        "# TYPE vllm:generation_tokens counter", f"vllm:generation_tokens_total{lab} {gen}",
        "# TYPE vllm:num_preemptions counter", f"vllm:num_preemptions_total{lab} {pre}", ""])


# ---------------------------------------------------------------- real pasted scrapes

def test_f01_old_names_map_to_current(real_logs: Path) -> None:
    samples = parse_exposition((real_logs / "f-01.log").read_text())
    by = {s.name: s for s in samples}
    assert by["process_cpu_seconds_total"].value == pytest.approx(439.72)
    assert by["process_max_fds"].value == 1048576.0
    kv = by["vllm:gpu_cache_usage_perc"]
    assert (kv.metric, kv.legacy, kv.value) == ("vllm:kv_cache_usage_perc", True, 0.0)
    assert kv.labels == {"model_name": "Qwen/Qwen2.5-Coder-32B-Instruct"}
    assert engine_values(samples) == {None: {"running": 0.0, "waiting": 0.0, "kv": 0.0}}
    (row,) = StatsConverter().add(T0, samples, 7)  # gauges only: no baseline needed
    assert (row.variant, row.engine, row.running, row.waiting, row.kv_usage, row.prompt_tps, row.line) == (
        "prom", None, 0, 0, 0.0, None, 7)


def test_f03_markdown_quoted_paste(real_logs: Path) -> None:
    raw = (real_logs / "f-03.log").read_text()
    with pytest.raises(ValueError):  # as pasted, the parser cannot read it ...
        list(text_string_to_metric_families(raw))
    samples = parse_exposition(raw)  # ... cleaned, it can
    by = {(s.name, tuple(sorted(s.labels.items()))): s.value for s in samples}
    assert by[("python_gc_objects_collected_total", (("generation", "0"),))] == 7902.0
    assert by[("python_gc_collections_total", (("generation", "2"),))] == 79.0
    assert by[("process_virtual_memory_bytes", ())] == 1.0322907136e11
    assert {s.type for s in samples if s.name == "python_gc_collections_total"} == {"counter"}
    assert len(samples) == 11
    assert engine_values(samples) == {}  # the issue: no vllm:* series in this scrape
    assert StatsConverter().add(T0, samples, 1) == []


def test_f05_current_names_created_ignored(real_logs: Path) -> None:
    samples = parse_exposition((real_logs / "f-05.log").read_text())
    assert not [s for s in samples if s.name.endswith("_created")]
    by = {s.name: s for s in samples}
    assert set(by) == {"vllm:gpu_prefix_cache_hits_total", "vllm:kv_cache_usage_perc",
                       "vllm:prefix_cache_queries_total"}
    assert by["vllm:kv_cache_usage_perc"].value == 9.75010481363281e-06
    assert by["vllm:kv_cache_usage_perc"].labels == {"engine": "0", "model_name": "zai-org/GLM-4.5"}
    assert (by["vllm:gpu_prefix_cache_hits_total"].metric, by["vllm:gpu_prefix_cache_hits_total"].legacy) == (
        "vllm:prefix_cache_hits", True)
    assert by["vllm:prefix_cache_queries_total"].value == 32.0
    assert parse_exposition((real_logs / "f-05.log").read_text(), fields_only=True) == samples
    conv = StatsConverter()
    assert conv.add(T0, samples, 1) == []  # prefix-cache counters: the first scrape is the baseline
    (row,) = conv.add(T0 + timedelta(seconds=10), samples, 2)
    assert row.engine == 0 and row.kv_usage == pytest.approx(9.75010481363281e-04)
    assert row.prefix_hit is None  # no new queries in the interval: no hit rate
    assert row.prompt_tps is None and row.running is None


def test_bad_text_is_one_line_value_error() -> None:
    with pytest.raises(ExpositionError) as e:
        parse_exposition("vllm:num_requests_running 1\nvllm:num_requests_waiting{engine} 2\n")
    assert isinstance(e.value, ValueError)
    assert "\n" not in str(e.value) and "line 2" in str(e.value)
    with pytest.raises(ExpositionError, match="line 1 'hello world'"):
        parse_exposition("hello world")


# ---------------------------------------------------------------- names, counters, resets

def test_aliases_and_fields_are_consistent() -> None:
    assert canonical("vllm:gpu_cache_usage_perc") == ("vllm:kv_cache_usage_perc", True)
    assert canonical("vllm:prompt_tokens_total") == ("vllm:prompt_tokens", False)
    assert canonical("vllm:prompt_tokens_created") is None
    assert set(ALIASES.values()).isdisjoint(ALIASES)
    for _, sources in FIELDS.values():
        for metric, _ in sources:
            assert metric not in ALIASES, f"{metric}: FIELDS names current metrics only"
    both = ('vllm:gpu_cache_usage_perc{engine="0"} 0.9\nvllm:kv_cache_usage_perc{engine="0"} 0.25\n'
            'vllm:gpu_cache_usage_perc{engine="1"} 0.7\n')
    assert engine_values(parse_exposition(both)) == {"0": {"kv": 0.25}, "1": {"kv": 0.7}}


def test_counters_become_rates_with_reset() -> None:
    scrapes = [(T0, 1, _expo(1000, 100, 2)), (T0 + timedelta(seconds=10), 2, _expo(3000, 600, 5, kv=0.75)),
               (T0 + timedelta(seconds=20), 3, _expo(500, 40, 1)),     # engine restarted: counters reset
               (T0 + timedelta(seconds=20), 4, _expo(9e9, 9e9, 9))]    # same instant again: ignored
    rows = scrapes_to_stats([(ts, n, parse_exposition(t)) for ts, n, t in scrapes])
    got = [(r.line, r.prompt_all_tps, r.gen_tps, r.preemptions, r.kv_usage, r.running, r.waiting) for r in rows]
    assert all(r.prompt_tps is None for r in rows)   # vllm:prompt_tokens alone: not split by source
    assert got == [(2, 200.0, 50.0, 3, 75.0, 3, 1), (3, 50.0, 4.0, 1, 50.0, 3, 1)]
    conv = StatsConverter()
    for ts, n, t in scrapes[:3]:
        conv.add(ts, parse_exposition(t), n)
    assert conv.resets == 3
    (snap,) = StatsConverter(baseline_rows=True).add(T0, parse_exposition(scrapes[0][2]), 1)  # one snapshot
    assert (snap.running, snap.kv_usage, snap.prompt_tps, snap.preemptions) == (3, 50.0, None, None)


def test_local_compute_prompt_tokens_preferred() -> None:
    text = ('vllm:prompt_tokens_total{engine="0"} 5000\n'
            'vllm:prompt_tokens_by_source_total{engine="0",source="local_compute"} 1200\n'
            'vllm:prompt_tokens_by_source_total{engine="0",source="external_kv_transfer"} 3800\n')
    assert engine_values(parse_exposition(text)) == {"0": {"prompt": 1200.0, "prompt_all": 5000.0}}
    conv = StatsConverter()
    conv.add(T0, parse_exposition(text.replace(" 1200", " 0").replace(" 3800", " 0").replace(" 5000", " 0")), 1)
    (row,) = conv.add(T0 + timedelta(seconds=10), parse_exposition(text), 2)
    assert (row.prompt_tps, row.prompt_all_tps) == (120.0, None)   # split: the computed ones, nothing unsplit


def test_roles_from_labels() -> None:
    def role(text: str) -> str | None:
        return role_from_samples(parse_exposition(text))

    assert role('dynamo_component_requests_total{dynamo_component="prefill"} 1\n') == "prefill"
    backend = 'dynamo_component_uptime_seconds{dynamo_component="backend"} 1\n'
    assert role(backend) == "agg"   # no prefill endpoint in the scrape set: aggregated
    assert role_from_samples(parse_exposition(backend), with_prefill=True) == "decode"
    assert role('dynamo_component_uptime_seconds{dynamo_component="backend",worker_role="decode"} 1\n') == "decode"
    assert role('dynamo_frontend_worker_active_prefill_tokens{worker_type="prefill"} 1\n'
                'dynamo_frontend_worker_active_decode_blocks{worker_type="decode"} 1\n') == "frontend"
    assert role('x{worker_type="decode"} 1\n') == "decode"
    assert role('vllm:num_requests_running{engine="0"} 1\n') is None


def test_promql_side() -> None:
    q = server_queries(60)
    by = ("sum by(instance, engine, dp_rank, dynamo_component, worker_role, role, worker_type, job, worker_index, "
          "worker, dynamo_namespace)")
    # every engine's series in registry order (vLLM's, SGLang's, TensorRT-LLM's), Dynamo's only where none answers
    engines = (f"{by} (vllm:kv_cache_usage_perc) or {by} (vllm:gpu_cache_usage_perc) or {by} (sglang:token_usage) or "
               f"{by} (trtllm_kv_cache_utilization)")
    assert q["kv"] == f"{engines} or (({by} (dynamo_component_gpu_cache_usage_percent)) unless on(instance) ({engines}))"
    assert q["ttft_p90_s"].endswith("(irate(dynamo_frontend_time_to_first_token_seconds_bucket[60000ms])))")
    assert q["gen"] == (f"{by} (rate(vllm:generation_tokens_total[60000ms])) or "
                        f'{by} (rate(sglang:realtime_tokens_total{{mode="decode"}}[60000ms])) or '
                        f"{by} (rate(sglang:generation_tokens_total[60000ms])) or "
                        f"{by} (rate(trtllm_generation_tokens_total[60000ms]))")
    tag = 'label_replace({by} (rate(vllm:{m}[60000ms])), "diag_{t}", "{i}", "__name__", ".*")'
    nixl = (f'max without(diag_counter) ({tag.format(by=by, m="nixl_num_failed_transfers_total", t="counter", i=0)} or '
            f'{tag.format(by=by, m="nixl_num_failed_notifications_total", t="counter", i=1)})')
    assert q["kv_failures"].startswith(f'sum without(diag_group) (label_replace({nixl}, "diag_group", "0", "__name__"')
    assert q["kv_transfers"] == (f'sum without(diag_group) ({tag.format(by=by, m="nixl_xfer_time_seconds_count", t="group", i=0)}'
                                 f' or {tag.format(by=by, m="mooncake_xfer_time_seconds_count", t="group", i=1)}'
                                 f' or {tag.replace("vllm:", "").format(by=by, m="trtllm_kv_transfer_success_total", t="group", i=2)})')
    assert q["prompt"] == (f'{by} (rate(vllm:prompt_tokens_by_source_total{{source="local_compute"}}[60000ms])) or '
                           f'{by} (rate(sglang:realtime_tokens_total{{mode="prefill_compute"}}[60000ms]))')
    assert q["prompt_all"] == (f"{by} (rate(vllm:prompt_tokens_total[60000ms])) or "
                               f"{by} (rate(sglang:prompt_tokens_total[60000ms])) or "
                               f"{by} (rate(trtllm_prompt_tokens_total[60000ms]))")
    assert choose_step(600, 15) == 15
    week = 7 * 86400
    step = choose_step(week, 15)
    assert week / step <= 11000 and step == pytest.approx(week / 11000, abs=0.001)
    assert (parse_duration("15s"), parse_duration("1m30s"), parse_duration("500ms"), parse_duration("2")) == (
        15, 90, 0.5, 2)
    with pytest.raises(ValueError):
        parse_duration("soon")


# ---------------------------------------------------------------- the stats-missing capture

def _file_values() -> dict[str, list[tuple[int, dict[tuple[str, str], float]]]]:
    """Independently of the parser: per worker, (timestamp_ns, {(metric, engine): value}) per scrape."""
    out: dict[str, list[tuple[int, dict[tuple[str, str], float]]]] = {}
    rx = re.compile(r'^(vllm:\w+)\{engine="(\d+)",[^}]*\} (\S+)$', re.M)
    for line in CAPTURE.read_text().splitlines():
        d = json.loads(line)
        vals = {(m, e): float(v) for m, e, v in rx.findall(d["text"])}
        out.setdefault(d["worker_id"], []).append((d["timestamp_ns"], vals))
    return out


def test_capture_rows_and_workers() -> None:
    rows, problems = read_capture(CAPTURE.read_text().splitlines())
    assert len(rows) == 35 and problems == []
    assert {worker_of(r) for r in rows} == {
        ("prefill", 0, "gb200-r09-n12"), ("prefill", 1, "gb200-r09-n12"), ("prefill", 2, "gb200-r09-n13"),
        ("prefill", 3, "gb200-r09-n13"), ("decode", 0, "gb200-r09-n14"), ("decode", 0, "gb200-r09-n15"),
        ("frontend", 0, "gb200-r09-n12")}
    torn = [*CAPTURE.read_text().splitlines()[:2], '{"timestamp_ns": 17872187', "", "[1, 2]"]
    rows, problems = read_capture(torn)
    assert len(rows) == 2 and [p.split(":")[0] for p in problems] == ["line 3", "line 5"]


def test_capture_values_match_the_file() -> None:
    want = _file_values()
    logs = {lg.path.split("#")[1]: lg for lg in capture_logs(CAPTURE)}
    assert set(logs) == set(want)
    # the frontend: Dynamo's in-flight and queued requests, one row per scrape (gauges need no baseline)
    fe = [json.loads(ln) for ln in CAPTURE.read_text().splitlines() if '"frontend_0"' in ln]
    gauge = {k: [float(re.search(rf"^dynamo_frontend_{k}_requests{{[^}}]*}} (\S+)$", d["text"], re.M)[1]) for d in fe]
             for k in ("inflight", "queued")}
    assert logs["frontend_0"].info.role == "frontend"
    assert [(r.running, r.waiting, r.engine) for r in logs["frontend_0"].records] == [
        (round(i), round(q), None) for i, q in zip(gauge["inflight"], gauge["queued"], strict=True)]
    assert [r.running for r in logs["frontend_0"].records] == [512, 512, 1024, 1024, 1024]
    for wid, scrapes in want.items():
        if wid == "frontend_0":
            continue
        engines = sorted({e for _, vals in scrapes for _, e in vals})
        got = {(r.engine, r.ts): r for r in logs[wid].records}
        assert len(got) == len(logs[wid].records) == (len(scrapes) - 1) * len(engines), wid
        for (t0, v0), (t1, v1) in pairwise(scrapes):
            dt = (t1 - t0) / 1e9
            for e in engines:
                r = got[(int(e), datetime.fromtimestamp(t1 / 1e9, tz=UTC))]
                assert isinstance(r, StatsSample) and r.variant == "prom"
                assert r.running == v1[("vllm:num_requests_running", e)]
                assert r.waiting == v1[("vllm:num_requests_waiting", e)]
                assert r.kv_usage == pytest.approx(100 * v1[("vllm:kv_cache_usage_perc", e)])
                d_prompt = v1[("vllm:prompt_tokens_total", e)] - v0[("vllm:prompt_tokens_total", e)]
                d_gen = v1[("vllm:generation_tokens_total", e)] - v0[("vllm:generation_tokens_total", e)]
                assert r.prompt_all_tps == pytest.approx(d_prompt / dt, rel=1e-5)   # vLLM 0.26: not split
                assert r.gen_tps == pytest.approx(d_gen / dt, rel=1e-5)
                pre = "vllm:num_preemptions_total", e
                assert r.preemptions == v1[pre] - v0[pre]
    # one row spelled out: decode_0 on n14, engine 2, second scrape (file lines 5 and 12)
    r = next(r for r in logs["decode_0_gb200-r09-n14"].records if r.engine == 2)
    dt = (1787218824825710347 - 1787218704112631952) / 1e9
    assert (r.line, r.running, r.waiting, r.preemptions) == (12, 62, 0, 0)
    assert r.kv_usage == pytest.approx(28.2)
    assert r.prompt_tps is None   # every source's prompt tokens, the transferred KV included, are prompt_all_tps
    assert r.prompt_all_tps == pytest.approx((1378159 - 294808) / dt)
    assert r.prompt_all_tps == pytest.approx(8974.6, abs=0.1)
    assert r.gen_tps == pytest.approx((172340 - 36866) / dt)


def test_run_endpoints_get_prometheus_samples_and_l001_stays() -> None:
    from diag.rules.engine import evaluate

    run = load_run([str(RUN)])
    assert {eid: ep.samples for eid, ep in run.endpoints.items()} == {
        "prefill-w0": 8, "prefill-w1": 8, "prefill-w2": 8, "prefill-w3": 8, "decode-w0": 32}
    assert run.endpoints["decode-w0"].engines == [str(e) for e in range(8)]
    assert "frontend-w0" not in run.endpoints
    pre = run.endpoints["prefill-w0"].stats
    assert pre["file"].str.ends_with("raw_prometheus.jsonl#prefill_0_gb200-r09-n12").all()
    l001 = {f.endpoint: f for f in evaluate(run) if f.code == "DIAG-L001"}
    assert set(l001) == set(run.endpoints)
    for eid, f in l001.items():
        n = run.endpoints[eid].samples
        assert f.evidence["cause"] == "api_server_count" and f.evidence["prometheus_samples"] == n
        assert "API server" in f.message and f"Prometheus has {n} samples" in f.message
        assert f.location is not None and f.location.path.endswith(".out")


def test_tail_json_shows_prometheus_samples() -> None:
    res = subprocess.run([sys.executable, "-m", "diag", "tail", str(RUN), "--format", "json"],
                         capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert res.returncode in (0, 1), res.stderr
    doc = json.loads(res.stdout)
    validate(doc, "tail")
    eps = {e["id"]: e for e in doc["endpoints"]}
    assert eps["decode-w0"]["samples"] == 32 and eps["prefill-w3"]["samples"] == 8
    dec = eps["decode-w0"]["stats"]
    assert dec["kv_usage_mean"] is not None and dec["running_mean"] > 0   # over the C=1024 steady window
    assert dec["window"]["label"] == "C=1,024 steady"
    assert eps["prefill-w0"]["stats"]["prompt_tps_mean"] > 0
    l001 = [f for f in doc["findings"] if f["code"] == "DIAG-L001"]
    assert len(l001) == 5
    assert all("more than one API server" in f["message"] and "Prometheus has" in f["message"] for f in l001)
    kinds = [s["kind"] for s in doc["sources"]]
    assert kinds.count("prometheus") == 7


def test_dynamo_only_capture_gives_what_its_vllm_twin_gives() -> None:
    """stats-missing-dynamo is stats-missing with Dynamo's series only (no vllm: series): the same
    endpoints, the same KV usage per engine and the same findings."""
    from diag.rules.engine import evaluate

    runs = {name: load_run([str(ROOT / "samples" / "runs" / name)]) for name in ("stats-missing", "stats-missing-dynamo")}
    vllm, dynamo = runs["stats-missing"], runs["stats-missing-dynamo"]
    assert sorted(dynamo.endpoints) == sorted(vllm.endpoints)
    for ep_id, ep in vllm.endpoints.items():
        want = ep.stats.filter(pl.col("file").str.contains("raw_prometheus")).select("ts", "engine", "kv_usage").sort("ts", "engine")
        got = dynamo.endpoints[ep_id].stats.filter(pl.col("file").str.contains("raw_prometheus")).select("ts", "engine", "kv_usage").sort("ts", "engine")
        if ep.role == "frontend":
            assert got.height == want.height == 5, ep_id
            continue
        # vLLM's counters need a baseline scrape; Dynamo's gauge alone gives every scrape a row
        assert got.join(want, on=["ts", "engine"], how="inner").filter(
            (pl.col("kv_usage") - pl.col("kv_usage_right")).abs() > 1e-9).height == 0, ep_id
        assert got.height > want.height > 0, ep_id
    codes = {name: sorted((f.code, f.endpoint) for f in evaluate(run)) for name, run in runs.items()}
    assert codes["stats-missing-dynamo"] == codes["stats-missing"] and ("DIAG-L001", "decode-w0") in codes["stats-missing"]


def test_backend_endpoint_from_its_deployment() -> None:
    """A server's series: ``backend`` is decode in a Dynamo namespace with a prefill series, agg elsewhere."""
    series = [{"dynamo_namespace": "pd", "dynamo_component": "prefill", "instance": "a:1"},
              {"dynamo_namespace": "pd", "dynamo_component": "backend", "instance": "b:1"},
              {"dynamo_namespace": "solo", "dynamo_component": "backend", "instance": "c:1", "worker": "w3"},
              {"dynamo_component": "backend", "instance": "d:1"}]
    with_prefill = prefill_deployments(series)
    assert with_prefill == {"pd"}
    assert [series_endpoint(ls, with_prefill) for ls in series] == [
        ("prefill", None), ("decode", None), ("agg", 3), ("agg", None)]
    assert series_endpoint(series[3], prefill_deployments([*series, {"job": "prefill-w0"}])) == ("decode", None)


def _capture(tmp_path: Path, texts: dict[str, list[str]]) -> Path:
    """A ``raw_prometheus.jsonl`` run of one worker per role, one scrape per text, 10 s apart."""
    rows = [{"timestamp_ns": 1787218704_000_000_000 + i * 10_000_000_000, "endpoint_url": f"http://n1:{7500 + k}/metrics",
             "role": role, "worker_id": f"{role}_0_n1", "text": text}
            for i in range(max(map(len, texts.values()))) for k, (role, scrapes) in enumerate(texts.items())
            for text in scrapes[i:i + 1]]
    (tmp_path / "logs").mkdir()
    (tmp_path / "logs" / "raw_prometheus.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return tmp_path


def test_kv_connector_counters_are_the_kv_failure_and_expiry_evidence(tmp_path: Path) -> None:
    """A metrics-only run: NIXL (vLLM >= 0.31: a failed notification in both counters, counted once) and
    Mooncake failures become KV Transfer rows, Mooncake expiries lease expiries: E002 and E003 fire."""
    from diag.rules.engine import evaluate

    def scrape(eng: str, counters: dict[str, float]) -> str:
        lines = [f'vllm:kv_cache_usage_perc{{engine="{eng}"}} 0.2', f'vllm:num_requests_running{{engine="{eng}"}} 0']
        return "\n".join(lines + [f'vllm:{m}{{engine="{eng}",model_name="m"}} {v}' for m, v in counters.items()]) + "\n"

    decode = [scrape("0", {"nixl_num_failed_transfers_total": f, "nixl_num_failed_notifications_total": n,
                           "nixl_xfer_time_seconds_count": x}) +
              scrape("1", {"mooncake_num_failed_transfers_total": t, "mooncake_num_failed_recvs_total": r})
              for f, n, x, t, r in ((0, 0, 10, 0, 0), (0, 0, 30, 0, 2), (3, 2, 30, 1, 2))]
    prefill = [scrape("0", {"mooncake_num_kv_expired_reqs_total": e}) for e in (0, 0, 4)]
    run = load_run([str(_capture(tmp_path, {"prefill": prefill, "decode": decode}))])
    kv = run.endpoints["decode-w0"].kv
    assert kv.select("transfers", "failed").rows() == [(20.0, 0.0), (0.0, 2.0), (0.0, 3.0), (0.0, 1.0)]
    found = {f.code: f for f in evaluate(run) if f.code in ("DIAG-E002", "DIAG-E003", "DIAG-V002")}
    assert set(found) == {"DIAG-E002", "DIAG-E003"}   # transfers succeeded: not every one failed
    assert (found["DIAG-E002"].endpoint, found["DIAG-E002"].evidence["counts"]) == (
        "decode-w0", {"metrics_failed_transfers": 6})
    assert (found["DIAG-E003"].endpoint, found["DIAG-E003"].evidence["counts"]) == ("prefill-w0", {"expired": 4})


def test_component_request_errors_summed_over_error_types() -> None:
    """A worker's dynamo_component_requests_total and errors_total (every error_type) -> RequestCounts."""
    from diag.parsers.records import RequestCounts

    def scrape(req: int, gen: int, pub: int) -> list:
        return parse_exposition(f'dynamo_component_requests_total{{dynamo_component="backend"}} {req}\n'
                                f'dynamo_component_errors_total{{dynamo_component="backend",error_type="generate"}} {gen}\n'
                                f'dynamo_component_errors_total{{dynamo_component="backend",error_type="publish_response"}} {pub}\n')

    conv = StatsConverter()
    got = [r for i, s in enumerate((scrape(10, 0, 0), scrape(60, 2, 1), scrape(60, 2, 1), scrape(5, 1, 0)))
           for r in conv.add(T0 + timedelta(seconds=10 * i), s, i)]
    assert [(r.line, r.requests, r.errors) for r in got if isinstance(r, RequestCounts)] == [(1, 50, 3), (3, 5, 1)]


def test_aiperf_backend_is_decode_only_beside_prefill() -> None:
    """AIPerf's export: Dynamo's ``backend`` endpoints are decode when an endpoint is ``prefill``, else agg."""
    from diag.parsers.telemetry import aiperf_jsonl

    def line(url: str, comp: str) -> str:
        return json.dumps({"endpoint_url": url, "timestamp_ns": 1, "metrics": {"vllm:num_requests_running": [
            {"labels": {"dynamo_component": comp, "engine": "0"}, "value": 1}]}})

    pd, _ = aiperf_jsonl([line("http://a:1/metrics", "prefill"), line("http://b:1/metrics", "backend")])
    agg, _ = aiperf_jsonl([line("http://b:1/metrics", "backend"), line("http://c:1/metrics", "backend")])
    assert [(p.key, p.role, p.index) for p in pd] == [("http://a:1/metrics", "prefill", 0), ("http://b:1/metrics", "decode", 0)]
    assert [(p.key, p.role, p.index) for p in agg] == [("http://b:1/metrics", "agg", 0), ("http://c:1/metrics", "agg", 1)]


def test_sglang_series_become_the_same_stats() -> None:
    """An SGLang /metrics scrape (names of the 0.5.23 collector; the DP rank labels the engine) gives the run
    model what a vLLM scrape gives: running, waiting, KV use, computed prompt and generated tokens as rates."""
    def scrape(prompt: float, gen: float) -> str:
        lab = 'tp_rank="0",pp_rank="0",dp_rank="{r}"'
        return "".join(
            f'sglang:num_running_reqs{{{lab.format(r=r)}}} {40 + r}\n'
            f'sglang:num_queue_reqs{{{lab.format(r=r)}}} {r}\n'
            f'sglang:token_usage{{{lab.format(r=r)}}} 0.5\n'
            f'sglang:realtime_tokens_total{{{lab.format(r=r)},mode="prefill_compute"}} {prompt}\n'
            f'sglang:realtime_tokens_total{{{lab.format(r=r)},mode="decode"}} {gen}\n' for r in (0, 1))
    conv = StatsConverter()
    conv.add(T0, parse_exposition(scrape(0, 0)), 1)
    rows = conv.add(T0 + timedelta(seconds=10), parse_exposition(scrape(8000, 2000)), 2)
    got = sorted((r.engine, r.running, r.waiting, r.kv_usage, r.prompt_tps, r.gen_tps) for r in rows)
    assert got == [(0, 40, 0, 50.0, 800.0, 200.0), (1, 41, 1, 50.0, 800.0, 200.0)]


def test_trtllm_series_become_the_same_stats() -> None:
    """A ``python -m dynamo.trtllm`` worker's scrape (TensorRT-LLM's MetricsCollector names, its labels
    ``model_name``/``engine_type``, no rank: one engine per worker) gives the run model running, waiting, KV use
    (used over max blocks, 0..1) and the token counters as rates."""
    def scrape(prompt: float, gen: float) -> str:
        lab = 'model_name="qwen",engine_type="trtllm",dynamo_component="backend"'
        return (f"trtllm_num_requests_running{{{lab}}} 48\n"
                f"trtllm_num_requests_waiting{{{lab}}} 3\n"
                f"trtllm_kv_cache_utilization{{{lab}}} 0.625\n"
                f"trtllm_prompt_tokens_total{{{lab}}} {prompt}\n"
                f"trtllm_generation_tokens_total{{{lab}}} {gen}\n")
    conv = StatsConverter()
    conv.add(T0, parse_exposition(scrape(0, 0)), 1)
    rows = conv.add(T0 + timedelta(seconds=10), parse_exposition(scrape(81920, 10240)), 2)
    got = [(r.engine, r.running, r.waiting, r.kv_usage, r.gen_tps) for r in rows]
    assert got == [(None, 48, 3, 62.5, 1024.0)]   # an endpoint-wide series: the worker is the engine
    assert [r.prompt_all_tps for r in rows] == [8192.0]
