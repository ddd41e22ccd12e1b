"""What the plot screens of `diag watch` draw, computed from a :class:`Snapshot` without Textual.

Part of the headless core, beside :mod:`diag.tui.state`: the screens only hand each :class:`Chart` to a
plot widget, so what is plotted (series, threshold lines, findings' windows) is tested here, and its
cost is bounded: only the points inside the selected window are read (newest first, so a long ring
costs nothing extra), and a window with more points than the plot has columns is binned to the columns.

The x axis is minutes before the end of the window (the run's "now"), so every chart of a screen
shares one time axis.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime

from diag.rules.present import number

from .state import STEP_S, EndpointRow, Point, Snapshot

KV_SERIES_MAX = 8       # KV lines on one chart; past it the highest peaks stay and the rest become one
DEFAULT_COLUMNS = 200   # bins when the plot's width is not known yet

Agg = Callable[[Sequence[float]], float]


def _mean(v: Sequence[float]) -> float:
    return sum(v) / len(v)


@dataclass(frozen=True)
class Series:
    label: str
    xs: tuple[float, ...]   # minutes before the window's end (negative)
    ys: tuple[float, ...]
    color: str


@dataclass(frozen=True)
class Span:
    """A finding's window on the time axis (clipped to the plotted window)."""

    x0: float
    x1: float
    code: str
    severity: str


@dataclass(frozen=True)
class Chart:
    key: str                                    # rate | queues | kv | preempt
    title: str
    series: tuple[Series, ...]
    spans: tuple[Span, ...] = ()
    hlines: tuple[tuple[float, str], ...] = ()  # (y, label): the K001 threshold on the KV chart
    ymax: float | None = None                   # the top of the y axis (KV: 100), its last tick
    yticks: tuple[float, ...] = ()              # round values from 0 to ymax


def nice_step(span: float, n: int) -> float:
    """The round step (1, 2 or 5 × 10^k) that cuts ``span`` in about ``n`` parts (each tick's
    ``present.compact`` label is then its exact value)."""
    raw = span / max(1, n) if span > 0 else 1.0
    mag = 10 ** math.floor(math.log10(raw))
    return next(m * mag for m in (1, 2, 5, 10) if raw <= m * mag * (1 + 1e-9))


def ticks(lo: float, hi: float, n: int = 5) -> tuple[float, ...]:
    """Round ticks covering ``lo``..``hi`` (the first at or below ``lo``, the last at or above ``hi``)."""
    step = nice_step(hi - lo, n)
    first, last = math.floor(lo / step + 1e-9), math.ceil(hi / step - 1e-9)
    return tuple(round(i * step, 10) for i in range(first, max(last, first + 1) + 1))


def scaled(chart: Chart, top: float | None = None) -> Chart:
    """The chart with round y ticks from 0 to ``top`` (default: its highest point, or 1)."""
    if top is None:
        top = max((max(s.ys) for s in chart.series if s.ys), default=0.0) or 1.0
    yt = ticks(0.0, top)
    return replace(chart, ymax=yt[-1], yticks=yt)


@dataclass(frozen=True)
class PlotSet:
    title: str
    window_min: int
    end: datetime | None
    charts: tuple[Chart, ...]

    def chart(self, key: str) -> Chart:
        return next(c for c in self.charts if c.key == key)


PALETTE = ("cyan", "magenta", "green", "yellow", "blue", "red", "orange", "white")
ROLE_COLOR = {"prefill": "cyan", "decode": "magenta"}


def end_epoch(snap: Snapshot) -> float | None:
    if snap.now is not None:
        return snap.now.timestamp()
    last = [e.series[-1].t for e in snap.endpoints if e.series]
    return max(last) if last else None


def in_window(series: Sequence[Point], start: float, end: float) -> list[Point]:
    """The points with ``start < t <= end``, oldest first, read from the newest end only."""
    out: list[Point] = []
    for p in reversed(series):
        if p.t <= start:
            break
        if p.t <= end:
            out.append(p)
    out.reverse()
    return out


def _series(label: str, values: Iterable[tuple[float, float | None]], start: float, end: float, columns: int,
            agg: Agg, color: str) -> Series:
    """(t, value) pairs → a line in minutes before ``end``; more points than ``columns``: one per column."""
    pairs = [(t, v) for t, v in values if v is not None]
    span = end - start
    if len(pairs) > columns and span > 0:
        bins: dict[int, list[float]] = {}
        for t, v in pairs:
            bins.setdefault(min(columns - 1, int((t - start) / span * columns)), []).append(v)
        xs = tuple((start + (i + 0.5) * span / columns - end) / 60 for i in sorted(bins))
        return Series(label, xs, tuple(agg(bins[i]) for i in sorted(bins)), color)
    return Series(label, tuple((t - end) / 60 for t, _ in pairs), tuple(v for _, v in pairs), color)


def _summed(rows: Iterable[list[Point]], pick: Callable[[Point], float | None]) -> list[tuple[float, float | None]]:
    """Per 10 s slot, the sum over endpoints (slots are on one grid, so their times line up)."""
    total: dict[float, float] = {}
    for points in rows:
        for p in points:
            v = pick(p)
            if v is not None:
                total[p.t] = total.get(p.t, 0.0) + v
    return sorted(total.items())


def _spans(snap: Snapshot, endpoint: str | None, start: float, end: float) -> tuple[Span, ...]:
    out: dict[tuple[str, float, float], Span] = {}
    for fr in snap.findings:
        f = fr.f
        if f.first_ts is None or (endpoint is not None and f.endpoint != endpoint):
            continue
        lo = max(f.first_ts.timestamp(), start)
        hi = min((f.last_ts or f.first_ts).timestamp() + (STEP_S if f.open else 0), end)
        if hi < lo:
            continue
        x0, x1 = (lo - end) / 60, (max(hi, lo + STEP_S / 2) - end) / 60
        out.setdefault((f.code, x0, x1), Span(x0, x1, f.code, f.severity))
    return tuple(out.values())


def _kv_lines(named: list[tuple[str, list[tuple[float, float | None]]]], start: float, end: float,
              columns: int) -> tuple[Series, ...]:
    """One line per name up to KV_SERIES_MAX; past it the highest peaks and one 'max of the others'."""
    if len(named) > KV_SERIES_MAX:
        peak = {n: max((v for _, v in vals if v is not None), default=-1.0) for n, vals in named}
        named = sorted(named, key=lambda nv: -peak[nv[0]])
        keep, rest = named[: KV_SERIES_MAX - 1], named[KV_SERIES_MAX - 1:]
        top: dict[float, float] = {}
        for _, vals in rest:
            for t, v in vals:
                if v is not None:
                    top[t] = max(top.get(t, v), v)
        named = [*keep, (f"max of {len(rest)} others", sorted(top.items()))]
    return tuple(_series(n, vals, start, end, columns, max, PALETTE[i % len(PALETTE)])
                 for i, (n, vals) in enumerate(named))


def plot_set(snap: Snapshot, endpoint: str | None, window_min: int, columns: int = DEFAULT_COLUMNS) -> PlotSet:
    """The charts of the run screen (``endpoint`` None: every endpoint, per role) or of one endpoint."""
    end = end_epoch(snap)
    window_s = window_min * 60
    if end is None:
        return PlotSet("no samples yet", window_min, snap.now, ())
    start = end - window_s
    columns = max(8, columns)
    rows: list[EndpointRow] = list(snap.endpoints) if endpoint is None else \
        [r for r in snap.endpoints if r.id == endpoint]
    points = {r.id: in_window(r.series, start, end) for r in rows}
    spans = _spans(snap, endpoint, start, end)
    threshold = ((snap.kv_threshold, f"DIAG-K001 kv_usage {snap.kv_threshold:,g} %"),)
    lengths = snap.isl_osl

    def line(label: str, values: list[tuple[float, float | None]], agg: Agg, color: str) -> Series:
        return _series(label, values, start, end, columns, agg, color)

    if endpoint is None:
        roles = sorted({r.role for r in rows}, key=lambda r: (r != "prefill", r != "decode", r))
        of_role = {role: [points[r.id] for r in rows if r.role == role] for role in roles}
        rate = [line(f"{role} {rate_label(role != 'decode', lengths)}",
                     _summed(of_role[role], rate_pick(role != "decode", lengths)), _mean, ROLE_COLOR.get(role, "white"))
                for role in roles]
        queues = [line(f"{role} {what}", _summed(of_role[role], pick), _mean, color)
                  for role in roles
                  for what, pick, color in (("running", lambda p: p.running, ROLE_COLOR.get(role, "white")),
                                            ("waiting", lambda p: p.waiting, "yellow" if role == "prefill"
                                             else "red"))]
        kv = _kv_lines([(r.id, [(p.t, p.kv) for p in points[r.id]]) for r in rows], start, end, columns)
        preempt = [line(f"{role} preemptions", _summed(of_role[role], lambda p: p.preempt), sum,
                        ROLE_COLOR.get(role, "white")) for role in roles]
        title = f"run · {len(rows)} endpoints · last {window_min} min"
        kv_title = "KV % per endpoint (engines' mean)"
    else:
        if not rows:
            return PlotSet(f"{endpoint}: no longer in the run", window_min, snap.now, ())
        row, pts = rows[0], points[endpoint]
        rate = [line(rate_label(prompt, lengths), [(p.t, rate_pick(prompt, lengths)(p)) for p in pts], _mean, color)
                for prompt, color in ((True, "cyan"), (False, "magenta"))]
        queues = [line("running", [(p.t, p.running) for p in pts], _mean, "green"),
                  line("waiting", [(p.t, p.waiting) for p in pts], _mean, "red")]
        names = row.engine_names
        kv = _kv_lines([(f"engine {e}", [(p.t, p.engine_kv[i] if i < len(p.engine_kv) else None) for p in pts])
                        for i, e in enumerate(names)], start, end, columns)
        preempt = [line("preemptions", [(p.t, float(p.preempt)) for p in pts], sum, "red")]
        title = f"{endpoint} · {row.role} · {len(names)} engines · last {window_min} min"
        kv_title = "KV % per engine"
    unit = "req/s" if all(lengths) else "tok/s"
    rate_title = (f"prefill vs decode {unit}" if endpoint is None else f"prompt vs gen {unit}")
    return PlotSet(title + " · x: minutes before now", window_min, snap.now, (
        scaled(Chart("rate", rate_title, tuple(rate), spans)),
        scaled(Chart("queues", "running / waiting" + (" per role" if endpoint is None else ""), tuple(queues), spans)),
        scaled(Chart("kv", kv_title, kv, spans, threshold), 100.0),
        scaled(Chart("preempt", f"preemptions per {STEP_S} s", tuple(preempt), spans)),
    ))


def rate_pick(prompt: bool, lengths: tuple[int | None, int | None]) -> Callable[[Point], float | None]:
    """A point's prompt (or generation) rate in requests/s: tok/s over the benchmark's ISL (OSL), so
    prefill's and decode's rates compare (a closed loop matches them); tok/s when the lengths are unknown."""
    length = lengths[0] if prompt else lengths[1]
    div = float(length) if lengths[0] and lengths[1] and length else 1.0

    def pick(p: Point) -> float | None:
        v = p.prompt if prompt else p.gen
        return None if v is None else v / div

    return pick


def rate_label(prompt: bool, lengths: tuple[int | None, int | None]) -> str:
    if not all(lengths):
        return "prompt tok/s" if prompt else "gen tok/s"
    return f"prompt/ISL {number(lengths[0])}" if prompt else f"gen/OSL {number(lengths[1])}"
