"""One pipeline: every sample run's batch JSON is golden (exact), and follow mode, a replay through the
TUI core and a streamed `tail -f --format jsonl` all end in that same report."""

from __future__ import annotations

import functools
import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from golden_io import check_golden, normalized
from loading import replay, report_of
from schemas import validate

from diag.emit.jsondoc import report_dict
from diag.pipeline import Pipeline
from diag.rules.settings import Settings
from diag.sources import FollowSource
from diag.tui.state import WatchState

from helpers import run_diag

ROOT = Path(__file__).resolve().parents[1]
RUNS = sorted(p.name for p in (ROOT / "samples" / "runs").iterdir())


@functools.cache
def _batch_doc(run: str) -> dict:
    return report_dict(report_of(ROOT / "samples" / "runs" / run))


@pytest.mark.parametrize("run", RUNS)
def test_tail_json_is_golden(run: str) -> None:
    res = run_diag("tail", f"samples/runs/{run}", "--format", "json")
    assert res.returncode in (0, 1), res.stderr
    doc = json.loads(res.stdout)
    validate(doc, "tail")
    check_golden(f"tail-{run}", doc)
    assert res.returncode == (1 if doc["verdict"]["class"] in ("invalid", "startup-stuck") else 0)  # README's table


@pytest.mark.parametrize("run", RUNS)
def test_follow_ends_in_the_batch_report(run: str) -> None:
    pipeline = Pipeline(FollowSource([f"samples/runs/{run}"]), Settings())
    pipeline.step()
    final = pipeline.finish().report
    assert final is not None
    got, want = normalized(report_dict(final)), normalized(_batch_doc(run))
    for key in want:
        assert got[key] == want[key], f"{run}: follow and batch differ in {key!r}"


@pytest.mark.parametrize("run", RUNS)
def test_replay_to_the_end_is_the_batch_report(run: str) -> None:
    wall = [0.0]
    state = WatchState(replay(ROOT / "samples" / "runs" / run, speed=60, monotonic=lambda: wall[0]),
                       retain_s=None)
    snap = state.step()
    while not snap.done:
        wall[0] += 600.0  # ten hours of the run per step
        snap = state.step()
    assert state.report is not None
    got, want = normalized(report_dict(state.report)), normalized(_batch_doc(run))
    for key in want:
        assert got[key] == want[key], f"{run}: replay and batch differ in {key!r}"
    assert {e.id: e.s.health for e in snap.endpoints} == {e["id"]: e["health"] for e in want["endpoints"]}


@pytest.mark.parametrize("run", ["prefill-bound", "engine-crash"])
def test_streamed_jsonl_lines_are_json_and_end_in_the_batch_summary(run: str) -> None:
    want = normalized(_batch_doc(run))
    records = sum(s["records"] for s in want["sources"])
    proc = subprocess.Popen([sys.executable, "-m", "diag", "tail", f"samples/runs/{run}", "-f", "--format", "jsonl",
                             "--heartbeat", "3600"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            cwd=ROOT)
    assert proc.stdout is not None
    rows = []
    deadline = time.monotonic() + 60
    while sum(r["type"] == "record" for r in rows) < records and time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        rows.append(json.loads(line))
    proc.send_signal(signal.SIGINT)
    out = proc.stdout.read()  # the rest, buffered part included (communicate() would skip the buffer)
    proc.wait(timeout=60)
    err = proc.stderr.read() if proc.stderr else ""
    rows += [json.loads(line) for line in out.splitlines()]
    for row in rows:
        validate(row, "tail-jsonl")
    assert rows[0]["type"] == "stream" and rows[-1]["type"] == "summary"
    summary = normalized(rows[-1])
    for key in ("endpoints", "findings", "benchmark", "summary"):
        assert summary[key] == want[key], key
    assert proc.returncode == (1 if want["verdict"]["class"] in ("invalid", "startup-stuck") else 0), err
