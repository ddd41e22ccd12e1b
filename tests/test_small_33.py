"""Issue 33's smaller items, each as the class it belongs to: the TUI's engines over the row's window, a help
that describes the columns as they are, no stray glyph at the right edge, no label over the data; column
priorities by what the columns carry; one refusal for what is not a run or not a recipe; ``--where`` values
checked against the column's vocabulary; ``explain`` rendered on a terminal and raw when piped; README
examples that are real output."""

from __future__ import annotations

import asyncio
import io
import re
from pathlib import Path

import pytest
from rich.console import Console
from textual.geometry import Size
from textual.widgets import Static

from diag.sources import FollowSource
from diag.tui import state as st
from diag.tui.columns import COLUMNS
from diag.tui.dialogs import help_text
from diag.tui.plotscreen import draw_chart, legend
from diag.tui.render import figures_window, fit_parts
from diag.tui.scrollbar import CellScrollBar

ROOT = Path(__file__).resolve().parents[1]
RUNS = ROOT / "samples" / "runs"


def plain(renderable: object, width: int) -> str:
    """A rich renderable as a terminal of ``width`` cells shows it, without colour."""
    console = Console(width=width, no_color=True, file=io.StringIO())
    with console.capture() as cap:
        console.print(renderable)
    return cap.get()


def words(text: str) -> str:
    return " ".join(text.split())


@pytest.fixture(scope="module")
def prefill() -> st.Snapshot:
    return st.WatchState(FollowSource([str(RUNS / "prefill-bound")]), clock=lambda run: run.end).step()


@pytest.fixture(scope="module")
def kv_exhaustion() -> st.Snapshot:
    return st.WatchState(FollowSource([str(RUNS / "kv-exhaustion")]), clock=lambda run: run.end).step()


# ------------------------------------------------------------------ TUI
@pytest.mark.parametrize("which", ["prefill", "kv_exhaustion"])
def test_engine_rows_are_taken_over_the_rows_window_and_add_up_to_it(which: str, request) -> None:
    """The drill-down of decode-w0 listed 8 engines at 0.0 (their last, idle sample) beside a row of 16,980
    gen/s (the steady window's mean): every engine row is over the row's window, and they add up to it."""
    snap: st.Snapshot = request.getfixturevalue(which)
    for row in snap.endpoints:
        s, engines = row.s, snap.engines[row.id]
        assert s.window is not None and len(engines) == s.engines
        for name, total in (("gen_tps", s.gen_tps_mean), ("prompt_tps", s.prompt_tps_mean),
                            ("running", s.running_mean), ("waiting", s.waiting_mean)):
            got = sum(getattr(e.figures, name) or 0.0 for e in engines)
            assert got == pytest.approx(total or 0.0, rel=1e-9, abs=1e-6), (row.id, name)
        assert all(e.figures.samples > 0 for e in engines), "each engine has samples in the window"
    decode = snap.engines["decode-w0"]
    assert all((e.figures.gen_tps or 0) > 1_000 for e in decode), "decode's engines generate in the steady window"


def test_help_describes_each_column_as_it_is_and_names_the_window(prefill: st.Snapshot) -> None:
    """`?` said "latest stats" for steady means: the help lists each column from its own description and
    names the window the figures are taken over."""
    window = figures_window(prefill)
    assert window == "C=2,048 steady"
    text = words(plain(help_text(window), 68))
    for c in COLUMNS:
        assert f"{c.sort} {c.label} {words(c.doc)}" in text, c.key
    assert "now C=2,048 steady" in text and "latest" not in text
    from diag.rules.catalog import HEALTH_STATES

    assert all(f" {state} " in f" {text} " for state in HEALTH_STATES), "every health badge is explained"
    assert "none yet" in words(plain(help_text(None), 68))


@pytest.mark.parametrize("size,position", [(20, 0.0), (20, 3.3), (7, 11.5), (40, 77.7), (5, 95.0)])
def test_scrollbars_draw_whole_cells_never_glyphs(size: int, position: float) -> None:
    """A thumb's partial-block ends (``▅▅``) were stray glyphs at the right edge wherever the track's colour
    does not show (NO_COLOR, capture-pane): the bar is blanks, the thumb reverse video."""
    bar = CellScrollBar.render_bar(size=size, virtual_size=100, window_size=size, position=position, thickness=2)
    segments = bar.segments
    cells = [s for s in segments if s.text != "\n"]
    assert {s.text for s in cells} == {"  "}
    assert any(s.style is not None and s.style.reverse for s in cells), "the thumb shows"


STATUS = ["■ finished", "window 5 min", "no filter", "2 new findings (l: log)", "following samples/runs/prefill-bound"]


@pytest.mark.parametrize("width,want", [
    (120, "■ finished  ·  window 5 min  ·  no filter  ·  2 new findings (l: log)  ·  following samples/runs/prefill-bound"),
    (80, "■ finished  ·  window 5 min  ·  no filter  ·  2 new findings (l: log)"),  # 7 cells left: the label goes
    (84, "■ finished  ·  window 5 min  ·  no filter  ·  2 new findings (l: log)  ·  following…"),
    (85, "■ finished  ·  window 5 min  ·  no filter  ·  2 new findings (l: log)  ·  following…"),
    (30, "■ finished  ·  window 5 min"),
    (8, "■ finis…"),
])
def test_one_line_texts_drop_or_cut_whole_parts_and_never_end_in_a_separator(width: int, want: str) -> None:
    """The status line wrapped at 80 columns and its first line ended in a dangling ``·``."""
    got = fit_parts(STATUS, width)
    assert got == want and len(got) <= width and not got.endswith("·")


def test_the_threshold_label_never_hides_the_data(kv_exhaustion: st.Snapshot) -> None:
    """At 80x24 the K001 label sat on decode's KV trace (97-99 %, the chart's top row): the label goes to the
    legend and the data are drawn over the threshold line, so every cell the trace takes shows it."""
    from dataclasses import replace

    from diag.tui.plotdata import plot_set

    chart = plot_set(kv_exhaustion, "decode-w0", 5, 35).chart("kv")
    assert chart.hlines and max(max(s.ys) for s in chart.series) > 95
    size = Size(38, 10)
    with_line = draw_chart(chart, 5, size, "default")
    without = draw_chart(replace(chart, hlines=()), 5, size, "default")
    key = len(legend(chart, size.width))

    def data_cells(lines) -> set[tuple[int, int]]:
        return {(y, x) for y, line in enumerate(lines) for x, ch in enumerate(line.text) if 0x2800 < ord(ch) <= 0x28FF}

    plot_rows = with_line.lines[: len(with_line.lines) - key]
    assert data_cells(plot_rows) == data_cells(without.lines[: len(plot_rows)]), "no data cell is covered"
    assert "K001" not in "".join(line.text for line in plot_rows)
    assert "DIAG-K001 kv_usage 95 %" in with_line.lines[len(plot_rows)].text, "the threshold leads the legend"


def test_the_80_column_screens_keep_one_line_texts_whole_and_the_drilldown_names_its_window() -> None:
    from diag.tui.app import WatchApp
    from diag.tui.screens import EndpointScreen, MainScreen

    src = FollowSource([str(RUNS / "prefill-bound")])
    src.label = "following samples/runs/prefill-bound"
    app = WatchApp(st.WatchState(src, clock=lambda run: run.end), interval=3600.0)

    async def run() -> None:
        async with app.run_test(size=(80, 24)) as pilot:
            while app.snapshot is None or not isinstance(app.screen, MainScreen):
                await pilot.pause(0.05)
            await pilot.pause()
            line = str(app.screen.query_one("#status", Static).render())
            assert len(line) <= 78 and not line.rstrip().endswith("·") and line.endswith("…"), line
            await pilot.press("down", "down", "down", "down", "enter")
            while not isinstance(app.screen, EndpointScreen):
                await pilot.pause(0.05)
            await pilot.pause()
            title = words(str(app.screen.query_one("#ep-title", Static).render()))
            assert "engines over C=2,048 steady" in title

    asyncio.run(run())


# ------------------------------------------------------------------ column priorities
def endpoint_header(report, width: int) -> list[str]:
    """The endpoint table's column headers as `diag tail` prints them at ``width`` columns (no colour)."""
    from diag.emit.text import render_tail

    console = Console(width=width, no_color=True, file=io.StringIO())
    with console.capture() as cap:
        render_tail(report, console)
    lines = cap.get().splitlines()
    top = next(i for i, line in enumerate(lines) if line.startswith("endpoints"))
    head = next(i for i in range(top, len(lines)) if lines[i].startswith("endpoint "))
    return lines[head].split()


def test_a_run_stuck_in_startup_keeps_its_stage_and_drops_the_all_zero_samples() -> None:
    from loading import report_of

    header = endpoint_header(report_of(RUNS / "startup-stuck"), 100)
    assert "stage" in header and "samples" not in header and "preempt" not in header


@pytest.mark.parametrize("run", ["startup-stuck", "startup-stall", "prefill-bound", "kv-exhaustion",
                                 "engine-crash", "stats-missing-dynamo"])
@pytest.mark.parametrize("width", [80, 100, 120])
def test_columns_without_information_yield_and_the_verdicts_columns_come_first(run: str, width: int) -> None:
    """A column whose cells are all empty or zero is shown only when every column with information is; the
    columns that carry the verdict's evidence come right after endpoint and health."""
    from loading import report_of

    from diag.emit.text import Column, chosen_columns, endpoint_columns
    from diag.rules.present import VERDICT_FIGURES, informative

    report = report_of(RUNS / run)
    cols: list[Column] = endpoint_columns(report.endpoints, lambda s: False, report.verdict.cls)
    cells = [[c.cell(s) for c in cols] for s in report.endpoints]
    shown = set(chosen_columns(cols, cells, width))
    carries = [cols[i].evidence or informative(getattr(row[i], "plain", row[i]) for row in cells)
               for i in range(len(cols))]
    hidden_informative = [cols[i].header for i in range(len(cols)) if carries[i] and i not in shown]
    shown_blank = [cols[i].header for i in shown if not carries[i] and cols[i].priority]
    assert not (hidden_informative and shown_blank), (hidden_informative, shown_blank)
    evidence = [c for c in cols if c.figure in VERDICT_FIGURES.get(report.verdict.cls, ())]
    assert evidence and all(c.evidence and c.priority == 1 for c in evidence)
    assert all(c.priority > 1 for c in cols if c.priority and not c.evidence), "the evidence comes first"


def test_the_tui_table_takes_the_same_rule() -> None:
    """The TUI's columns: the verdict's evidence right after the columns that always stay, a blank column
    (every cell ``-`` or zero) after every one with information."""
    from diag.tui.columns import fit_columns, verdict_columns

    assert verdict_columns("decode-bound") == {"kv", "wait", "run", "pre"}
    plain_80 = fit_columns({}, 80)
    assert "pre" not in plain_80 and "pre" in fit_columns({}, 80, evidence=verdict_columns("decode-bound"))
    assert "run" in plain_80 and "run" not in fit_columns({}, 80, blank=frozenset({"run"}))
    assert "run" in fit_columns({}, 80, blank=frozenset({"run"}), evidence=frozenset({"run"}))


# ------------------------------------------------------------------ one refusal for what a command does not take
HTML = """<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>diag report</title>
<script>var layout = {xaxis: {title: "tok/s"}, yaxis: {range: [0, 1]}};	if (a) { b: c }</script>
</head><body><h1>sweep</h1><p>key: value: another</p></body></html>
"""


@pytest.fixture(scope="module")
def strangers(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Files that are no recipe and no run: an HTML page (its script is no YAML either), binary data, a run's
    worker log and benchmark log given to `check`, and a directory holding only such files."""
    d = tmp_path_factory.mktemp("strangers")
    (d / "report.html").write_text(HTML)
    (d / "core.bin").write_bytes(bytes(range(256)) * 4)
    logs = RUNS / "prefill-bound" / "logs"
    (d / "gb200-r03-n14_decode_w0.out").write_bytes((logs / "gb200-r03-n14_decode_w0.out").read_bytes())
    (d / "benchmark.out").write_bytes((logs / "benchmark.out").read_bytes())
    junk = d / "junk"
    junk.mkdir()
    (junk / "notes.txt").write_text("just notes\n")
    (junk / "page.html").write_text(HTML)
    return {"html": d / "report.html", "binary": d / "core.bin", "log": d / "gb200-r03-n14_decode_w0.out",
            "bench": d / "benchmark.out", "dir": junk}


WHAT = {"html": "an HTML page", "binary": "binary data", "log": "a run log: diag tail reads it",
        "bench": "a run log: diag tail reads it"}


@pytest.mark.parametrize("kind", ["html", "binary", "log", "bench"])
@pytest.mark.parametrize("fmt", ["text", "json"])
def test_check_refuses_a_file_that_is_no_recipe_in_one_line_not_c017(strangers, kind: str, fmt: str) -> None:
    """`diag check` on an HTML page or a log reported C017 "make the file valid YAML"."""
    from helpers import run_diag

    res = run_diag("check", str(strangers[kind]), "--format", fmt)
    assert res.returncode == 2 and res.stdout == "" and "C017" not in res.stderr
    assert res.stderr.splitlines() == [f"diag check: no recipes diag understands in {strangers[kind]} ({WHAT[kind]})"]


def test_beside_a_recipe_a_stranger_is_a_note_and_the_recipe_is_checked(strangers) -> None:
    from helpers import run_diag

    res = run_diag("check", str(strangers["html"]), str(RUNS / "prefill-bound" / "config.yaml"), "--format", "json")
    assert res.returncode == 0, res.stderr
    assert f"note: {strangers['html']}: not an srt-slurm recipe (an HTML page); skipped" in res.stderr
    assert "C017" not in res.stdout and '"files": 1' in res.stdout


@pytest.mark.parametrize("command", [["check"], ["tail"], ["watch", "--once"], ["report", "--format", "text"],
                                     ["index"]])
def test_every_command_refuses_what_it_does_not_take_with_the_one_line(strangers, command: list[str],
                                                                        tmp_path: Path) -> None:
    """One refusal for every command: `no logs|recipes diag understands in PATH (what it is)`, first on
    stderr, exit 2; `index` writes nothing (no empty index in a directory of unrelated files)."""
    from helpers import run_diag

    wanted = "recipes" if command == ["check"] else "logs"
    for path, what in ((strangers["html"], " (an HTML page)"), (strangers["dir"], "")):
        extra = ["--into", str(tmp_path / "index")] if command == ["index"] and path.is_file() else []
        res = run_diag(*command, str(path), *extra)
        first = res.stderr.splitlines()[0]
        assert res.returncode == 2 and first.startswith(f"diag {command[0]}: no {wanted} diag understands in {path}"
                                                        f"{what}"), (command, path, res.stderr)
    assert not (strangers["dir"] / ".diag").exists() and not (tmp_path / "index").exists()


# ------------------------------------------------------------------ --where against the column's vocabulary
@pytest.mark.parametrize("where,error", [
    ("verdict = 'prefill_bound'", "--where: no run has verdict 'prefill_bound' (did you mean 'prefill-bound'?); "
     "values: invalid, startup-stuck, transfer-bound, decode-bound, prefill-bound, under-loaded, healthy, unknown"),
    ("validity = 'ok' and verdict = 'healthy'", "--where: no run has validity 'ok'; values: valid, invalid, unknown, "
     "failed"),
    ("confidence != 'hi'", "--where: no run has confidence 'hi' (did you mean 'high'?); values: high, medium, low"),
    ("limiter = 'kv capacity'", "--where: no run has limiter 'kv capacity' (did you mean 'kv-capacity'?); values: "
     "kv-transfer failures, kv-transfer latency, kv-capacity, batch/compute"),
    ("verdict ~ 'prefill_'", "--where: no verdict matches 'prefill_'; values: invalid, startup-stuck, transfer-bound, "
     "decode-bound, prefill-bound, under-loaded, healthy, unknown"),
    ("top_finding = 'B001'", "--where: no run has top_finding 'B001' (did you mean 'DIAG-B001'?); "),
])
def test_where_values_outside_a_columns_vocabulary_are_one_line_errors(where: str, error: str) -> None:
    """`diag runs --where "verdict = 'prefill_bound'"` silently returned nothing."""
    import polars as pl

    from diag.index.query import QueryError, compile_where
    from diag.index.rows import RUNS

    with pytest.raises(QueryError) as e:
        compile_where(where, pl.Schema(RUNS))
    assert str(e.value).startswith(error) and "\n" not in str(e.value)
    for fine in ("verdict = 'prefill-bound'", "verdict ~ 'bound'", "model = 'anything at all'", "verdict = null",
                 "top_finding = 'DIAG-B001' or phase = 'idle'"):
        compile_where(fine, pl.Schema(RUNS))


def test_every_value_the_runs_table_takes_is_in_its_vocabulary() -> None:
    """The vocabularies are read from where diag defines the values; each sample run's values are in them
    (a valid --where is never refused)."""
    from loading import report_of

    from diag.index.rows import vocabulary

    vocab = vocabulary()
    for run in sorted(p for p in RUNS.iterdir() if p.is_dir()):
        report = report_of(run)
        for v in (report.verdict, *report.verdicts.points):
            assert v.cls in vocab["verdict"] and v.confidence in vocab["confidence"], (run.name, v.cls)
            assert v.limiter is None or v.limiter in vocab["limiter"], (run.name, v.limiter)
        assert report.phase in vocab["phase"] and all(e.phase in vocab["phase"] for e in report.endpoints)
        assert all(f.code in vocab["top_finding"] for f in report.findings)


def test_runs_refuses_a_value_no_run_can_have(tmp_path: Path) -> None:
    from helpers import run_diag

    assert run_diag("index", str(RUNS / "prefill-bound"), "--into", str(tmp_path), "--jobs", "1").returncode == 0
    res = run_diag("runs", str(tmp_path), "--where", "verdict = 'prefill_bound'")
    assert res.returncode == 2 and res.stdout == ""
    assert res.stderr.splitlines() == ["diag runs: --where: no run has verdict 'prefill_bound' (did you mean "
                                       "'prefill-bound'?); values: invalid, startup-stuck, transfer-bound, "
                                       "decode-bound, prefill-bound, under-loaded, healthy, unknown"]
    res = run_diag("runs", str(tmp_path), "--where", "verdict = 'prefill-bound'", "--format", "csv")
    assert res.returncode == 0 and len(res.stdout.splitlines()) == 2


# ------------------------------------------------------------------ explain: rendered on a terminal, Markdown piped
def on_a_terminal(args: list[str], env: dict[str, str]) -> str:
    """What `diag ARGS` writes to a terminal (a pseudo-terminal 100 columns wide), escapes stripped."""
    import fcntl
    import os
    import pty
    import struct
    import subprocess
    import sys
    import termios

    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 100, 0, 0))
    proc = subprocess.Popen([sys.executable, "-m", "diag", *args], stdin=subprocess.DEVNULL, stdout=slave,
                            stderr=subprocess.PIPE, cwd=ROOT, env=env)
    os.close(slave)
    out = b""
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:   # the other end closed: the command ended
            break
        if not chunk:
            break
        out += chunk
    os.close(master)
    assert proc.wait(timeout=60) == 0, proc.stderr.read() if proc.stderr else ""
    return re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", out.decode()).replace("\r\n", "\n")


def base_env(**changes: str | None) -> dict[str, str]:
    import os

    env = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "FORCE_COLOR", "TTY_COMPATIBLE", "COLUMNS")}
    env.update({k: v for k, v in changes.items() if v is not None})
    return env


@pytest.mark.parametrize("env", [{}, {"TTY_COMPATIBLE": "0", "NO_COLOR": "1"}], ids=["plain", "tty-compatible-0"])
def test_explain_is_rendered_on_a_terminal_whatever_the_environment_says(env: dict[str, str]) -> None:
    """On a terminal `diag explain` printed the raw Markdown where rich's own test said "no terminal"."""
    shown = on_a_terminal(["explain", "K001"], base_env(**env))
    assert "DIAG-K001 kv-cache-exhaustion" in shown and "severity error" in shown
    assert "# DIAG-K001" not in shown and "**severity**" not in shown and "`for`" not in shown, shown[:400]


def test_explain_piped_is_the_markdown_and_rules_plain_lines() -> None:
    """Piped, whatever the environment claims (FORCE_COLOR and TTY_COMPATIBLE made rich call a pipe a
    terminal): the Markdown itself, and the rules a line each."""
    import subprocess
    import sys

    from diag.explain import explain_text

    env = {"FORCE_COLOR": "1", "TTY_COMPATIBLE": "1"}

    res = subprocess.run([sys.executable, "-m", "diag", "explain", "K001"], capture_output=True, text=True, cwd=ROOT,
                         env=base_env(**env), timeout=60)
    assert res.returncode == 0 and res.stdout == explain_text("DIAG-K001") + "\n"
    res = subprocess.run([sys.executable, "-m", "diag", "rules"], capture_output=True, text=True, cwd=ROOT,
                         env=base_env(**env), timeout=60)
    assert res.stdout.splitlines()[0].startswith("DIAG-"), "piped: a rule a line, no table header"


def test_watch_once_on_a_narrow_terminal_leaves_out_the_columns_without_information() -> None:
    from diag.tui.render import render_once

    snap = st.WatchState(FollowSource([str(RUNS / "startup-stuck")]), clock=lambda run: run.end).step()
    shown = plain_once(snap, 100, render_once)
    header = next(line for line in shown.splitlines() if "endpoint" in line and "health" in line)
    assert "wait" not in header and "run" not in header and "pre" not in header, header
    assert "CUDA graphs 14/59" in shown, "the stuck stage shows in the health column"
    wide = plain_once(snap, 200, render_once)
    assert "wait" in next(line for line in wide.splitlines() if "endpoint" in line and "health" in line)


def plain_once(snap: st.Snapshot, width: int, render) -> str:
    console = Console(width=width, no_color=True, file=io.StringIO())
    with console.capture() as cap:
        render(snap, console)
    return cap.get()
