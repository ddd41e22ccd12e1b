"""One answer everywhere (issue 33), over every shipped sample run: an endpoint's health agrees with the run's
verdict and the finding graph, and text, JSON, the TUI, the HTML report and the index show the same health;
every command that judges runs exits by README's exit-status table, piped into a reader that went away or not.

The expectations come from the documents diag writes (the JSON, README's table) and the rule catalog's data,
not from the functions under test. The reports are the batch reports the test files share
(``loading.report_of``); the commands run in this process (``helpers.run_diag``) except where only a real
process shows the behaviour (a closed pipe).
"""

from __future__ import annotations

import dataclasses
import io
import re
import subprocess
import sys
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from typing import Any

import pytest
from loading import report_of, shared_sample_pipelines

from diag.emit.jsondoc import report_dict
from diag.emit.text import render_tail
from diag.index.rows import report_rows
from diag.options import console_for
from diag.report import Report
from diag.report_doc import build_parts
from diag.report_part import RunPart
from diag.rules.catalog import catalog
from diag.rules.verdict_catalog import verdict_catalog
from diag.tail_cmd import exit_status
from diag.tui.render import health_cell

from helpers import run_diag

ROOT = Path(__file__).resolve().parents[1]
RUNS = sorted(p.name for p in (ROOT / "samples" / "runs").iterdir() if p.is_dir())
SEVERITIES = ("info", "warning", "error")
WORST_FIRST = ("DOWN", "CRIT", "LIMITS", "WARN", "STALE", "NO STATS", "READY", "OK")   # README's health order
FROM_FINDINGS = {"DOWN", "CRIT", "WARN"}


@pytest.fixture(autouse=True)
def _shared_samples() -> Iterator[None]:
    """The commands here judge each shipped sample run once per process (the report they all present)."""
    with shared_sample_pipelines():
        yield


def _report(run: str) -> Report:
    return report_of(ROOT / "samples" / "runs" / run)


# ------------------------------------------------------------------ README's exit-status table
@cache
def exit_table() -> dict[str, Any]:
    """README's table: its fail-on columns, and per outcome row its verdict classes and cells."""
    text = (ROOT / "README.md").read_text()
    block = text[text.index("**Exit status.**"):]
    lines = [ln for ln in block[block.index("\n| outcome"):].strip().split("\n\n")[0].splitlines()]
    head = [c.strip().strip("`") for c in lines[0].strip("|").split("|")]
    assert head[:2] == ["outcome", "verdict classes"] and lines[1].startswith("|---")
    rows = {}
    for line in lines[2:]:
        outcome, classes, *cells = (c.strip() for c in line.strip("|").split("|"))
        rows[outcome] = {"classes": [c.strip().strip("`") for c in classes.split(",")],
                         "cells": dict(zip(head[2:], cells, strict=True))}
    return {"fail_on": head[2:], "rows": rows}


def documented_status(verdict_class: str | None, worst: str | None, fail_on: str) -> int:
    """The exit status README's table gives a run of this verdict whose most severe finding is ``worst``."""
    row = next(r for r in exit_table()["rows"].values() if (verdict_class or "unknown") in r["classes"])
    cell = row["cells"][fail_on]
    if cell == "findings":
        return int(worst is not None and SEVERITIES.index(worst) >= SEVERITIES.index(fail_on))
    return int(cell)


def _worst(report: Report) -> str | None:
    return max((f.severity for f in report.findings), key=SEVERITIES.index, default=None)


def test_readme_exit_table_is_the_code() -> None:
    """Every verdict class in one row, under the outcome the catalog gives it; every cell what the code does."""
    from diag.rules.outcome import FAIL_ON, fails, outcome_of
    from diag.rules.verdict_catalog import OUTCOMES

    table = exit_table()
    assert table["fail_on"] == list(FAIL_ON)
    assert list(table["rows"]) == list(OUTCOMES)
    listed = [c for r in table["rows"].values() for c in r["classes"]]
    assert sorted(listed) == sorted(verdict_catalog().names) and len(listed) == len(set(listed))
    for outcome, row in table["rows"].items():
        assert row["classes"] == [c.name for c in verdict_catalog().classes if c.outcome == outcome]
        for cls in row["classes"]:
            assert outcome_of(cls) == outcome
            for fail_on in FAIL_ON:
                for worst in (None, *SEVERITIES):
                    assert int(fails(outcome, worst, fail_on)) == documented_status(cls, worst, fail_on), \
                        (cls, worst, fail_on)


# ------------------------------------------------------------------ health
def _consequences(doc: dict[str, Any]) -> set[int]:
    """The findings (by position) that are likely consequences of another finding present in the document."""
    present = {(f["code"], f["endpoint"], f["first_ts"]) for f in doc["findings"]}
    out = set()
    for i, f in enumerate(doc["findings"]):
        after = f["evidence"].get("after_engine_death")
        if after and (after["code"], after["endpoint"], after["at"]) in present:
            assert "likely a consequence" in f["message"]
            out.add(i)
    return out


def _implied(f: dict[str, Any]) -> str | None:
    """The state a finding implies by the catalog's data (README: health), None for none."""
    rule = catalog()[f["code"]]
    if rule.scope == "recipe" or rule.health == "none":
        return None
    return rule.health or {"error": "CRIT", "warning": "WARN"}.get(f["severity"])


@pytest.mark.parametrize("run", RUNS)
def test_health_follows_the_verdict_and_the_finding_graph(run: str) -> None:
    """The verdict's limiting side is the worst-health row wherever one exists; a row's finding-level health
    (DOWN, CRIT, WARN) rests on a finding about its own runtime state, never only on DIAG-K003 or on a likely
    consequence of another endpoint's death; a row no such finding names shows a state of its own data."""
    doc = report_dict(_report(run))
    rank = {e["id"]: WORST_FIRST.index(e["health"]) for e in doc["endpoints"]}
    side = (doc["summary"]["balance"] or {}).get("limiting")
    assert side == verdict_catalog().get(doc["verdict"]["class"]).side
    limiting = {e["id"] for e in doc["endpoints"] if side is not None and e["role"] == side}
    assert {e["id"] for e in doc["endpoints"] if e["limiting"]} == limiting
    for eid in limiting:
        assert rank[eid] <= min(rank.values()) and rank[eid] <= WORST_FIRST.index("LIMITS"), (eid, rank)
    folded = _consequences(doc)
    for e in doc["endpoints"]:
        own = {_implied(f) for i, f in enumerate(doc["findings"])
               if f["endpoint"] == e["id"] and i not in folded and f["code"] != "DIAG-K003"} - {None}
        if e["limiting"]:
            own.add("LIMITS")
        if own:
            assert e["health"] == min(own, key=WORST_FIRST.index), (e["id"], e["health"], own)
        else:
            assert e["health"] not in FROM_FINDINGS | {"LIMITS"}, (e["id"], e["health"])


@pytest.mark.parametrize("run", RUNS)
def test_every_output_shows_the_one_health(run: str) -> None:
    """JSON, the text table, the TUI's health cell, the HTML report's document and the index rows show the
    health ``analyze`` computed; the text table and the TUI mark the limiting side's rows."""
    report = _report(run)
    health = {s.id: s.health for s in report.endpoints}
    assert {e["id"]: e["health"] for e in report_dict(report)["endpoints"]} == health
    out = io.StringIO()
    render_tail(report, console_for(out))
    text = out.getvalue()
    table = text[text.index("\nendpoints"):]
    for s in report.endpoints:
        row = next(ln for ln in table.splitlines() if ln.startswith(s.id + " "))
        assert row.endswith(" " + s.health), row
        cell = health_cell(s)
        starting = s.startup.get("phase") == "starting" or s.health == "READY"
        assert cell.plain == s.health or starting, (s.id, cell.plain)
    part = RunPart.of(report)
    assert build_parts([part])["runs"][0]["health"] == health
    rows = report_rows(report, part, None)["endpoints"]
    assert dict(zip(rows["endpoint"], rows["health"], strict=True)) == health


def test_prefill_bound_decode_is_not_warn_from_k003() -> None:
    """prefill-bound: decode holds the recipe-capacity warning DIAG-K003 at 21 % KV; it does not colour
    decode-w0, and the four prefill rows, the side that limits, are the worst."""
    report = _report("prefill-bound")
    assert report.verdict is not None and report.verdict.cls == "prefill-bound"
    assert [f.severity for f in report.findings if f.endpoint == "decode-w0"] == ["warning"]
    assert [f.code for f in report.findings if f.endpoint == "decode-w0"] == ["DIAG-K003"]
    assert {s.id: s.health for s in report.endpoints} == {
        **{f"prefill-w{i}": "LIMITS" for i in range(4)}, "decode-w0": "OK"}


def test_engine_crash_prefill_rows_are_not_crit_from_consequences() -> None:
    """engine-crash: every prefill endpoint has DIAG-E002 errors that started after decode-w0 died (likely
    consequences, folded under the death); decode-w0 is DOWN, the prefill rows are not CRIT."""
    report = _report("engine-crash")
    for i in range(4):
        errors = [f for f in report.findings if f.endpoint == f"prefill-w{i}" and f.severity == "error"]
        assert errors and all(f.code == "DIAG-E002" and "likely a consequence" in f.message for f in errors)
    health = {s.id: s.health for s in report.endpoints}
    assert health["decode-w0"] == "DOWN"
    assert all(health[f"prefill-w{i}"] == "OK" for i in range(4)), health


@pytest.mark.parametrize("series, verdict", [
    ({"running": 20, "waiting": 30, "kv_usage": 30, "prompt_tps": 9000, "gen_tps": 500}, "prefill-bound"),
    ({"running": 120, "waiting": 30, "kv_usage": 97, "gen_tps": 900}, "decode-bound"),
])
def test_an_aggregated_engine_is_the_side_either_way(series: dict[str, int], verdict: str) -> None:
    """Without a P/D split the aggregated endpoint prefills and decodes: whichever side limits, it is marked."""
    from diag.pipeline import analyze
    from diag.rules.examples import build_example_run
    from diag.rules.settings import Settings

    run = build_example_run({"agg": {"engines": 2, **series}})
    report = analyze(run, Settings(), run.clock)
    assert report.verdict is not None and report.verdict.cls == verdict
    (agg,) = report.endpoints
    assert agg.limiting and WORST_FIRST.index(agg.health) <= WORST_FIRST.index("LIMITS")


# ------------------------------------------------------------------ exit status
@pytest.mark.parametrize("run", RUNS)
def test_every_run_exits_by_the_table(run: str) -> None:
    """The status a judged run gives (what tail, watch, report and index exit by) is README's for its
    verdict, under every --fail-on."""
    report = _report(run)
    verdict = report.verdict.cls if report.verdict is not None else None
    for fail_on in exit_table()["fail_on"]:
        judged = dataclasses.replace(report, fail_on=fail_on)
        want = documented_status(verdict, _worst(report), fail_on)
        assert (int(judged.fails), exit_status([judged])) == (want, want), (run, verdict, fail_on)


# a run of each outcome the samples hold (the regression tests below run the others of their pairs)
BY_OUTCOME = ("engine-crash", "startup-stuck", "decode-batch", "healthy")


def _want(run: str, fail_on: str = "error") -> int:
    report = _report(run)
    return documented_status(report.verdict.cls if report.verdict else None, _worst(report), fail_on)


@pytest.mark.parametrize("run", BY_OUTCOME)
def test_tail_and_watch_once_exit_by_the_table(run: str) -> None:
    path = f"samples/runs/{run}"
    assert run_diag("tail", path, "--format", "json").returncode == _want(run)
    assert run_diag("watch", "--once", "--now", "end", path).returncode == _want(run)
    assert run_diag("tail", path, "--fail-on", "warning", "--format", "json").returncode == _want(run, "warning")


def test_stuck_start_ups_exit_alike() -> None:
    """startup-stuck (decode stuck in CUDA-graph capture) and startup-stall (prefill-w3 stuck there): one
    class, one exit status (1: the run never served)."""
    runs = ("startup-stuck", "startup-stall")
    assert {_report(r).verdict.cls for r in runs} == {"startup-stuck"}  # type: ignore[union-attr]
    assert [run_diag("tail", f"samples/runs/{r}").returncode for r in runs] == [1, 1]


def test_decode_bound_runs_exit_alike() -> None:
    """kv-exhaustion (K001, an error) and decode-batch (no finding above info): both decode-bound, a
    bottleneck: 0 by default, 1 under --fail-on warning."""
    runs = ("kv-exhaustion", "decode-batch")
    assert {_report(r).verdict.cls for r in runs} == {"decode-bound"}  # type: ignore[union-attr]
    assert [run_diag("tail", f"samples/runs/{r}").returncode for r in runs] == [0, 0]
    assert [run_diag("tail", f"samples/runs/{r}", "--fail-on", "warning").returncode for r in runs] == [1, 1]


def test_report_and_index_exit_by_the_table(tmp_path: Path) -> None:
    """``diag index`` exits by its worst run, ``diag report`` of run directories or of the index by the runs
    it reports (one at a time through --where)."""
    runs = ("startup-stuck", "decode-batch", "healthy")
    into = str(tmp_path / "index")
    res = run_diag("index", *(f"samples/runs/{r}" for r in runs), "--into", into, "--jobs", "1")
    assert res.returncode == max(_want(r) for r in runs) == 1, res.stderr
    for fail_on in exit_table()["fail_on"]:   # the index again: nothing to read, the same runs judged
        res = run_diag("index", *(f"samples/runs/{r}" for r in runs), "--into", into, "--fail-on", fail_on)
        assert res.returncode == max(_want(r, fail_on) for r in runs), fail_on
        for r in runs:
            res = run_diag("report", into, "--where", f"name = '{r}'", "--format", "json", "-o",
                           str(tmp_path / "r.json"), "--fail-on", fail_on)
            assert res.returncode == _want(r, fail_on), (r, fail_on, res.stderr)
    res = run_diag("report", "samples/runs/decode-batch", "--format", "json", "-o", str(tmp_path / "r.json"),
                   "--fail-on", "warning")
    assert res.returncode == _want("decode-batch", "warning") == 1


def test_a_closed_pipe_keeps_the_runs_status(tmp_path: Path) -> None:
    """Real processes whose reader went away before they wrote: each exits as it would unpiped (README:
    "the status is the run's"), not 1 from the broken pipe."""
    commands = {   # (tail of healthy: the next test, through a shell and head)
        ("tail", "samples/runs/startup-stuck"): _want("startup-stuck"),
        ("watch", "--once", "--now", "end", "samples/runs/healthy"): _want("healthy"),
        ("report", "samples/runs/healthy", "--format", "text"): _want("healthy"),
        ("index", "samples/runs/startup-stuck", "--into", str(tmp_path / "index")): _want("startup-stuck"),
    }
    procs = {args: subprocess.Popen([sys.executable, "-m", "diag", *args], cwd=ROOT, stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE) for args in commands}
    for proc in procs.values():
        assert proc.stdout is not None
        proc.stdout.close()          # the reader is gone before the first write: every write meets EPIPE
    for args, proc in procs.items():
        _, err = proc.communicate(timeout=120)
        assert (proc.returncode, err.decode()) == (commands[args], ""), args


def test_tail_healthy_piped_to_head_exits_like_unpiped() -> None:
    """``diag tail samples/runs/healthy | head -1``: the first line, and diag's own status 0."""
    res = subprocess.run(["bash", "-c", f'"{sys.executable}" -m diag tail samples/runs/healthy | head -1; '
                                        'echo "status=${PIPESTATUS[0]}"'],
                         cwd=ROOT, capture_output=True, text=True, timeout=120)
    first, status = res.stdout.splitlines()
    assert re.match(r"job\s+\d+", first) and status == f"status={_want('healthy')}" == "status=0", res.stderr


# ------------------------------------------------------------------ the report's pick
def test_the_pick_is_never_a_point_of_an_invalid_run() -> None:
    """Every sample run in one report: block-size-crash's C=512 (measured before a P/D block-size mismatch cut
    the run short) was the pick without a word; a run whose verdict is invalid is set aside, and said."""
    parts = [RunPart.of(_report(run)) for run in RUNS]
    doc = build_parts(parts, None, None)
    invalid = {part.name for part in parts if part.verdict and part.verdict["class"] == "invalid"}
    assert "block-size-crash" in invalid
    assert doc["pick"]["run"] not in invalid
    measured = {part.name for part in parts if part.name in invalid and part.points}   # a run that never
    # started (sglang-startup-failure) has no point to set aside
    assert "sglang-startup-failure" in invalid - measured
    assert doc["pick"]["sentence"].endswith(f"Set aside as invalid runs: {', '.join(sorted(measured))}.")
    assert all(p["run_invalid"] for p in doc["points"] if p["run"] in invalid)
    assert not any(p["frontier"].get("working") for p in doc["points"] if p["run"] in invalid)
