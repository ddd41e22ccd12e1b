"""`diag index ROOT...` (every run under some roots analysed once into a Parquet dataset) and `diag runs
INDEX` (one line a run, filtered and sorted, read from the index alone). See ``docs/index.md``."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import typer

from .options import (
    ConfigFile,
    Example,
    ExitZero,
    FailOnOption,
    ListFormat,
    RunsFormat,
    console_for,
    fail,
    fail_all,
    quiet_pipe,
    run_status,
)

INDEX_EXAMPLES: tuple[Example, ...] = (
    ("Every run under outputs/ (any depth), analysed once, 8 at a time (default: outputs/.diag/index)",
     "diag index outputs --into campaign --jobs 8"),
    ("Again after more runs finished: only new or changed runs are read; the counts as JSON",
     "diag index outputs --into campaign --format json"),
)
RUNS_EXAMPLES: tuple[Example, ...] = (
    ("Every run of an index: validity, verdict, best tok/s per GPU, top finding", "diag runs campaign"),
    ("The valid runs of a model, the most tok/s per GPU first",
     "diag runs campaign --where \"validity = 'valid' and model ~ 'Qwen3.5'\" --sort=-tok_s_gpu_working"),
    ("The prefill-bound runs as CSV, for a spreadsheet",
     "diag runs campaign --where \"verdict = 'prefill-bound'\" --format csv"),
)


COUNTS = {"error": "errors", "warning": "warnings", "info": "infos"}   # a severity's count column in runs
WAIT = 600.0   # seconds a second diag index into one index waits for the first (--wait)
WHERE_HELP = ("Only the runs matching EXPR: COLUMN OP VALUE joined by and/or, OP one of = != < <= > >= ~ (regex), "
              "VALUE 'text', a number, true, false or null (docs/index.md lists the columns).")


def index(
    roots: list[str] = typer.Argument(..., metavar="ROOT...", help="Directories holding run directories at any "
                                      "depth (srt-slurm's outputs/), or run directories."),
    into: Path | None = typer.Option(None, "--into", metavar="DIR",
                                     help="Write the index here (default: ROOT/.diag/index of the first ROOT)."),
    jobs: int = typer.Option(os.cpu_count() or 1, "--jobs", "-j", metavar="N", min=1,
                             help="Runs analysed at once, each in its own process (default and most: the CPUs this process may use)."),
    fmt: ListFormat = typer.Option(ListFormat.text, "--format", help="Output format: text or json (the counts)."),
    config: ConfigFile = None,
    wait: float = typer.Option(WAIT, "--wait", metavar="SECONDS", min=0,
                               help="Wait this long for another diag index writing the same index, then give up "
                                    "(exit 2; 0: at once)."),
    fail_on: FailOnOption = None,
    exit_zero: ExitZero = False,
) -> None:
    """Analyse every run under ROOT once into a Parquet dataset; again, only new or changed runs.

    Tables runs, points, findings, endpoints, and the per-interval series partitioned by run; DuckDB,
    polars and Spark read them as they are. A run that cannot be analysed is recorded with its reason. Exit
    status: the worst indexed run's, by its verdict (as diag tail)."""
    from diag.rules.settings import SettingsError, resolve

    from .files import InputError
    from .index.build import build_index, default_into, progress
    from .index.store import StoreError

    if into is None and not Path(roots[0]).is_dir():
        fail("index", f"{roots[0]}: not a directory; give --into DIR for the index")
    try:
        settings = resolve(Path.cwd(), config,  # a bad diag.toml stops here, not once per run
                           fail_on=fail_on.value if fail_on else None, exit_zero=exit_zero)
    except SettingsError as e:
        fail_all("index", [f"config error: {line}" for line in e.lines])
    bar = progress(True)
    task: list[Any] = []

    def on_total(n: int) -> None:
        if bar is not None and n:
            task.append(bar.add_task("analysing runs", total=n))
            bar.start()

    def on_run(n: int) -> None:
        if bar is not None and task:
            bar.advance(task[0], n)

    try:
        outcome = build_index(roots, into, jobs, settings, wait, lambda line: typer.echo(f"diag index: {line}", err=True),
                              on_run=on_run, on_total=on_total)
    except (InputError, StoreError) as e:
        fail("index", str(e))
    except OSError as e:
        fail("index", f"{into or default_into(roots)}: cannot write the index: {e.strerror or e}")
    finally:
        if bar is not None:
            bar.stop()
    with quiet_pipe():
        if fmt is ListFormat.json:
            from .emit import dumps

            sys.stdout.write(dumps(outcome.to_dict()) + "\n")
        else:
            from .emit.runs import index_summary

            sys.stdout.write(index_summary(outcome.to_dict(), outcome.failed))
        sys.stdout.flush()
    raise typer.Exit(_status(outcome.into, settings.fail_on))


def _status(into: Path, fail_on: str) -> int:
    """The exit status of the runs the index holds, by their verdicts (their finding counts stand for
    their findings): the worst run's, as ``diag tail`` of them all would exit."""
    import polars as pl

    from diag.rules.outcome import fails, outcome_of, worst_severity

    from .index.query import QueryError, select_runs

    try:
        rows = select_runs(into).filter(pl.col("status") == "ok")
    except QueryError as e:
        fail("index", str(e))

    def run_fails(row: dict[str, Any]) -> bool:
        worst = worst_severity(sev for sev, column in COUNTS.items() if row[column])
        return fails(outcome_of(row["verdict"]), worst, fail_on)

    return run_status(run_fails(row) for row in rows.iter_rows(named=True))


def runs(
    where_from: str = typer.Argument(..., metavar="INDEX", help="An index (diag index), or a ROOT holding one in "
                                     ".diag/index."),
    where: str | None = typer.Option(None, "--where", metavar="EXPR", help=WHERE_HELP),
    sort: str | None = typer.Option(None, "--sort", metavar="COL",
                                    help="Order by this column (-COL: descending; default: the index order)."),
    fmt: RunsFormat = typer.Option(RunsFormat.text, "--format", help="Output format: text, json or csv."),
) -> None:
    """The runs of an index, one line each: validity, verdict, best tok/s per GPU, top finding, path.

    Reads the index only (no log): filter on any column with --where, order with --sort."""
    from .index.query import QueryError, select_runs

    try:
        df = select_runs(where_from, where, sort)
    except QueryError as e:
        fail("runs", str(e))
    with quiet_pipe():
        if fmt is RunsFormat.csv:
            sys.stdout.write(df.write_csv())
        elif fmt is RunsFormat.json:
            from .emit import dumps
            from .emit.runs import runs_document

            sys.stdout.write(dumps(runs_document(df)) + "\n")
        else:
            from .emit.runs import render_runs

            render_runs(df, console_for())
        sys.stdout.flush()
