"""Startup stages (parsers/catalog/startup.toml, rules/startup.py) and the rules that respect the phase:
stages and durations as the logs show them, no DIAG-L001 while loading, DIAG-S001 on a stuck endpoint."""

from __future__ import annotations

import io
import re
import shutil
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from loading import load_run, replay, report_of
from rich.console import Console

from diag.parsers.records import StageMark
from diag.parsers.stages import STAGES
from diag.tui import state as st

from helpers import parse_text

RUNS = Path(__file__).resolve().parents[1] / "samples" / "runs"
BASE_RUNS = sorted(p.name for p in RUNS.iterdir() if p.is_dir() and (p / "logs").is_dir())


def _t(hms: str) -> datetime:
    return datetime.fromisoformat(f"2026-08-27T{hms}+00:00")


def test_stage_order_is_the_catalog_order() -> None:
    assert [s.name for s in STAGES] == ["process", "weights", "model_loaded", "compile", "kv_cache", "kv_connector",
                                        "cuda_graphs", "registration", "ready", "serving"]


def test_kv_exhaustion_stages_and_durations_as_the_log_shows() -> None:
    run = load_run(str(RUNS / "kv-exhaustion"))
    su = run.endpoints["prefill-w0"].startup
    assert su.phase == "serving"
    assert [s.stage for s in su.stages] == ["process", "weights", "model_loaded", "kv_cache", "kv_connector",
                                            "cuda_graphs", "registration", "ready", "serving"]
    assert su.started_at == _t("18:12:33")                 # the orchestrator's "Starting prefill worker 0"
    assert su.ready_at == _t("18:17:16.577")              # "VllmWorker for ... has been initialized"
    assert su.serving_at == _t("18:18:15")                # the first stats line with requests in it
    graphs = su.span("cuda_graphs")
    assert graphs.start == _t("18:15:18")                 # the last "Registering KV_Caches" (NIXL done)
    assert graphs.end == _t("18:16:51")                   # the last "init engine ... took" line
    assert graphs.duration_s() == 93.0 and graphs.reported_s == 16.0   # "Graph capturing finished in 16 secs"
    assert graphs.progress == (83, 83)
    weights = su.span("weights")
    assert weights.reported_s == 47.65 and weights.end == _t("18:14:36")
    assert dict(su.span("model_loaded").facts)["memory_gib"] == 58.24
    assert dict(su.span("kv_cache").facts) == {"kv_gib": 96.92, "tokens": 1622016, "concurrency": 176.0}
    # the stages partition the startup: their times add up to process start -> ready
    before_ready = sum(s.duration_s() for s in su.stages if s.stage != "serving")
    assert before_ready == pytest.approx((su.ready_at - su.started_at).total_seconds())


@pytest.mark.parametrize("name", BASE_RUNS)
def test_every_sample_run_shows_its_startup(name: str) -> None:
    report = report_of(RUNS / name)
    for s in report.endpoints:
        startup = s.startup
        assert startup["phase"] in ("starting", "ready", "serving"), (name, s.id)
        stages = [x["stage"] for x in startup["stages"]]
        assert stages[0] == "process" and stages == sorted(stages, key=[x.name for x in STAGES].index), (name, s.id)
        assert all(x["duration_s"] is not None and x["duration_s"] >= 0 for x in startup["stages"]), (name, s.id)
        if startup["phase"] != "starting":
            assert "ready" in stages


def test_batch_never_reports_stats_missing_or_stalls_for_a_starting_endpoint() -> None:
    for name in BASE_RUNS:
        report = report_of(RUNS / name)
        for f in report.findings:
            if f.code in ("DIAG-L001", "DIAG-B004") and f.endpoint:
                assert report.run.endpoints[f.endpoint].startup.serving, (name, f.code, f.endpoint)


def test_replay_opens_without_stats_missing_and_shows_the_stages_advance() -> None:
    wall = [0.0]
    state = st.WatchState(replay(RUNS / "kv-exhaustion", speed=60, monotonic=lambda: wall[0]))
    opened: list[str] = []
    phases: dict[str, list[str]] = {}
    stages: dict[str, list[str]] = {}
    while True:
        snap = state.step()
        opened += [f.code for f in snap.opened]
        assert not [f for f in snap.findings if f.f.code == "DIAG-L001"], snap.now
        for row in snap.endpoints:
            su = row.s.startup
            if su.get("phase") and (not phases.get(row.id) or phases[row.id][-1] != su["phase"]):
                phases.setdefault(row.id, []).append(su["phase"])
            if su.get("stage") and (not stages.get(row.id) or stages[row.id][-1] != su["stage"]):
                stages.setdefault(row.id, []).append(su["stage"])
        if snap.done:
            break
        wall[0] += 1.0
    assert "DIAG-L001" not in opened and "DIAG-K001" in opened
    order = [s.name for s in STAGES]
    for eid, seen in stages.items():
        assert seen == sorted(seen, key=order.index), (eid, seen)     # stages only advance
        assert len(seen) >= 3 and seen[-1] == "serving", (eid, seen)
    assert all(p[0] == "starting" and p[-1] == "serving" for p in phases.values()), phases


def test_startup_stall_fires_s001_on_the_stuck_endpoint_only() -> None:
    report = report_of(RUNS / "startup-stall")
    s001 = [f for f in report.findings if f.code == "DIAG-S001"]
    assert [f.endpoint for f in s001] == ["prefill-w3"]
    f = s001[0]
    assert f.open and f.evidence["stage"] == "cuda_graphs" and f.evidence["progress"] == [20, 83]
    assert "CUDA-graph capture" in f.message and f.evidence["siblings"] == 4
    assert not [x for x in report.findings if x.code in ("DIAG-L001", "DIAG-B004", "DIAG-B001", "DIAG-B002")]
    stuck = report.endpoint("prefill-w3").startup
    assert stuck["phase"] == "starting" and stuck["stage"] == "cuda_graphs" and stuck["stages"][-1]["open"]
    assert all(report.endpoint(e).startup["phase"] == "ready" for e in ("prefill-w0", "prefill-w1", "decode-w0"))


def test_startup_stuck_is_judged_at_the_clock_its_noise_lines_carry() -> None:
    """decode-w0's log goes on for 22 minutes with Dynamo "waiting for engine" lines only (no record):
    the run is judged as of the last of them, and the stage under way has lasted that long."""
    report = report_of(RUNS / "startup-stuck")
    run = report.run
    decode = run.endpoints["decode-w0"]
    noise_end = _t("18:38:35.959404")                    # the last "waiting for engine" line (n15)
    assert run.clock == decode.clock == report.now == noise_end
    assert decode.last_seen is not None and (noise_end - decode.last_seen).total_seconds() > 20 * 60
    assert run.end is not None and (noise_end - run.end).total_seconds() > 18 * 60   # the orchestrator stopped
    s001 = [f for f in report.findings if f.code == "DIAG-S001"]
    assert [f.endpoint for f in s001] == ["decode-w0"]
    f = s001[0]
    graphs = decode.startup.span("cuda_graphs")
    assert graphs is not None and graphs.start is not None and graphs.end is None
    assert f.open and f.evidence["stage"] == "cuda_graphs" and f.evidence["progress"] == [14, 59]
    assert f.evidence["seconds"] == pytest.approx((noise_end - graphs.start).total_seconds(), abs=0.1)
    assert f.evidence["seconds"] > 20 * 60 and f.last_ts == noise_end
    shown = report.endpoint("decode-w0").startup
    assert shown["stage"] == "cuda_graphs" and shown["stages"][-1]["duration_s"] == f.evidence["seconds"]
    assert report.verdict is not None and (report.verdict.cls, report.verdict.limiter) == ("startup-stuck", None)
    assert all(report.endpoint(f"prefill-w{i}").startup["phase"] == "ready" for i in range(4))


def test_stall_replay_shows_the_stuck_badge() -> None:
    from diag.tui.render import health_cell

    wall = [0.0]
    state = st.WatchState(replay(RUNS / "startup-stall", speed=60, monotonic=lambda: wall[0]))
    snap = state.step()
    while not snap.done:
        wall[0] += 5.0
        snap = state.step()
    badge = health_cell(snap.endpoint("prefill-w3").s).plain
    assert badge.startswith("CUDA graphs 20/83 ") and badge.endswith("s")
    assert health_cell(snap.endpoint("prefill-w0").s).plain.startswith("ready 4m")


@pytest.mark.parametrize(("name", "stage", "fields"), [
    ("b-03.log", "cuda_graphs", {"took": 5.0, "memory_gib": 0.47}),
    ("g-13.log", "model_loaded", {"memory_gib": 0.2389, "load_s": 0.977005}),
    ("d-07.log", "ready", {}),
    ("g-17.log", "cuda_graphs", {"init_s": 71.33}),
    ("a-19.log", "cuda_graphs", {"init_s": 9.76}),
])
def test_real_excerpts_with_startup_lines(real_logs: Path, name: str, stage: str, fields: dict) -> None:
    marks = [r for r in parse_text((real_logs / name).read_text(encoding="utf-8")) if isinstance(r, StageMark)]
    assert any(m.stage == stage and all(m.get(k) == v for k, v in fields.items()) for m in marks), marks


def test_no_stage_lines_is_the_old_behaviour() -> None:
    from diag.rules.startup import Startup

    assert Startup().serving and Startup().phase == "unknown"


def test_stall_replay_shows_the_stages_advance() -> None:
    """A startup-only log replayed: every endpoint's stage only moves forward, the siblings reach
    ready, the stuck one stays in CUDA-graph capture; no stats-missing or stall on the way."""
    wall = [0.0]
    state = st.WatchState(replay(RUNS / "startup-stall", speed=60, monotonic=lambda: wall[0]))
    stages: dict[str, list[str]] = {}
    while True:
        snap = state.step()
        assert not [f for f in snap.findings if f.f.code in ("DIAG-L001", "DIAG-B004")], snap.now
        for row in snap.endpoints:
            stage = row.s.startup.get("stage")
            if stage and (not stages.get(row.id) or stages[row.id][-1] != stage):
                stages.setdefault(row.id, []).append(stage)
        if snap.done:
            break
        wall[0] += 0.1  # 6 s of the run a step: a stage of a few seconds is still seen
    order = [s.name for s in STAGES]
    for eid, seen in stages.items():
        assert seen == sorted(seen, key=order.index) and len(seen) >= 3, (eid, seen)
    assert stages["prefill-w3"][-1] == "cuda_graphs"
    assert all(seen[-1] == "ready" for eid, seen in stages.items() if eid != "prefill-w3"), stages


def test_follow_never_reports_stats_missing_or_stalls_while_loading(tmp_path: Path) -> None:
    """diag tail -f's pipeline on a run whose logs grow: while an endpoint is not serving yet, no
    DIAG-L001 or DIAG-B004 names it; at the end the report is the batch one."""
    from diag.pipeline import Pipeline
    from diag.rules.settings import Settings
    from diag.sources import FollowSource

    src = RUNS / "kv-exhaustion"
    run = tmp_path / "run"
    shutil.copytree(src, run)
    logs = sorted(p for p in (run / "logs").glob("*.out"))
    full = {p: p.read_bytes().splitlines(keepends=True) for p in logs}
    parts = 8
    for p in logs:
        p.write_bytes(b"".join(full[p][: len(full[p]) // parts]))
    pipeline = Pipeline(FollowSource([str(run)]), Settings())
    for k in range(1, parts + 1):
        report = pipeline.step(force=True).report
        assert report is not None
        for f in report.findings:
            if f.code in ("DIAG-L001", "DIAG-B004") and f.endpoint:
                assert report.endpoint(f.endpoint).startup.get("phase") == "serving", (k, f.code, f.endpoint)
        for p in logs:
            lines = full[p]
            with p.open("ab") as fh:
                fh.write(b"".join(lines[len(lines) * k // parts: len(lines) * (k + 1) // parts]))
    final = pipeline.finish().report
    assert final is not None
    assert {f.code for f in final.findings} == {f.code for f in report_of(src).findings}


CORPUS = Path(__file__).resolve().parent / "data" / "real-logs"


@pytest.mark.parametrize(("name", "stage", "mark", "fields"), [
    ("n-24.log", "weights", "progress", {"percent": 0, "done": 0, "total": 10}),
    ("n-39.log", "kv_cache", "done", {"concurrency": 24.53}),
    ("n-40.log", "kv_connector", "start", {}),
])
def test_corpus_excerpts_with_startup_lines(name: str, stage: str, mark: str, fields: dict) -> None:
    """The repository's own real excerpts (tests/data/real-logs) that hold startup lines."""
    marks = [r for r in parse_text((CORPUS / name).read_text(encoding="utf-8")) if isinstance(r, StageMark)]
    assert any(m.stage == stage and m.mark == mark and all(m.get(k) == v for k, v in fields.items())
               for m in marks), marks


STAMP = re.compile(r"(\d{2})-(\d{2})[ T](\d{2}):(\d{2}):(\d{2})")


def _as_it_stood(src: Path, dst: Path, at: datetime) -> None:
    """A copy of run ``src`` as it stood at ``at``: each log up to its first line stamped later
    (``MM-DD HH:MM:SS``, which every log of the generated samples carries, ISO dates included), and no
    benchmark output."""
    shutil.copytree(src, dst, ignore=shutil.ignore_patterns("benchmark*", "sa-bench_*", "MANIFEST.json"))
    cut = (at.month, at.day, at.hour, at.minute, at.second)
    for log in [*dst.glob("logs/*.out"), *dst.glob("logs/*.log")]:
        kept = []
        for line in log.read_text(encoding="utf-8").splitlines(keepends=True):
            m = STAMP.search(line)
            if m and tuple(map(int, m.groups())) > cut:
                break
            kept.append(line)
        log.write_text("".join(kept), encoding="utf-8")


def _health_everywhere(run: Path) -> dict[str, set[str]]:
    """Each endpoint's health as the JSON document, the text table and the TUI show it."""
    from diag.emit.jsondoc import report_dict
    from diag.emit.text import render_tail
    from diag.tui.render import health_cell

    report = report_of(run)
    console = Console(record=True, width=200, color_system=None, file=io.StringIO())
    render_tail(report, console)
    lines = console.export_text().splitlines()
    table = lines[next(i for i, line in enumerate(lines) if line.startswith("endpoints")):]
    rows = {cells[0]: " ".join(cells[-2:]) if cells[-2:] == ["NO", "STATS"] else cells[-1]
            for cells in map(str.split, table[:table.index("")]) if cells and cells[0] in report.run.endpoints}
    tui = {s.id: health_cell(s).plain for s in report.endpoints}
    return {e["id"]: {e["health"], rows[e["id"]], "READY" if tui[e["id"]].startswith("ready ") else tui[e["id"]]}
            for e in report_dict(report)["endpoints"]}


def test_ready_endpoints_before_the_benchmark_are_ready_not_no_stats(tmp_path: Path) -> None:
    """prefill-bound as it stood once every endpoint was ready and before the orchestrator started the
    benchmark: no stats line yet, because no load came; READY in the JSON, the text and the TUI. A few seconds
    later the orchestrator has started the benchmark and still no stats line came: NO STATS."""
    full = report_of(RUNS / "prefill-bound")
    ready = max(datetime.fromisoformat(s.startup["ready_at"]) for s in full.endpoints)
    started = min(datetime.fromisoformat(s.startup["serving_at"]) for s in full.endpoints)
    healthy = datetime.fromisoformat("2026-08-12T14:11:13+00:00")   # "Server is healthy - starting benchmark"
    assert ready < healthy < started < min(b.started for b in full.run.benchmark if b.started)
    _as_it_stood(RUNS / "prefill-bound", tmp_path / "ready", ready + timedelta(seconds=2))
    # decode-w0 too: DIAG-K003 names it (its KV holds fewer requests than the recipe's concurrency), but a
    # check of what the recipe asks colours no endpoint
    want = {f"prefill-w{i}": {"READY"} for i in range(4)} | {"decode-w0": {"READY"}}
    assert _health_everywhere(tmp_path / "ready") == want
    _as_it_stood(RUNS / "prefill-bound", tmp_path / "loaded", healthy + timedelta(seconds=1))
    assert _health_everywhere(tmp_path / "loaded") == {eid: {"NO STATS"} for eid in want}
