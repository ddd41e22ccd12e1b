"""`diag report RUN_DIR...`: the sweep as pictures — one self-contained HTML file (or a text summary,
or the JSON table behind every plot) from the same pipeline reports ``diag tail`` prints."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from .options import EXIT_USAGE, ConfigFile, Example, ReportFormat, console_for, fail, positive, quiet_pipe
from .sla import DEFAULT_SLA

if TYPE_CHECKING:
    from diag.rules.settings import Settings

    from .sla import Sla

EXAMPLES: tuple[Example, ...] = (
    ("A sweep as one offline HTML page (report.html)", "diag report outputs/5131402 outputs/5131417"),
    ("The same judged by your latency target, as text",
     "diag report outputs/5131402 outputs/5131417 --sla ttft=1s --format text"),
    ("The table behind every plot, for a notebook", "diag report outputs/5131402 --format json -o sweep.json"),
)


def report(
    paths: list[str] = typer.Argument(..., metavar="RUN_DIR...", help="Run directories (outputs/<jobid>/); "
                                      "the first is the baseline of the run-vs-run diff."),
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
) -> None:
    """The sweep as pictures: which configuration to pick under a latency target and why.

    One page: the Pareto frontier, the verdict behind every point, run vs run."""
    from diag.rules.settings import SettingsError, resolve

    from .files import InputError
    from .sla import SlaError, parse_sla

    try:
        option = parse_sla(sla) if sla is not None else None
    except SlaError as e:
        fail("report", f"--sla: {e}")
    try:
        settings = resolve(Path.cwd(), config)
    except SettingsError as e:
        fail("report", f"config error: {e}")
    try:
        doc, errors = sweep_document(paths, settings, option, min_tok_s_user)
    except InputError as e:
        fail("report", str(e))
    for err in errors:
        typer.echo(f"diag report: {err}", err=True)
    if fmt is ReportFormat.html:
        from .emit.html import render_html

        out = output or Path("report.html")
        out.write_text(render_html(doc), encoding="utf-8")
        typer.echo(f"wrote {out}", err=True)
    elif fmt is ReportFormat.json:
        from .emit import dumps

        text = dumps(doc) + "\n"
        if output:
            output.write_text(text, encoding="utf-8")
        else:
            with quiet_pipe():
                sys.stdout.write(text)
                sys.stdout.flush()
    else:
        from .emit.report_text import render_report

        if output:
            with output.open("w", encoding="utf-8") as fh:
                render_report(doc, console_for(fh))
        else:
            with quiet_pipe():
                render_report(doc, console_for())
    raise typer.Exit(EXIT_USAGE if errors else 0)


def sweep_document(paths: list[str], settings: Settings, sla: Sla | None = None,
                   min_tok_s_user: float | None = None) -> tuple[dict[str, Any], list[str]]:
    """The ``diag report --format json`` document of the runs among ``paths`` and the errors of reading
    them (one line each); raises InputError on a path that does not exist."""
    from .files import find_runs
    from .pipeline import Pipeline
    from .report_doc import build
    from .sla import resolve_sla
    from .sources import BatchSource

    runs = find_runs(paths)
    reports = [Pipeline(BatchSource(rf), settings).once() for rf in runs]
    target = resolve_sla(sla, [rep.run.recipe for rep in reports])
    result_files = [{info.concurrency: path for path, info in rf.of("sa-bench-result") if info.concurrency}
                    for rf in runs]
    return build(reports, target, result_files, min_tok_s_user), [e for rep in reports for e in rep.run.errors]
