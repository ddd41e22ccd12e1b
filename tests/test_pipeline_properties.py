"""Whole-pipeline properties over generated runs (tests/rungen.py: shipped samples reshaped by a plan):
any run a generator can produce goes through ``tail`` (JSON valid against its schema, text at 80 and 120
columns), ``watch --once``, a replay, ``report`` and ``index`` without a traceback, exits 0 or 1, and the text
and JSON paths name the same findings with the same exit status.

Each property has a fixed budget (``max_examples``) and a fixed seed (``derandomize``) so the suite's time
and its verdict do not vary between runs; ``DIAG_PROPERTY_EXAMPLES=N`` widens the search for a hunt
(``DIAG_PROPERTY_EXAMPLES=500 .venv/bin/python -m pytest -n0 tests/test_pipeline_properties.py``)."""

from __future__ import annotations

import json
import os
import re
import tempfile
from datetime import timedelta
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from loading import replay, report_of
from rungen import RUNS, FilePlan, RunPlan, plans, run_files, write_run
from schemas import validate

from diag.pipeline import Pipeline
from diag.rules.settings import Settings

from helpers import run_diag

_HUNT = int(os.environ.get("DIAG_PROPERTY_EXAMPLES", "0"))
_FINDING_LINE = re.compile(r"^(DIAG-[A-Z]\d{3}) (?:error|warning|info) +\S+(?: \[([^\]]+)\])?$", re.M)


def _budget(n: int) -> settings:
    return settings(max_examples=_HUNT or n, deadline=None, derandomize=not _HUNT, database=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def _json_findings(doc: dict) -> list[tuple[str, str]]:
    return sorted((f["code"], f["endpoint"] or "") for f in doc["findings"])


def _text_findings(text: str) -> list[tuple[str, str]]:
    return sorted((m[1], m[2] or "") for m in _FINDING_LINE.finditer(text))


def check_tail(run: Path) -> dict:
    """``tail`` on one run: JSON (schema-valid) and text at 80 and 120 columns agree, ``watch --once`` exits as
    they do; returns the document."""
    js = run_diag("tail", str(run), "--format", "json")
    assert js.returncode <= 1, js.stderr
    doc = json.loads(js.stdout)
    validate(doc, "tail")
    for columns in ("80", "120"):
        tx = run_diag("tail", str(run), env={"COLUMNS": columns, "NO_COLOR": "1"})
        assert tx.returncode == js.returncode, (columns, tx.stderr)
        assert _text_findings(tx.stdout) == _json_findings(doc), columns
    once = run_diag("watch", str(run), "--once", env={"COLUMNS": "80", "NO_COLOR": "1"})
    assert once.returncode == js.returncode, once.stderr   # the same run, the same status (was 2 on a cut JSON)
    assert not [line for line in once.stdout.splitlines() if line != line.rstrip()]
    return doc


@_budget(14)
@given(plans())
def test_any_generated_run_through_tail(plan: RunPlan) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        check_tail(write_run(plan, Path(tmp)))


@_budget(3)
@given(st.lists(plans(), min_size=2, max_size=3))
def test_generated_runs_through_report_and_index(run_plans: list[RunPlan]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "outputs"
        for n, plan in enumerate(run_plans):
            write_run(plan, root / str(n))
        rep = run_diag("report", str(root), "--format", "json")
        assert rep.returncode <= 1, rep.stderr
        validate(json.loads(rep.stdout), "report")
        txt = run_diag("report", str(root), "--format", "text", env={"COLUMNS": "80", "NO_COLOR": "1"})
        assert txt.returncode == rep.returncode, txt.stderr
        idx = run_diag("index", str(root), "--into", str(Path(tmp) / "index"), "--jobs", "1", "--format", "json")
        assert idx.returncode <= 1, idx.stderr
        runs = run_diag("runs", str(Path(tmp) / "index"), "--format", "json")
        assert runs.returncode <= 1, runs.stderr
        validate(json.loads(runs.stdout), "runs")


@_budget(6)
@given(plans())
def test_any_generated_run_through_a_replay(plan: RunPlan) -> None:
    """``watch --replay``'s source stepped through a generated run (skewed, shuffled, cut files: their own
    stamps decide when their lines come): never a traceback, the run's clock never past the virtual time,
    and at its end the findings of a batch read."""
    with tempfile.TemporaryDirectory() as tmp:
        check_replay(write_run(plan, Path(tmp)))


def test_a_capture_that_outlasts_the_logs_is_replayed_in_time() -> None:
    """The regression: stats-missing with its one log's lines all on its first second and its Prometheus
    capture 15 minutes long; the replay ended with the logs, so the capture's samples came at once and the
    run's clock stood 15 minutes past the virtual time."""
    plan = RunPlan("stats-missing", (False,), 8, (FilePlan(empty=True), FilePlan(stretch=0.0)), True)
    with tempfile.TemporaryDirectory() as tmp:
        check_replay(write_run(plan, Path(tmp)))


def check_replay(run: Path) -> None:
    """A replay of ``run`` stepped at four points of its span (see the property above)."""
    wall = [0.0]
    source = replay(run, speed=1.0, monotonic=lambda: wall[0])
    source.now()
    pipeline = Pipeline(source, Settings())
    span = (source.end - source.start).total_seconds()
    for fraction in (0.0, 0.3, 0.7, 1.0):
        wall[0] = span * fraction
        got = pipeline.step(force=True).report
        assert got is not None
        assert got.run.clock is None or got.run.clock <= source.start + timedelta(seconds=wall[0])
    assert source.finished
    batch = report_of(run)
    assert {(f.code, f.endpoint) for f in batch.findings} <= {(f.code, f.endpoint) for f in got.findings}


def test_siblings_that_went_through_a_stage_in_no_time() -> None:
    """A run cut while its endpoints load, whose siblings' stages took 0 s (every line on one second):
    the stage's comparison with its siblings names their 0 s, not a ratio over it (was ZeroDivisionError)."""
    files = run_files(RUNS / "startup-stuck")
    frozen = tuple(FilePlan(stretch=0.0) if "_prefill_" in p.name else FilePlan() for p in files)
    plan = RunPlan("startup-stuck", (True,), 8, frozen, False)
    with tempfile.TemporaryDirectory() as tmp:
        doc = check_tail(write_run(plan, Path(tmp)))
    stuck = [f for f in doc["findings"] if f["code"] == "DIAG-S001"]
    assert stuck and all(f["evidence"]["sibling_median_s"] == 0 for f in stuck if f["evidence"]["siblings"])
    assert any("sibling(s) took 0s" in f["message"] for f in stuck)


def test_cut_result_files_are_one_line_each_in_every_command(tmp_path: Path) -> None:
    """The regressions: every file of a run emptied (logs, result JSONs, roll-up), as a job killed at its start
    leaves them: ``report`` and ``watch --once`` exited 2 where ``tail`` read the rest; each unreadable file is
    one line on stderr and the status is the run's."""
    run = write_run(RunPlan("prefill-bound", (False,), 8, (FilePlan(empty=True),), False), tmp_path)
    cut = len(list(run.rglob("*.json")))   # the job's metadata (twice), the two results, the roll-up
    statuses = {}
    for args in (["tail", str(run)], ["watch", str(run), "--once"], ["report", str(run), "--format", "text"]):
        res = run_diag(*args)
        assert res.stderr.count("invalid JSON") == cut == 5, (args, res.stderr)
        statuses[args[0]] = res.returncode
    assert set(statuses.values()) == {statuses["tail"]} and statuses["tail"] <= 1
