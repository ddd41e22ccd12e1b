"""The verdict (rules/catalog/verdicts.toml, rules/verdict.py): the catalog is a closed vocabulary with
fire/pass examples for every class; every sample run's verdict is the one its MANIFEST states; no
output calls a window healthy or under-loaded while a bottleneck finding is open in it; figures come
from steady windows, never the idle tail; invalid points name their cause."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path

import pytest
from conftest import ROOT
from loading import report_of
from rich.console import Console

from diag.emit.text import render_tail
from diag.pipeline import analyze
from diag.report import Report
from diag.rules.examples import build_example_run
from diag.rules.settings import Settings
from diag.rules.verdict import Verdict
from diag.rules.verdict_catalog import experiments, verdict_catalog

RUNS = ROOT / "samples" / "runs"
RUN_NAMES = sorted(p.name for p in RUNS.iterdir())
CATALOG = verdict_catalog()
VOCABULARY = ("invalid", "startup-stuck", "transfer-bound", "decode-bound", "prefill-bound", "under-loaded",
              "healthy", "unknown")
BOTTLENECKS = ("DIAG-B001", "DIAG-B002", "DIAG-K001", "DIAG-K002")
NO_LIMIT = ("healthy", "under-loaded")
CASES = [(c.name, i, ex) for c in CATALOG.classes for i, ex in enumerate(c.examples)]


def test_vocabulary_is_closed_and_every_class_has_both_examples() -> None:
    assert CATALOG.names == VOCABULARY
    for c in CATALOG.classes:
        assert c.summary, c.name
        assert {ex["expect"] for ex in c.examples} == {"fire", "pass"}, f"{c.name} needs fire and pass examples"
    for e in CATALOG.experiments:
        assert e.cls in VOCABULARY and e.action and e.expect, e.id
    assert len({e.id for e in CATALOG.experiments}) == len(CATALOG.experiments)
    # every class the vocabulary names (but unknown, which has nothing to try but more evidence) has one
    assert {e.cls for e in CATALOG.experiments} == set(VOCABULARY)


@pytest.mark.parametrize("case", CASES, ids=[f"{n}-{i}-{ex['expect']}" for n, i, ex in CASES])
def test_example(case) -> None:
    name, _, ex = case
    run = build_example_run(ex.get("run", {}))
    report = analyze(run, Settings(), None)
    assert report.verdict is not None
    if ex["expect"] == "fire":
        assert report.verdict.cls == name, (report.verdict.cls, report.verdict.why)
        assert report.verdict.why
    else:
        assert report.verdict.cls != name, report.verdict.why


def test_unknown_advice_condition_is_refused() -> None:
    from diag.rules.advice import holds

    with pytest.raises(ValueError, match="unknown advice condition"):
        holds("no_such_condition", build_example_run({}))


# ------------------------------------------------------------------ the sample runs
@pytest.fixture(scope="module")
def reports() -> dict[str, Report]:
    return {name: report_of(RUNS / name) for name in RUN_NAMES}


def _manifest(name: str) -> dict:
    return json.loads((RUNS / name / "MANIFEST.json").read_text())


@pytest.mark.parametrize("name", RUN_NAMES)
def test_sample_verdict_matches_manifest(reports, name: str) -> None:
    want = _manifest(name)["expect"]["verdict"]
    v = reports[name].verdict
    assert v is not None
    assert {"class": v.cls, "limiter": v.limiter} == want, v.why
    assert v.confidence in ("high", "medium"), v.why
    assert v.experiments, "every verdict names the next experiment"


def test_samples_cover_every_class() -> None:
    seen = {_manifest(n)["expect"]["verdict"]["class"] for n in RUN_NAMES}
    assert seen == set(VOCABULARY) - {"unknown"}   # unknown: not enough evidence (real excerpts cover it)
    limiters = {(_manifest(n)["expect"]["verdict"]["class"], _manifest(n)["expect"]["verdict"]["limiter"])
                for n in RUN_NAMES}
    assert {("decode-bound", "kv-capacity"), ("decode-bound", "batch/compute")} <= limiters


def _window(v: Verdict) -> tuple[datetime, datetime] | None:
    if not v.phases:
        return v.window
    return datetime.fromisoformat(v.phases[0]["start"]), datetime.fromisoformat(v.phases[-1]["end"])


def assert_no_limit_beside_bottleneck(report: Report) -> None:
    """No verdict says 'nothing limits' over a window in which a bottleneck finding is open, and the
    balance never names no limiting side while the run's verdict names one."""
    assert report.verdicts is not None
    for v in (report.verdicts.run, *report.verdicts.points):
        win = _window(v)
        if v.cls not in NO_LIMIT or win is None:
            continue
        open_there = [f for f in report.findings if f.code in BOTTLENECKS and f.first_ts is not None
                      and f.first_ts <= win[1] and (f.last_ts or f.first_ts) >= win[0]]
        assert not open_there, (v.concurrency, v.cls, [f.code for f in open_there])
    if report.balance is not None:
        limits = report.verdicts.run.cls in ("prefill-bound", "decode-bound", "transfer-bound")
        assert (report.balance["limiting"] is not None) == limits


@pytest.mark.parametrize("name", RUN_NAMES)
def test_sample_never_unlimited_beside_a_bottleneck(reports, name: str) -> None:
    report = reports[name]
    assert_no_limit_beside_bottleneck(report)
    console = Console(record=True, width=200, color_system=None)
    render_tail(report, console)
    assert "balanced" not in console.export_text()


def test_real_excerpts_never_unlimited_beside_a_bottleneck(real_logs: Path) -> None:
    classes = set()
    for path in sorted(real_logs.glob("*.log")) + sorted((ROOT / "tests" / "data" / "real-logs").glob("*.log")):
        report = report_of([str(path)])
        assert_no_limit_beside_bottleneck(report)
        assert report.verdict is not None
        classes.add(report.verdict.cls)
        if any(f.code in ("DIAG-E001",) and f.severity == "error" for f in report.findings):
            assert report.verdict.cls == "invalid", path.name
    assert {"unknown", "invalid", "transfer-bound", "decode-bound", "prefill-bound", "under-loaded"} <= classes


def test_prefill_bound_table_carries_its_queue(reports) -> None:
    """The endpoint figures come from the verdict's steady window (C=2048), not the idle tail after it."""
    report = reports["prefill-bound"]
    pre = [s for s in report.endpoints if s.role == "prefill"]
    dec = next(s for s in report.endpoints if s.role == "decode")
    assert {s.window["label"] for s in report.endpoints} == {"C=2,048 steady"}
    for s in pre:   # two engines each, ~175 waiting per engine in that window
        assert s.waiting_mean is not None and s.waiting_mean > 2 * 100, s
        assert s.waiting_peak is not None and s.waiting_peak >= s.waiting_mean
        assert s.prompt_tps_mean is not None and s.prompt_tps_mean > 30000
    assert dec.gen_tps_mean is not None and dec.gen_tps_mean > 10000
    assert dec.kv_mean is not None and 15 < dec.kv_mean < 30
    assert report.balance is not None and report.balance["limiting"] == "prefill"
    console = Console(record=True, width=220, color_system=None)
    render_tail(report, console)
    text = console.export_text()
    assert "verdict     prefill-bound (high confidence) at concurrency 2,048" in text
    assert "balance     queue on prefill" in text and "prefill limits" in text
    row = next(line for line in text.splitlines() if line.startswith("prefill-w0"))
    assert " 0/0 " not in row   # the post-run zeros are not the headline


def test_engine_crash_names_the_oom_as_the_invalid_points_cause(reports) -> None:
    report = reports["engine-crash"]
    assert report.verdicts is not None
    crashed = report.verdicts.at(1024)
    assert crashed is not None and crashed.cls == "invalid"
    assert "CUDA out of memory" in crashed.why
    ev = [e for e in crashed.evidence if e["kind"] == "finding"]
    assert ev and ev[0]["code"] == "DIAG-E001" and ev[0]["at"].endswith("gb200-r05-n15_decode_w0.out:703")
    # the point's window ends at the death, not at the end of the logs
    assert crashed.window is not None and crashed.window[1].isoformat() == "2026-09-03T04:03:01+00:00"
    assert report.verdicts.at(512).cls == "under-loaded"
    assert report.verdict == crashed


def test_experiments_follow_what_ran(reports) -> None:
    """The first experiment fixes the linked config cause when there is one, else the class's own."""
    first = {n: reports[n].verdict.experiments[0]["id"] for n in RUN_NAMES}
    assert first["drift-batched-tokens"] == "fix-DIAG-C004"
    assert first["mamba-kv"] == "fix-DIAG-C003"
    assert first["async-accuracy"] == "fix-DIAG-C002"
    assert first["prefill-bound"] == "add-prefill-worker"
    assert first["kv-exhaustion"] == "more-decode-kv"   # it ran bfloat16 already: no Mamba experiment
    assert first["decode-batch"] == "raise-max-num-seqs"
    assert first["under-loaded"] == "raise-concurrency"
    add = reports["prefill-bound"].verdict.experiments[0]
    assert "(4 -> 5)" in add["action"] and "+25 %" in add["expect"]


def test_experiments_skip_what_the_run_does_not_have() -> None:
    """An experiment whose figures are missing is left out, not printed with a hole."""
    run = build_example_run({})
    assert experiments("prefill-bound", None, run, {}, {}, None).experiments == []
    got = experiments("invalid", None, run, {}, {}, 512, cause="decode-w0: CUDA out of memory")
    assert got.experiments == [{"id": "fix-and-rerun", "action": "fix the cause (decode-w0: CUDA out of memory) and "
                                "run the point again", "expect": "a complete result at concurrency 512"}]
    assert got.in_place == []


def test_phases_cut_the_measured_window(reports) -> None:
    """Warm-up is one request lifetime (median E2E), capped; drain likewise; steady lies between."""
    v = reports["healthy"].verdicts.at(1024)
    assert [p["phase"] for p in v.phases] == ["warm-up", "steady", "drain"]
    start, steady0, steady1, end = (datetime.fromisoformat(x) for x in (
        v.phases[0]["start"], v.phases[1]["start"], v.phases[1]["end"], v.phases[2]["end"]))
    span = (end - start).total_seconds()
    assert 0 < (steady0 - start).total_seconds() <= 0.25 * span
    assert 0 < (end - steady1).total_seconds() <= 0.15 * span
    assert reports["healthy"].phase == "idle"   # judged after the last point ended


def test_report_names_the_crash_as_the_invalid_points_cause() -> None:
    """``diag report`` shows the same verdicts: the cut-short point says what killed it, with its evidence."""
    import subprocess
    import sys

    res = subprocess.run([sys.executable, "-m", "diag", "report", "samples/runs/engine-crash", "--format", "json"],
                         capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert res.returncode in (0, 1), res.stderr
    doc = json.loads(res.stdout)
    point = next(p for p in doc["points"] if p["concurrency"] == 1024)
    assert point["verdict"] == "invalid" and "CUDA out of memory" in point["reason"]
    assert [e["code"] for e in point["evidence"] if e["kind"] == "finding"] == ["DIAG-E001"]
    assert doc["runs"][0]["verdict"]["class"] == "invalid"
    assert doc["runs"][0]["verdict"]["why"] == point["reason"]


def _metrics_only_run(tmp_path: Path, texts: dict[str, list[str]]) -> Path:
    """A run of a ``raw_prometheus.jsonl`` alone: one worker per role, one scrape per text, 10 s apart."""
    rows = [{"timestamp_ns": 1787218704_000_000_000 + i * 10_000_000_000, "endpoint_url": f"http://n1:{7500 + k}/metrics",
             "role": role, "worker_id": f"{role}_0_n1", "text": scrapes[i]}
            for i in range(max(map(len, texts.values()))) for k, (role, scrapes) in enumerate(texts.items())
            if i < len(scrapes)]
    (tmp_path / "logs").mkdir(parents=True)
    (tmp_path / "logs" / "raw_prometheus.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return tmp_path


def _decode_scrape(i: int, waiting: int = 0, extra: str = "") -> str:
    return (f'vllm:kv_cache_usage_perc{{engine="0"}} 0.3\nvllm:num_requests_running{{engine="0"}} 40\n'
            f'vllm:num_requests_waiting{{engine="0"}} {waiting}\nvllm:generation_tokens_total{{engine="0"}} {1000 * i}\n'
            f'vllm:prompt_tokens_total{{engine="0"}} {500 * i}\n' + extra)


def test_metered_request_errors_make_a_metrics_only_run_invalid(tmp_path: Path) -> None:
    """Dynamo's frontend counters (requests_total by status, failures_total: the same failures, counted once)
    are the run's request series; more failed than the catalog's failed_invalid_frac: invalid."""
    def frontend(counts: tuple[tuple[int, int, int], ...]) -> list[str]:
        return ['dynamo_frontend_requests_total{{model="m",status="success"}} {}\n'
                'dynamo_frontend_requests_total{{model="m",status="error"}} {}\n'
                'dynamo_frontend_failures_total{{model="m"}} {}\n'.format(*c) for c in counts]

    decode = [_decode_scrape(i) for i in range(4)]
    bad = report_of([str(_metrics_only_run(tmp_path / "bad", {
        "frontend": frontend(((0, 0, 0), (90, 6, 6), (180, 12, 13), (270, 18, 19))), "decode": decode}))])
    assert bad.run.request_counts().select("endpoint", "requests", "errors").rows() == [
        ("frontend-w0", 96, 6), ("frontend-w0", 96, 7), ("frontend-w0", 96, 6)]
    v = bad.verdicts.run
    assert (v.cls, v.why) == ("invalid", "19 of 288 requests failed (7 %, Dynamo's frontend metrics)")
    assert v.figures["requests"] == {"source": "frontend", "requests": 288, "errors": 19}
    ok = report_of([str(_metrics_only_run(tmp_path / "ok", {
        "frontend": frontend(((0, 0, 0), (90, 4, 4), (180, 8, 9), (270, 12, 13))), "decode": decode}))])
    assert ok.verdicts.run.figures["requests"] == {"source": "frontend", "requests": 282, "errors": 13}
    assert 19 / 288 > CATALOG.params["failed_invalid_frac"] > 13 / 282 and ok.verdicts.run.cls == "under-loaded"


def test_kv_fetch_stages_separate_waiting_for_transfer_from_waiting_for_capacity(tmp_path: Path) -> None:
    """vLLM 0.33's waiting split on a P/D decode: requests whose KV load has not started or is in progress
    wait for the transfer (transfer-bound); the same queue with every KV load done waits for capacity
    (decode-bound; without the split, waiting with decode's KV low read as waiting for transfers)."""
    def decode(fetch: tuple[int, int, int]) -> list[str]:
        stages = zip(("waiting_to_start", "in_progress", "completed_waiting"), fetch, strict=True)
        split = "".join(f'vllm:num_requests_kv_fetch_by_stage{{engine="0",stage="{s}"}} {n}\n' for s, n in stages)
        return [_decode_scrape(i, waiting=6, extra=split + 'vllm:num_requests_waiting_by_reason{engine="0",reason="deferred"} '
                               f'{sum(fetch[:2])}\n') for i in range(4)]

    prefill = [f'vllm:kv_cache_usage_perc{{engine="0"}} 0.1\nvllm:num_requests_running{{engine="0"}} 2\n'
               f'vllm:num_requests_waiting{{engine="0"}} 0\nvllm:prompt_tokens_total{{engine="0"}} {9000 * i}\n'
               for i in range(4)]
    kv = report_of([str(_metrics_only_run(tmp_path / "kv", {"prefill": prefill, "decode": decode((3, 2, 1))}))])
    v = kv.verdicts.run
    assert v.figures["decode"]["waiting_kv"] == {"mean": 5.0, "peak": 5.0}
    assert (v.cls, v.limiter) == ("transfer-bound", "kv-transfer latency")
    assert v.why == ("decode requests wait for their KV (6.0 waiting/engine, 5.0 of them for their KV transfer, "
                     "1.0 for capacity) with decode's cache at 30.0 % and no prefill queue")
    cap = report_of([str(_metrics_only_run(tmp_path / "cap", {"prefill": prefill, "decode": decode((0, 0, 6))}))])
    assert cap.verdicts.run.figures["decode"]["waiting_kv"] == {"mean": 0.0, "peak": 0.0}
    assert (cap.verdicts.run.cls, cap.verdicts.run.limiter, cap.verdicts.run.why) == (
        "decode-bound", "batch/compute", "decode requests wait for capacity, not for their KV (6.0 of 6.0 waiting/engine "
        "have theirs) with decode's cache at 30.0 %")
    rows = cap.run.endpoints["decode-w0"].stats.select("waiting", "deferred", "kv_fetch_waiting", "kv_fetch_running").rows()
    assert rows == [(6, 0, 0, 0)] * 3
