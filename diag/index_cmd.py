"""`diag index ROOT...` (every run under some roots analysed once into a Parquet dataset) and `diag runs
INDEX` (one line a run, filtered and sorted, read from the index alone). See ``docs/index.md``."""

from __future__ import annotations

import os
import sys
from enum import StrEnum
from pathlib import Path
from typing import Any

import typer

from .options import ConfigFile, Example, ListFormat, console_for, fail, printable, quiet_pipe

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


class RunsFormat(StrEnum):
    text = "text"
    json = "json"
    csv = "csv"


WHERE_HELP = ("Only the runs matching EXPR: COLUMN OP VALUE joined by and/or, OP one of = != < <= > >= ~ (regex), "
              "VALUE 'text', a number, true, false or null (docs/index.md lists the columns).")


def index(
    roots: list[str] = typer.Argument(..., metavar="ROOT...", help="Directories holding run directories at any "
                                      "depth (srt-slurm's outputs/), or run directories."),
    into: Path | None = typer.Option(None, "--into", metavar="DIR",
                                     help="Write the index here (default: ROOT/.diag/index of the first ROOT)."),
    jobs: int = typer.Option(os.cpu_count() or 1, "--jobs", "-j", metavar="N", min=1,
                             help="Runs analysed at once, each in its own process (default: the CPUs)."),
    fmt: ListFormat = typer.Option(ListFormat.text, "--format", help="Output format: text or json (the counts)."),
    config: ConfigFile = None,
) -> None:
    """Analyse every run under ROOT once into a Parquet dataset; again, only new or changed runs.

    Tables runs, points, findings, endpoints, and the per-interval series partitioned by run; DuckDB,
    polars and Spark read them as they are. A run that cannot be analysed is recorded with its reason."""
    from .files import InputError
    from .index.build import build_index, default_into, progress

    if into is None and not Path(roots[0]).is_dir():
        fail("index", f"{roots[0]}: not a directory; give --into DIR for the index")
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
        outcome = build_index(roots, into, jobs, config, on_run=on_run, on_total=on_total)
    except InputError as e:
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
            sys.stdout.write(f"{outcome.runs} runs in {outcome.into}: {outcome.parsed} analysed, {outcome.reused} "
                             f"reused, {len(outcome.failed)} failed\n")
            for path, reason in outcome.failed:
                sys.stdout.write(f"  failed {printable(path)}: {printable(reason)}\n")
        sys.stdout.flush()


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
            from .emit import dumps, envelope

            rows = [{k: v.isoformat() if hasattr(v, "isoformat") else v for k, v in row.items()}
                    for row in df.iter_rows(named=True)]
            sys.stdout.write(dumps({**envelope("diag-runs-1"), "runs": rows}) + "\n")
        else:
            _table(df.to_dicts())
        sys.stdout.flush()


def _table(rows: list[dict[str, Any]]) -> None:
    from rich.table import Table

    from diag.rules.present import number

    table = Table(box=None, pad_edge=False, show_edge=False, header_style="bold")
    for name, justify in (("validity", "left"), ("verdict", "left"), ("tok/s/GPU", "right"),
                          ("top finding", "left"), ("path", "left")):
        table.add_column(name, justify=justify, no_wrap=name == "path")  # type: ignore[arg-type]
    for r in rows:
        top = r["error"] if r["status"] == "failed" else r["top_finding"] or "-"
        table.add_row(r["validity"] or "-", r["verdict"] or "-", number(r["tok_s_gpu_working"]),
                      printable(top, 60), printable(r["path"]))
    console = console_for()
    console.print(table)
    console.print(f"{len(rows)} run{'s' if len(rows) != 1 else ''}", style="dim")
