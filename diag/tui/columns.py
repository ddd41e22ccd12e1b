"""The endpoint table's columns in `diag watch`: what each shows, its priority, and which fit a terminal's
width (the screen's table and ``--once`` alike), by priority and by what the run's columns carry."""

from __future__ import annotations

from collections.abc import Mapping
from typing import NamedTuple

from rich.text import Text

from diag.rules.present import VERDICT_FIGURES, informative

from .state import Snapshot

SPARK_W = 10


class Column(NamedTuple):
    """A column of the endpoint table: ``priority`` 0 always stays; on a narrow terminal the highest
    numbers give way first. ``sort`` is the k9s-style key (shift + letter) that sorts by it; ``doc`` what
    it shows (the help lists it)."""

    key: str
    label: str
    justify: str
    priority: int
    min_width: int
    sort: str
    descending: bool  # the first press sorts worst / largest first
    doc: str


WINDOW_MEAN = "mean over the figures' window"
# in display order; endpoint, health, the roles' throughputs and KV % always stay
COLUMNS: tuple[Column, ...] = (
    Column("endpoint", "endpoint", "left", 0, 10, "N", False, "role and worker; the limiting side's stand out"),
    Column("health", "health", "left", 0, 8, "H", True, "the badge below; while starting, the stage under way"),
    Column("role", "role", "left", 8, 7, "O", False, "prefill, decode or agg"),
    Column("prompt", "prompt/s", "right", 0, 8, "P", True, f"prompt tok/s, {WINDOW_MEAN}, engines summed"),
    Column("gen", "gen/s", "right", 0, 7, "G", True, f"generated tok/s, {WINDOW_MEAN}, engines summed"),
    Column("run", "run", "right", 2, 4, "R", True, f"running requests, {WINDOW_MEAN}, engines summed"),
    Column("wait", "wait", "right", 1, 4, "W", True, f"waiting requests, {WINDOW_MEAN}, engines summed"),
    Column("kv", "KV %", "left", 0, 10, "K", True, f"KV-cache usage, {WINDOW_MEAN}, engines averaged"),
    Column("tps_spark", "tok/s ~", "left", 4, SPARK_W, "T", True,
           "tok/s over the last 1-60 min (the window keys), one scale for every row"),
    Column("kv_spark", "KV ~", "left", 5, SPARK_W, "V", True, "KV % over the last 1-60 min, on 0-100 %"),
    Column("ttft", "TTFT p90", "right", 10, 8, "F", True, "TTFT p90 of the last interval (latency histograms)"),
    Column("itl", "ITL p90", "right", 11, 8, "I", True, "ITL p90 of the last interval (latency histograms)"),
    Column("age", "age", "right", 3, 4, "A", True, "time since the endpoint's last sample (12s, 4m, 3h, 9d)"),
    Column("pre", "pre", "right", 6, 3, "X", True, "preemptions over the whole run"),
    Column("eng", "eng", "right", 7, 3, "E", True, "engines (DP ranks)"),
    Column("nodes", "nodes", "left", 9, 5, "D", False, "nodes, their common prefix left out"),
)
COLUMN = {c.key: c for c in COLUMNS}
CELL_PAD = 2  # a DataTable cell's padding, both sides


OPTIONAL = ("ttft", "itl")  # columns shown only when some endpoint has a value (Prometheus histograms)


# the column of each endpoint figure a verdict rests on (present.VERDICT_FIGURES)
FIGURE_COLUMN = {"waiting": "wait", "kv": "kv", "running": "run", "preemptions": "pre", "prompt_tps": "prompt",
                 "gen_tps": "gen", "last_seen": "age"}


def verdict_columns(verdict: str | None) -> frozenset[str]:
    """The columns showing the figures ``verdict`` (a class) rests on."""
    return frozenset(FIGURE_COLUMN[f] for f in VERDICT_FIGURES.get(verdict or "", ()) if f in FIGURE_COLUMN)


def fit_columns(widths: dict[str, int], available: int, empty: frozenset[str] = frozenset(),
                blank: frozenset[str] = frozenset(), evidence: frozenset[str] = frozenset()) -> list[str]:
    """The columns that fit in ``available`` cells: every priority-0 column, then the others in
    priority order until the next one does not fit (each at least its minimum width); display order.
    ``empty``: optional columns without a value in any row, left out; ``evidence``: the columns the verdict
    rests on, first; ``blank``: columns whose cells carry no information (all ``-`` or zero), after every
    column that does (unless evidence)."""
    need = {c.key: max(c.min_width, widths.get(c.key, 0)) + CELL_PAD for c in COLUMNS}
    chosen = {c.key for c in COLUMNS if c.priority == 0}
    used = sum(need[k] for k in chosen)
    for c in sorted((c for c in COLUMNS if c.priority and c.key not in empty),
                    key=lambda c: (c.key in blank - evidence, c.key not in evidence, c.priority)):
        if used + need[c.key] > available:
            break
        chosen.add(c.key)
        used += need[c.key]
    return [c.key for c in COLUMNS if c.key in chosen]


def empty_columns(snap: Snapshot) -> frozenset[str]:
    """The optional columns no endpoint has a value for."""
    return frozenset(k for k in OPTIONAL if not any(e.s.latency.get(k) for e in snap.endpoints))


def blank_columns(cells: Mapping[str, Mapping[str, Text]]) -> frozenset[str]:
    """The columns whose cells, in every row shown, carry no information (``-``, zeros, an empty sparkline)."""
    return frozenset(c.key for c in COLUMNS if not informative(row[c.key].plain for row in cells.values()))
