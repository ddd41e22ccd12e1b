"""`diag report RUN_DIR...`: the sweep as pictures — one self-contained HTML file (or a text summary,
or the JSON table behind every plot) from the same pipeline reports ``diag tail`` prints."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from .options import (
    EXIT_USAGE,
    ConfigFile,
    Example,
    ExitZero,
    FailOnOption,
    ReportFormat,
    console_for,
    fail,
    fail_all,
    positive,
    quiet_pipe,
    run_status,
)
from .sla import DEFAULT_SLA

if TYPE_CHECKING:
    from diag.rules.settings import Settings

    from .report_part import RunPart
    from .sla import Sla

EXAMPLES: tuple[Example, ...] = (
    ("A sweep as one offline HTML page (report.html)", "diag report outputs/5131402 outputs/5131417"),
    ("The same judged by your latency target, as text",
     "diag report outputs/5131402 outputs/5131417 --sla ttft=1s --format text"),
    ("The table behind every plot, for a notebook", "diag report outputs/5131402 --format json -o sweep.json"),
)


def report(
    paths: list[str] = typer.Argument(..., metavar="RUN_DIR...", help="Run directories (outputs/<jobid>/); "
                                      "the first is the baseline of the run-vs-run diff. Or one index (diag "
                                      "index), or a ROOT holding one in .diag/index: its runs, no log read."),
    output: Path | None = typer.Option(None, "--output", "-o", metavar="FILE",
                                       help="Write here (default: report.html for html, stdout otherwise)."),
    fmt: ReportFormat = typer.Option(ReportFormat.html, "--format",
                                     help="Output format: html (one offline file), text or json."),
    config: ConfigFile = None,
    sla: str | None = typer.Option(
        None, "--sla", metavar="TARGET",
        help=f"Latency target the points are judged by: METRIC[.QUANTILE]=DURATION,... with metrics ttft, tpot, "
             f"itl, e2el, quantile median (default), mean, p90, p99 ..., durations in s or ms. Default: the "
             f"recipe's goodput thresholds (ttft_threshold_ms, itl_threshold_ms), else {DEFAULT_SLA} "
             f"(on the median)."),
    min_tok_s_user: float | None = typer.Option(
        None, "--min-tok-s-user", metavar="N", callback=positive("--min-tok-s-user"),
        help="Pick the best point at N output tok/s per user or more (default: the most tok/s/GPU within "
             "the target)."),
    where: str | None = typer.Option(None, "--where", metavar="EXPR",
                                     help="With an index: only the runs matching EXPR (as diag runs --where)."),
    fail_on: FailOnOption = None,
    exit_zero: ExitZero = False,
) -> None:
    """The sweep as pictures: which configuration to pick under a latency target and why.

    One page: the Pareto frontier, the verdict behind every point, run vs run. Exit status: the worst run's,
    by its verdict (as diag tail)."""
    from diag.rules.settings import SettingsError, resolve

    from .files import InputError, output_problem
    from .report_doc import build_parts
    from .sla import SlaError, first_sla, parse_sla

    try:  # the configuration first: a broken diag.toml fails before any run is read
        settings = resolve(Path.cwd(), config, fail_on=fail_on.value if fail_on else None, exit_zero=exit_zero)
    except SettingsError as e:
        fail_all("report", [f"config error: {line}" for line in e.lines])
    try:
        option = parse_sla(sla) if sla is not None else None
    except SlaError as e:
        fail("report", f"--sla: {e}")
    out = output or (Path("report.html") if fmt is ReportFormat.html else None)
    if out is not None and (why := output_problem(out)) is not None:
        fail("report", f"-o {out}: {why}")
    problems: list[str] = []   # runs the index could not analyse: missing from the report (exit 2)
    unread: list[str] = []     # files of a run that could not be read: the rest of the run was (as tail)
    parts = _indexed(paths, where, problems)
    if parts is None:
        try:
            parts = sweep_parts(paths, settings)
        except InputError as e:
            fail("report", str(e))
    unread += [err for part in parts for err in part.errors]
    doc = build_parts(parts, first_sla(option, [part.sla for part in parts]), min_tok_s_user)
    for err in [*problems, *unread]:
        typer.echo(f"diag report: {err}", err=True)
    try:
        _write(doc, fmt, out)
    except OSError as e:   # the path went bad while the runs were read
        fail("report", f"-o {out}: cannot write: {e.strerror or e}")
    raise typer.Exit(EXIT_USAGE if problems else run_status(part.fails(settings.fail_on) for part in parts))


def _write(doc: dict, fmt: ReportFormat, out: Path | None) -> None:
    """The report document in ``fmt`` to ``out`` (stdout when None)."""
    if fmt is ReportFormat.html and out is not None:
        from .emit.html import render_html

        out.write_text(render_html(doc), encoding="utf-8")
        typer.echo(f"wrote {out}", err=True)
    elif fmt is ReportFormat.json:
        from .emit import dumps

        text = dumps(doc) + "\n"
        if out:
            out.write_text(text, encoding="utf-8")
        else:
            with quiet_pipe():
                sys.stdout.write(text)
                sys.stdout.flush()
    else:
        from .emit.report_text import render_report

        if out:
            with out.open("w", encoding="utf-8") as fh:
                render_report(doc, console_for(fh))
        else:
            with quiet_pipe():
                render_report(doc, console_for())


def _indexed(paths: list[str], where: str | None, problems: list[str]) -> list[RunPart] | None:
    """The parts of the runs an index holds when ``paths`` name one (its failed runs as ``problems``);
    None for run directories."""
    from .index.query import QueryError, index_dir, report_parts, select_runs, snapshot

    try:
        found = index_dir(paths[0]) if len(paths) == 1 else None
    except QueryError as e:
        if where is None:
            return None
        fail("report", str(e))
    if found is None:
        if where is not None:
            fail("report", "--where selects runs of an index: give one index (diag index) or a ROOT holding one")
        return None
    try:
        with snapshot(found) as whole:  # the failed runs and the parts of one generation
            failed = select_runs(whole, where).filter(status="failed")
            parts = report_parts(whole, where)
    except QueryError as e:
        fail("report", str(e))
    problems += [f"{path}: not analysed: {reason}" for path, reason in failed.select("path", "error").iter_rows()]
    if not parts and failed.height == 0:
        fail("report", f"no run in {found}" + (f" matches --where {where!r}" if where else ""))
    return parts


def sweep_parts(paths: list[str], settings: Settings) -> list[RunPart]:
    """The report parts of the runs among ``paths``, read by the pipeline; raises InputError on a path that
    does not exist and when no run among ``paths`` has a file diag could read (as ``tail`` does)."""
    from .files import InputError, find_runs
    from .pipeline import Pipeline
    from .refusal import nothing_read, unread_lines
    from .report_part import RunPart
    from .sources import BatchSource

    runs = find_runs(paths)
    reports = [Pipeline(BatchSource(rf), settings).once() for rf in runs]
    if nothing_read(reports):
        raise InputError(unread_lines(paths, reports)[0])
    return [RunPart.of(report, rf.results) for report, rf in zip(reports, runs, strict=True)]


def sweep_document(paths: list[str], settings: Settings, sla: Sla | None = None,
                   min_tok_s_user: float | None = None) -> tuple[dict[str, Any], list[str]]:
    """The ``diag report --format json`` document of the runs among ``paths`` and the errors of reading
    them (one line each: the rest of the input was read); raises InputError as :func:`sweep_parts`."""
    from .report_doc import build_parts
    from .sla import first_sla

    parts = sweep_parts(paths, settings)
    doc = build_parts(parts, first_sla(sla, [part.sla for part in parts]), min_tok_s_user)
    return doc, [err for part in parts for err in part.errors]
