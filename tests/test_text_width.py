"""``diag tail`` text at 80, 100 and 120 columns: every value whole (never cut), each endpoint's row and each
benchmark point's row on one line, nothing wider than the terminal."""

from __future__ import annotations

import io
import os
import subprocess
import sys
from pathlib import Path

import pytest
from loading import report_of
from rich.console import Console

from diag.emit.text import render_tail
from diag.report import Report
from diag.rules.present import VERDICT_FIGURES, informative, number

ROOT = Path(__file__).resolve().parents[1]
RUNS = sorted(p for p in (ROOT / "samples" / "runs").iterdir() if p.is_dir())
WIDTHS = (80, 100, 120)


@pytest.fixture(scope="module")
def reports() -> dict[str, Report]:
    return {p.name: report_of([str(p)]) for p in RUNS}


def _section(lines: list[str], title: str) -> list[str]:
    """The lines of the table titled ``title`` (up to the next blank line)."""
    start = next(i for i, line in enumerate(lines) if line.startswith(title))
    end = next((i for i in range(start, len(lines)) if not lines[i].strip()), len(lines))
    return lines[start + 1:end]


def _text(report: Report, width: int) -> str:
    console = Console(record=True, width=width, color_system=None, highlight=False, file=io.StringIO())
    render_tail(report, console)
    return console.export_text()


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("name", [p.name for p in RUNS])
def test_every_value_whole_and_rows_on_one_line(reports: dict[str, Report], name: str, width: int) -> None:
    report = reports[name]
    text = _text(report, width)
    lines = text.splitlines()
    assert "…" not in text
    assert max(len(line.rstrip()) for line in lines) <= width
    table = _section(lines, "endpoints") if report.endpoints else []
    evidence = VERDICT_FIGURES.get(report.verdict.cls if report.verdict else "", ())

    def kept(figure: str, cells: list[str]) -> bool:
        """A column stays when it carries information or the verdict rests on it (an all-empty one yields)."""
        return figure in evidence or informative(cells)

    wait = [f"{number(s.waiting_mean)}/{number(s.waiting_peak)}" for s in report.endpoints]
    kv = [f"{number(s.kv_mean, 1)}/{number(s.kv_peak, 1)}" for s in report.endpoints]
    rates = [number(s.prompt_tps_mean) for s in report.endpoints] + [number(s.gen_tps_mean) for s in report.endpoints]
    for i, s in enumerate(report.endpoints):
        rows = [line for line in table if line.split(" ", 1)[0].rstrip("*") == s.id]
        assert len(rows) == 1, (s.id, rows)
        row = rows[0].rstrip()
        assert row.endswith(s.health), row                      # the last column is on the same line
        assert wait[i] in row or not kept("waiting", wait)
        assert kv[i] in row or not kept("kv", kv)
        if width >= 100 and kept("prompt_tps", rates):
            assert number(s.prompt_tps_mean) in row and number(s.gen_tps_mean) in row
    for v in report.verdicts.points if report.verdicts else ():
        rows = [line for line in lines if line.lstrip().startswith(number(v.concurrency) + "  ")]
        assert any(v.label in row for row in rows), (v.concurrency, v.label, rows)


def test_wider_terminal_shows_more_columns(reports: dict[str, Report]) -> None:
    report = reports["kv-exhaustion"]
    narrow, wide = _text(report, 80), _text(report, 200)
    assert "more columns on a wider terminal" in " ".join(narrow.split()) and "wider terminal" not in wide
    assert "last seen" in wide and "last seen" not in narrow


@pytest.mark.parametrize("width", WIDTHS)
def test_cli_honours_columns(width: int) -> None:
    """The command itself, as a user runs it with COLUMNS set (not a terminal: no colour)."""
    env = {**os.environ, "COLUMNS": str(width)}
    env.pop("NO_COLOR", None)
    res = subprocess.run([sys.executable, "-m", "diag", "tail", str(ROOT / "samples/runs/prefill-bound")],
                         capture_output=True, text=True, env=env, cwd=ROOT, timeout=120)
    assert res.returncode == 0, res.stderr   # warnings only: below the default fail-on
    assert "\x1b[" not in res.stdout and "…" not in res.stdout
    assert max(len(line.rstrip()) for line in res.stdout.splitlines()) <= width
    assert any(line.startswith("decode-w0") and line.rstrip().endswith(("WARN", "OK", "CRIT"))
               for line in res.stdout.splitlines())
