"""``diag runs``: the selected rows of an index's ``runs`` table as text (one line a run), a JSON document
(schema ``diag-runs-1``) or CSV; and the one-line summary of ``diag index``."""

from __future__ import annotations

from typing import Any

import polars as pl
from rich.console import Console
from rich.table import Table

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
    """validity, verdict, best tok/s per working GPU, top finding (a failed run: its reason), path."""
    table = Table(box=None, pad_edge=False, show_edge=False, header_style="bold")
    for name, justify in COLUMNS:
        table.add_column(name, justify=justify, no_wrap=name == "path")  # type: ignore[arg-type]
    for r in df.iter_rows(named=True):
        top = r["error"] if r["status"] == "failed" else r["top_finding"] or "-"
        table.add_row(r["validity"] or "-", r["verdict"] or "-", number(r["tok_s_gpu_working"]),
                      printable(top, 60), printable(r["path"]))
    console.print(table)
    console.print(f"{df.height} run{'s' if df.height != 1 else ''}", style="dim")


def index_summary(outcome: dict[str, Any], failed: list[tuple[str, str]]) -> str:
    """``19 runs in DIR: 1 analysed, 17 reused, 1 failed`` and a line per failed run."""
    lines = [f"{outcome['runs']} runs in {outcome['into']}: {outcome['parsed']} analysed, {outcome['reused']} "
             f"reused, {outcome['failed']} failed"]
    lines += [f"  failed {printable(path)}: {printable(reason)}" for path, reason in failed]
    return "\n".join(lines) + "\n"
