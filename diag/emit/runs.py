"""``diag runs``: the selected rows of an index's ``runs`` table as text (one line a run), a JSON document
(schema ``diag-runs-1``) or CSV; and the one-line summary of ``diag index``."""

from __future__ import annotations

from typing import Any

import polars as pl
from rich.cells import cell_len
from rich.console import Console

from diag.options import printable
from diag.rules.present import number

from . import envelope

RUNS_SCHEMA = "diag-runs-1"
COLUMNS = (("validity", "left"), ("verdict", "left"), ("tok/s/GPU", "right"), ("top finding", "left"),
           ("path", "left"))


def runs_document(df: pl.DataFrame) -> dict[str, Any]:
    rows = [{k: v.isoformat() if hasattr(v, "isoformat") else v for k, v in row.items()}
            for row in df.iter_rows(named=True)]
    return {**envelope(RUNS_SCHEMA), "runs": rows}


def render_runs(df: pl.DataFrame, console: Console) -> None:
    """validity, verdict, best tok/s per working GPU, top finding (a failed run: its reason), path: aligned
    columns written as they are (no rich Table: a thousand rows must print in well under a second)."""
    rows = [(r["validity"] or "-", r["verdict"] or "-", number(r["tok_s_gpu_working"]),
             printable(r["error"] if r["status"] == "failed" else r["top_finding"] or "-", 60), printable(r["path"]))
            for r in df.iter_rows(named=True)]
    header = tuple(name for name, _ in COLUMNS)
    widths = [max(cell_len(row[k]) for row in (header, *rows)) for k in range(len(COLUMNS))]

    def line(row: tuple[str, ...]) -> str:
        cells = [_pad(cell, w, justify) for cell, w, (_, justify) in zip(row, widths, COLUMNS, strict=True)]
        return "  ".join(cells).rstrip()

    console.out(line(header), style="bold", highlight=False)
    if rows:
        console.out("\n".join(line(row) for row in rows), highlight=False)
    console.out(f"{number(df.height)} run{'s' if df.height != 1 else ''}", style="dim", highlight=False)


def _pad(cell: str, width: int, justify: str) -> str:
    fill = " " * (width - cell_len(cell))
    return fill + cell if justify == "right" else cell + fill


def index_summary(outcome: dict[str, Any], failed: list[tuple[str, str]]) -> str:
    """``19 runs in DIR: 1 analysed, 17 reused, 1 failed`` and a line per failed run."""
    lines = [f"{number(outcome['runs'])} runs in {outcome['into']}: {number(outcome['parsed'])} analysed, "
             f"{number(outcome['reused'])} reused, {number(outcome['failed'])} failed"]
    lines += [f"  failed {printable(path)}: {printable(reason)}" for path, reason in failed]
    return "\n".join(lines) + "\n"
