"""Pure renderers over a :class:`Snapshot` (rich only): the TUI's cells and ``--once`` output.

The widgets and ``diag watch --once`` draw the same cells from the same functions, so the printed
snapshot and the screen agree.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from datetime import datetime
from typing import Any

from rich.cells import cell_len, set_cell_size
from rich.console import Console, Group
from rich.table import Table
from rich.text import Text

from diag.rules.catalog import HEALTH_STATES
from diag.rules.present import HEALTH_STYLE, SEVERITY_STYLE, duration, number, seconds

from ..report import EndpointSummary, link_lines, stage_text
from .columns import COLUMN, COLUMNS, SPARK_W, blank_columns, empty_columns, verdict_columns
from .plotdata import end_epoch
from .records import RecordLine
from .state import STEP_S, EndpointRow, EngineRow, FindingRow, Limit, Point, Snapshot, TableCells, by_code

BLOCKS = "▁▂▃▄▅▆▇█"
EIGHTHS = " ▏▎▍▌▋▊▉█"
TONE_STYLE = {"fault": "bold red", "warn": "yellow", "info": "cyan", "stats": "dim"}

MIN_CUT = 8  # cells of a part (with its ellipsis) a one-line text shows rather than leave it out


def fit_parts(parts: Sequence[str], width: int, sep: str = "  ·  ") -> str:
    """``parts`` joined by ``sep`` on one line of ``width`` cells: whole parts in order while they fit; the
    first that does not is cut with an ellipsis when MIN_CUT cells of it show, else left out. The line
    never wraps, never ends in a separator and never cuts a part without saying so."""
    line = ""
    for part in parts:
        joined = line + sep + part if line else part
        if cell_len(joined) <= width:
            line = joined
            continue
        room = width - cell_len(line + sep if line else "")
        if room >= MIN_CUT:
            line = (line + sep if line else "") + set_cell_size(part, room - 1).rstrip() + "…"
        break
    return line


def figures_window(snap: Snapshot) -> str | None:
    """The window the endpoints' figures are taken over (``C=2,048 steady``), None before there is one."""
    return next((e.s.window["label"] for e in snap.endpoints if e.s.window), None)


def age_text(s: float | None) -> str:
    return duration(s, coarse=True)


def window_slots(points: Sequence[Point], end: float, window_s: int) -> list[Point | None]:
    """The point of each 10 s slot of the window ending at ``end`` (None where none), read from the
    newest end only; one pass serves every value a row shows of it."""
    n = max(1, window_s // STEP_S)
    start = end - n * STEP_S
    out: list[Point | None] = [None] * n
    for p in reversed(points):
        t = p[0]
        if t <= start:
            break
        i = int((t - start - 1e-6) // STEP_S)
        if i < n:
            out[i] = p
    return out


def window_values(points: Sequence[Point], end: float, window_s: int, pick: Callable[[Point], float | None]
                  ) -> list[float | None]:
    """One value per 10 s slot of the window ending at ``end`` (None where no point)."""
    return [None if p is None else pick(p) for p in window_slots(points, end, window_s)]


def bins(values: Sequence[float | None], width: int) -> list[float | None]:
    """``values`` in ``width`` bins, each the mean of its samples (a drop shows, a lone peak does not
    hide it); fewer values than cells stay as they are."""
    if len(values) <= width:
        return list(values)
    per = len(values) / width
    out: list[float | None] = []
    for i in range(width):
        chunk = [v for v in values[int(i * per): int((i + 1) * per)] if v is not None]
        out.append(sum(chunk) / len(chunk) if chunk else None)
    return out


def spark(values: Sequence[float | None], width: int = SPARK_W, top: float | None = None) -> str:
    """Unicode sparkline on the scale 0..``top`` (None: the values' own maximum), so rows that share a
    ``top`` compare by height; gaps (no sample) are blanks."""
    values = bins(values, width)
    if top is None:
        top = max((v for v in values if v is not None), default=None)
    if top is None or all(v is None for v in values):
        return " " * width
    chars = [" " if v is None else BLOCKS[0 if top <= 0 else max(0, min(7, round(v / top * 7)))] for v in values]
    return "".join(chars).rjust(width)


def over(value: float | None, limit: Limit | None) -> str:
    """The style of a value at or past a rule's threshold (the rule's severity), else none."""
    if value is None or limit is None or value < limit.value:
        return ""
    return SEVERITY_STYLE.get(limit.severity, "bold")


def kv_bar(pct: float | None, limits: Mapping[str, Limit], width: int = 5) -> Text:
    """KV % and a bar on 0-100 %, in the style of the highest KV rule it reaches (K001, then K004)."""
    if pct is None:
        return Text("-")
    cells = max(0.0, min(100.0, pct)) / 100 * width
    full = int(cells)
    bar = "█" * full + (EIGHTHS[int((cells - full) * 8)] if full < width else "")
    style = over(pct, limits.get("kv")) or over(pct, limits.get("kv_rising"))
    t = Text(f"{pct:4,.1f} ", style=style)
    t.append(bar.ljust(width, "·"), style=style or "green")
    return t


def badge(health: str) -> Text:
    return Text(health, style=HEALTH_STYLE.get(health, ""))


def health_cell(s: EndpointSummary) -> Text:
    """The health badge; while the endpoint starts, its stage badge (the stage under way with its progress
    and time so far); READY (start-up finished, no load yet) with the time it took to get ready."""
    if s.startup.get("phase") == "starting":
        return Text(stage_text(s.startup), style="cyan")
    if s.health == "READY":
        return Text(stage_text(s.startup), style=HEALTH_STYLE["READY"])
    return badge(s.health)


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


def row_slots(snap: Snapshot, window_min: int) -> dict[str, list[Point | None]]:
    """Each endpoint's 10 s slots of the window (one pass over each ring serves every cell and scale)."""
    end = end_epoch(snap)
    return {} if end is None else {e.id: window_slots(e.series, end, window_min * 60) for e in snap.endpoints}


def tps_scale(slots: Mapping[str, Sequence[Point | None]]) -> float | None:
    """The tok/s sparklines' shared top: the highest slot of any endpoint in the window."""
    return max((v for ps in slots.values() for p in ps if p is not None and (v := _tps(p)) is not None), default=None)


def per_engine(total: float | None, engines: int) -> float | None:
    return None if total is None else total / max(1, engines)


def latency_text(s: EndpointSummary, metric: str) -> str:
    """A latency histogram's p90 of the last interval (``ttft``, ``itl``), ``-`` without one."""
    p90 = s.latency.get(metric, {}).get("p90")
    return "-" if p90 is None else f"{seconds(p90)} s"


def endpoint_cells(row: EndpointRow, snap: Snapshot, window_min: int, prefix: str = "",
                   slots: Sequence[Point | None] | None = None, top: float | None = None) -> dict[str, Any]:
    """The row's cells: tok/s sparklines on ``top`` (shared by every row), KV ones on 0-100 %; wait, KV
    and preemptions styled past their rule's threshold (``snap.limits``)."""
    s = row.s
    if slots is None:
        slots = row_slots(snap, window_min).get(row.id)
        top = tps_scale({row.id: slots}) if slots is not None else None
    tps = kv = " " * SPARK_W
    if slots is not None:
        tps = spark([None if p is None else _tps(p) for p in slots], top=top)
        kv = spark([None if p is None else p[3] for p in slots], top=100.0)
    lim = snap.limits
    return {"endpoint": Text(s.id, style="bold reverse yellow" if s.limiting else "bold"), "health": health_cell(s),
            "role": Text(s.role, style="bold yellow") if s.limiting else s.role,
            "prompt": number(s.prompt_tps_mean), "gen": number(s.gen_tps_mean), "run": number(s.running_mean),
            "wait": Text(number(s.waiting_mean), style=over(per_engine(s.waiting_mean, s.engines), lim.get("wait")),
                         justify="right"),
            "kv": kv_bar(s.kv_mean, lim), "tps_spark": Text(tps, style="cyan"),
            "kv_spark": Text(kv, style="magenta"), "ttft": latency_text(s, "ttft"), "itl": latency_text(s, "itl"),
            "age": age_text(row.age_s),
            "pre": Text(number(s.preemptions), style=over(s.preemptions, lim.get("pre")), justify="right"),
            "eng": str(s.engines), "nodes": short_nodes(s.nodes, prefix)}


def all_cells(snap: Snapshot, window_min: int) -> dict[str, dict[str, Any]]:
    """Every endpoint's cells, the tok/s sparklines on one scale."""
    prefix = node_prefix(snap)
    slots = row_slots(snap, window_min)
    top = tps_scale(slots)
    return {e.id: endpoint_cells(e, snap, window_min, prefix, slots.get(e.id), top) for e in snap.endpoints}


def table_cells(snap: Snapshot, window_min: int) -> TableCells:
    """The endpoint table's cells of a snapshot: the collecting thread makes them (:func:`with_table`),
    so a frame on the UI thread only compares and shows them (the sparklines' pass over each ring's
    window is most of a frame's own work)."""
    return TableCells(window_min, {eid: {k: v if isinstance(v, Text) else Text(v, justify=COLUMN[k].justify)  # type: ignore[arg-type]
                                         for k, v in cells.items()}
                                   for eid, cells in all_cells(snap, window_min).items()})


def with_table(snap: Snapshot, window_min: int) -> Snapshot:
    return replace(snap, table=table_cells(snap, window_min))


def shown_cells(snap: Snapshot, window_min: int) -> TableCells:
    """The snapshot's prepared cells when made for this window, else made now (a window just changed)."""
    return snap.table if snap.table is not None and snap.table.window == window_min else table_cells(snap, window_min)


HEALTH_RANK = {h: i for i, h in enumerate(reversed(HEALTH_STATES))}  # OK 0 … DOWN worst


def _natural(eid: str) -> tuple[str, int, str]:
    head, _, tail = eid.rpartition("-w")
    return (head, int(tail), "") if tail.isdigit() else (eid, -1, eid)


def sort_value(row: EndpointRow, key: str, snap: Snapshot, window_min: int) -> Any:
    """What the endpoint table sorts by for a column (None: no value, always last)."""
    s = row.s
    if key in ("tps_spark", "kv_spark"):
        end = end_epoch(snap)
        if end is None:
            return None
        vals = [v for v in window_values(row.series, end, window_min * 60, _tps if key == "tps_spark"
                                         else lambda p: p[3]) if v is not None]
        if not vals:
            return None
        return sum(vals) / len(vals) if key == "tps_spark" else max(vals)
    return {"endpoint": _natural(s.id), "health": HEALTH_RANK.get(s.health, 0), "role": s.role,
            "prompt": s.prompt_tps_mean, "gen": s.gen_tps_mean, "run": s.running_mean, "wait": s.waiting_mean,
            "kv": s.kv_mean, "age": row.age_s, "pre": s.preemptions, "eng": s.engines,
            "ttft": s.latency.get("ttft", {}).get("p90"), "itl": s.latency.get("itl", {}).get("p90"),
            "nodes": ",".join(s.nodes)}[key]


def sort_rows(rows: Sequence[EndpointRow], key: str | None, descending: bool, snap: Snapshot,
              window_min: int) -> list[EndpointRow]:
    """Rows sorted by a column; ties (and no sort) keep the run's order, rows without a value go last."""
    if key is None:
        return list(rows)
    valued = [(sort_value(r, key, snap, window_min), i, r) for i, r in enumerate(rows)]
    present = sorted((v for v in valued if v[0] is not None), key=lambda v: v[1])
    present.sort(key=lambda v: v[0], reverse=descending)
    return [r for _, _, r in present] + [r for v, _, r in valued if v is None]


def engine_cells(r: EngineRow, limits: Mapping[str, Limit]) -> tuple[Any, ...]:
    name = Text(r.engine) if not r.dead else Text(f"{r.engine} dead" + (f" {r.dead_at:%H:%M:%S}" if r.dead_at else ""),
                                                  style=HEALTH_STYLE["DOWN"])
    f = r.figures
    return (name, number(f.samples), number(f.prompt_tps, 1), number(f.gen_tps, 1), number(f.running, 1),
            Text(number(f.waiting, 1), style=over(f.waiting, limits.get("wait")), justify="right"),
            kv_bar(f.kv, limits), Text(number(f.preemptions), style=over(f.preemptions, limits.get("pre")), justify="right"),
            age_text(r.age_s))


ENGINE_COLUMNS = ("engine", "samples", "prompt t/s", "gen t/s", "run", "wait", "KV %", "preempt", "age")


def _val(v: Any, n: int = 60) -> str:
    if isinstance(v, float):
        s = f"{v:,.4g}" if abs(v) < 1e4 else f"{v:,.0f}"
    elif isinstance(v, int) and not isinstance(v, bool):
        s = number(v)
    elif isinstance(v, dict):
        s = ",".join(f"{k}={_val(x, 20)}" for k, x in list(v.items())[:6])
    elif isinstance(v, (list, tuple)):
        s = ",".join(_val(x, 20) for x in v[:6])
    else:
        s = str(v)
    s = s.replace("\n", " ")
    return s if len(s) <= n else s[: n - 1] + "…"


def _evidence_item(k: str, v: Any) -> str:
    """Durations (keys in seconds, ``window_s``) in human units like every age on screen."""
    if k.endswith("_s") and isinstance(v, (int, float)) and not isinstance(v, bool):
        return f"{k[:-2]} {duration(coarse=True, s=v)}"
    return f"{k} {_val(v)}"


def evidence_text(ev: dict[str, Any], limit: int = 8) -> str:
    return " · ".join(_evidence_item(k, v) for k, v in list(ev.items())[:limit])


def _hm(t: datetime | None) -> str:
    return t.strftime("%H:%M:%S") if t else "?"


def finding_text(fr: FindingRow) -> Text:
    f = fr.f
    t = Text()
    t.append("● open   " if fr.state == "open" else "○ closed ", style="bold" if fr.state == "open" else "dim")
    t.append(f"{f.severity:<7} ", style=SEVERITY_STYLE.get(f.severity, ""))
    t.append(f.code, style="bold")
    t.append(f" {f.name}")
    t.append(f" [{f.endpoint or 'run'}]", style="bold")
    t.append(f"\n  {f.message}")
    where = []
    if f.first_ts:
        span = f" ({duration(coarse=True, s=(f.last_ts - f.first_ts).total_seconds())})" if f.last_ts else ""
        where.append(f"{_hm(f.first_ts)}–{_hm(f.last_ts)}{span}")
    if f.location:
        where.append(f"at {f.location}")
    if where:
        t.append("\n  " + " · ".join(where), style="dim")
    for line in link_lines(f):
        t.append(f"\n  {line}", style="bold magenta")
    for line in consequence_lines(fr):
        t.append(f"\n  {line}", style="bold magenta")
    if f.evidence:
        t.append("\n  evidence: " + evidence_text(f.evidence), style="dim")
    return t


def consequence_lines(fr: FindingRow) -> list[str]:
    """The findings folded under this one (its likely consequences on other endpoints), one line a code."""
    return [f"↳ caused {len(fs)} × {code} {fs[0].name} ({fs[0].severity}) on "
            + ", ".join(sorted({c.endpoint or "run" for c in fs}))
            for code, fs in by_code(fr.consequences).items()]


def finding_clip(fr: FindingRow) -> str:
    """A finding as plain text for an issue: code, message, window, evidence, location, fix."""
    f = fr.f
    lines = [f"{f.code} {f.name} ({f.severity}, {fr.state}) [{f.endpoint or 'whole run'}]", f.message]
    if f.first_ts:
        span = f" ({duration(coarse=True, s=(f.last_ts - f.first_ts).total_seconds())})" if f.last_ts else ""
        lines.append(f"window: {f.first_ts:%Y-%m-%d %H:%M:%S}–{_hm(f.last_ts)}{span}")
    if f.evidence:
        lines.append("evidence: " + ", ".join(f"{k}={v}" for k, v in f.evidence.items()))
    if f.location:
        lines.append(f"location: {f.location}")
    if f.fix:
        lines.append(f"fix: {f.fix}")
    lines += consequence_lines(fr)
    return "\n".join(lines)


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
    widest = max((len(r.id) for r in snap.endpoints), default=8)
    every = all_cells(snap, window_min)
    # the endpoint name is never cut; on a narrow terminal the columns the name already implies go first, and
    # those without information (but the verdict's evidence), as the screen's table gives them way
    narrow = console.width < 120
    drop = {"role", "nodes", "eng", "ttft", "itl"} if narrow else set()
    drop |= empty_columns(snap)
    if narrow:
        cells = {eid: {k: v if isinstance(v, Text) else Text(v) for k, v in row.items()} for eid, row in every.items()}
        drop |= {k for k in blank_columns(cells) - verdict_columns(snap.verdict) if COLUMN[k].priority}
    cols = [c for c in COLUMNS if c.key not in drop]
    for c in cols:
        t.add_column(c.label, justify=c.justify, no_wrap=True,  # type: ignore[arg-type]
                     min_width=widest if c.key == "endpoint" else None)
    for row in snap.endpoints:
        cells = every[row.id]
        t.add_row(*(cells[c.key] for c in cols))
    console.print(t if snap.endpoints else Text("no endpoints found in the logs read", style="yellow"))
    n_open = sum(fr.state == "open" for fr in snap.findings)
    console.print(Text(f"findings: {number(n_open)} open, {number(len(snap.findings) - n_open)} closed", style="bold"))
    console.print(Group(*(finding_text(fr) for fr in snap.findings)) if snap.findings else Text("no findings"))
    for e in snap.errors:
        console.print(Text(e, style="red"))
