"""Pure renderers over a :class:`Snapshot` (rich only): the TUI's cells and ``--once`` output.

The widgets and ``diag watch --once`` draw the same cells from the same functions, so the printed
snapshot and the screen agree.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

from rich.console import Console, Group
from rich.table import Table
from rich.text import Text

from ..emit import HEALTH_STYLE, SEV_STYLE
from ..report import link_lines
from .records import RecordLine
from .state import STEP_S, EndpointRow, EngineRow, FindingRow, Point, Snapshot

BLOCKS = "▁▂▃▄▅▆▇█"
EIGHTHS = " ▏▎▍▌▋▊▉█"
SPARK_W = 10
TONE_STYLE = {"fault": "bold red", "warn": "yellow", "info": "cyan", "stats": "dim"}

# (key, label, justify): most useful first, so an 80-column terminal sees them without scrolling
COLUMNS: tuple[tuple[str, str, str], ...] = (
    ("endpoint", "endpoint", "left"), ("health", "health", "left"), ("role", "role", "left"),
    ("prompt", "prompt/s", "right"), ("gen", "gen/s", "right"), ("run", "run", "right"),
    ("wait", "wait", "right"), ("kv", "KV %", "left"), ("tps_spark", "tok/s ~", "left"),
    ("kv_spark", "KV ~", "left"), ("age", "age", "right"), ("pre", "pre", "right"),
    ("eng", "eng", "right"), ("nodes", "nodes", "left"),
)


def num(x: float | int | None, nd: int = 0) -> str:
    return "-" if x is None else f"{x:,.{nd}f}"


def age_text(s: float | None) -> str:
    if s is None:
        return "-"
    if s < 120:
        return f"{s:.0f}s"
    if s < 7200:
        return f"{s / 60:.0f}m"
    return f"{s / 3600:.0f}h"


def window_values(points: Sequence[Point], end: float, window_s: int, pick: Callable[[Point], float | None]
                  ) -> list[float | None]:
    """One value per 10 s slot of the window ending at ``end`` (None where no point)."""
    n = max(1, window_s // STEP_S)
    start = end - n * STEP_S
    out: list[float | None] = [None] * n
    for p in reversed(points):
        if p[0] <= start:
            break
        i = int((p[0] - start - 1e-6) // STEP_S)
        if 0 <= i < n:
            out[i] = pick(p)
    return out


def spark(values: Sequence[float | None], width: int = SPARK_W) -> str:
    """Unicode sparkline; gaps (no sample) are blanks, a window of more slots than cells takes maxima."""
    if len(values) > width:
        per = len(values) / width
        bins: list[float | None] = []
        for i in range(width):
            chunk = [v for v in values[int(i * per): int((i + 1) * per)] if v is not None]
            bins.append(max(chunk) if chunk else None)
        values = bins
    top = max((v for v in values if v is not None), default=None)
    if top is None:
        return " " * width
    chars = [" " if v is None else BLOCKS[0 if top <= 0 else min(7, round(v / top * 7))] for v in values]
    return "".join(chars).rjust(width)


def kv_bar(pct: float | None, width: int = 5) -> Text:
    if pct is None:
        return Text("-")
    cells = max(0.0, min(100.0, pct)) / 100 * width
    full = int(cells)
    bar = "█" * full + (EIGHTHS[int((cells - full) * 8)] if full < width else "")
    style = "red" if pct >= 90 else "yellow" if pct >= 75 else "green"
    t = Text(f"{pct:4.1f} ")
    t.append(bar.ljust(width, "·"), style=style)
    return t


def badge(health: str) -> Text:
    return Text(health, style=HEALTH_STYLE.get(health, ""))


def _end_epoch(snap: Snapshot) -> float | None:
    if snap.now is not None:
        return snap.now.timestamp()
    last = [e.series[-1][0] for e in snap.endpoints if e.series]
    return max(last) if last else None


def _tps(p: Point) -> float | None:
    return None if p[1] is None and p[2] is None else (p[1] or 0.0) + (p[2] or 0.0)


def short_nodes(nodes: Sequence[str], prefix: str) -> str:
    return ",".join(n[len(prefix):] if prefix and n.startswith(prefix) else n for n in nodes) or "-"


def node_prefix(snap: Snapshot) -> str:
    """The common prefix of all node names, cut at a separator (``gb200-r03-n12`` → ``gb200-r03-``)."""
    names = [n for e in snap.endpoints for n in e.s.nodes]
    if len(names) < 2:
        return ""
    pre = min(names)
    last = max(names)
    n = next((i for i, (a, b) in enumerate(zip(pre, last, strict=False)) if a != b), min(len(pre), len(last)))
    pre = pre[:n]
    cut = max(pre.rfind("-"), pre.rfind("_"), pre.rfind("."))
    return pre[: cut + 1] if cut >= 0 else ""


def endpoint_cells(row: EndpointRow, snap: Snapshot, window_min: int, prefix: str = "") -> dict[str, Any]:
    s = row.s
    end = _end_epoch(snap)
    tps = kv = " " * SPARK_W
    if end is not None:
        tps = spark(window_values(row.series, end, window_min * 60, _tps))
        kv = spark(window_values(row.series, end, window_min * 60, lambda p: p[3]))
    return {"endpoint": Text(s.id, style="bold"), "health": badge(s.health), "role": s.role,
            "prompt": num(s.prompt_tps_last), "gen": num(s.gen_tps_last), "run": num(s.running_last),
            "wait": num(s.waiting_last), "kv": kv_bar(s.kv_last), "tps_spark": Text(tps, style="cyan"),
            "kv_spark": Text(kv, style="magenta"), "age": age_text(row.age_s), "pre": str(s.preemptions),
            "eng": str(s.engines), "nodes": short_nodes(s.nodes, prefix)}


def engine_cells(r: EngineRow) -> tuple[Any, ...]:
    return (r.engine, str(r.samples), num(r.prompt_tps, 1), num(r.gen_tps, 1), num(r.running), num(r.waiting),
            kv_bar(r.kv), str(r.preemptions), age_text(r.age_s))


ENGINE_COLUMNS = ("engine", "samples", "prompt t/s", "gen t/s", "run", "wait", "KV %", "preempt", "age")


def _val(v: Any, n: int = 60) -> str:
    if isinstance(v, float):
        s = f"{v:,.4g}" if abs(v) < 1e4 else f"{v:,.0f}"
    elif isinstance(v, dict):
        s = ",".join(f"{k}={_val(x, 20)}" for k, x in list(v.items())[:6])
    elif isinstance(v, (list, tuple)):
        s = ",".join(_val(x, 20) for x in v[:6])
    else:
        s = str(v)
    s = s.replace("\n", " ")
    return s if len(s) <= n else s[: n - 1] + "…"


def evidence_text(ev: dict[str, Any], limit: int = 8) -> str:
    return " · ".join(f"{k} {_val(v)}" for k, v in list(ev.items())[:limit])


def _hm(t: datetime | None) -> str:
    return t.strftime("%H:%M:%S") if t else "?"


def finding_text(fr: FindingRow) -> Text:
    f = fr.f
    t = Text()
    t.append("● open   " if fr.state == "open" else "○ closed ", style="bold" if fr.state == "open" else "dim")
    t.append(f"{f.severity:<7} ", style=SEV_STYLE.get(f.severity, ""))
    t.append(f.code, style="bold")
    t.append(f" {f.name}")
    t.append(f" [{f.endpoint or 'run'}]", style="bold")
    t.append(f"\n  {f.message}")
    where = []
    if f.first_ts:
        where.append(f"{_hm(f.first_ts)}–{_hm(f.last_ts)}")
    if f.location:
        where.append(f"at {f.location}")
    if where:
        t.append("\n  " + " · ".join(where), style="dim")
    for line in link_lines(f):
        t.append(f"\n  {line}", style="bold magenta")
    if f.evidence:
        t.append("\n  evidence: " + evidence_text(f.evidence), style="dim")
    return t


def record_text(r: RecordLine, with_endpoint: bool = False) -> Text:
    t = Text(r.ts.strftime("%m-%d %H:%M:%S") if r.ts else "-" * 14, style="dim")
    if with_endpoint:
        t.append(f" {r.endpoint:<11}", style="bold")
    t.append(f" {r.kind:<9} ", style=TONE_STYLE.get(r.tone, ""))
    t.append(r.text, style="bold red" if r.tone == "fault" else "")
    t.append(f"  {os.path.basename(r.file)}:{r.line}", style="dim")
    return t


HEADER_DROP = ("bench", "build", "model", "topology")  # what a narrow header leaves out first


def header_text(snap: Snapshot, width: int = 0, max_lines: int = 0) -> Text:
    """``key value`` pairs packed into lines of ``width``; past ``max_lines`` the least useful go."""
    items = list(snap.header)

    def pack(items: list[tuple[str, str]]) -> list[list[tuple[str, str]]]:
        """First fit: each pair goes on the first line with room for it."""
        lines: list[list[tuple[str, str]]] = []
        used: list[int] = []
        for k, v in items:
            n = len(k) + 1 + len(v)
            i = next((i for i, u in enumerate(used) if not width or u + 2 + n <= width), None)
            if i is None:
                lines.append([])
                used.append(-2)
                i = len(lines) - 1
            lines[i].append((k, v))
            used[i] += 2 + n
        return lines or [[]]

    lines = pack(items)
    for drop in HEADER_DROP:
        if not (width and max_lines) or len(lines) <= max_lines:
            break
        items = [(k, v) for k, v in items if k != drop]
        lines = pack(items)
    t = Text(no_wrap=bool(width), overflow="ellipsis")
    for i, line in enumerate(lines):
        if i:
            t.append("\n")
        for j, (k, v) in enumerate(line):
            t.append(("  " if j else "") + f"{k} ", style="dim")
            t.append(v, style="bold")
    return t


def render_once(snap: Snapshot, console: Console, window_min: int = 5) -> None:
    """``diag watch --once``: the main screen's panels as plain rich output."""
    head = Table.grid(padding=(0, 2))
    head.add_column(style="dim")
    head.add_column(style="bold")
    for k, v in snap.header:
        head.add_row(k, v)
    console.print(head)
    t = Table(title=f"endpoints (sparklines: last {window_min} min)", title_justify="left", pad_edge=False)
    prefix = node_prefix(snap)
    widest = max((len(r.id) for r in snap.endpoints), default=8)
    # the endpoint name is never cut; on a narrow terminal the columns the name already implies go first
    drop = {"role", "nodes", "eng"} if console.width < 120 else set()
    cols = [c for c in COLUMNS if c[0] not in drop]
    for key, label, just in cols:
        t.add_column(label, justify=just, no_wrap=True,  # type: ignore[arg-type]
                     min_width=widest if key == "endpoint" else None)
    for row in snap.endpoints:
        cells = endpoint_cells(row, snap, window_min, prefix)
        t.add_row(*(cells[k] for k, _, _ in cols))
    console.print(t if snap.endpoints else Text("no endpoints found in the logs read", style="yellow"))
    n_open = sum(fr.state == "open" for fr in snap.findings)
    console.print(Text(f"findings: {n_open} open, {len(snap.findings) - n_open} closed", style="bold"))
    console.print(Group(*(finding_text(fr) for fr in snap.findings)) if snap.findings else Text("no findings"))
    for e in snap.errors:
        console.print(Text(e, style="red"))
