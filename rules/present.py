"""How diag writes a figure, a duration, a time and a severity, once for every output: finding
messages (rules), the terminal text, the TUI and the HTML report. No other module formats a number.

It sits in the rules layer because finding messages are composed there; everything above imports it.
"""

from __future__ import annotations

import hashlib
import re
import string
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

MISSING = "-"


def number(x: float | int | None, nd: int = 0) -> str:
    """A figure with thousands separators, ``-`` for none: ``152,608``, ``96.4`` (nd=1)."""
    return MISSING if x is None else f"{x:,.{nd}f}"


_NO_INFORMATION = re.compile(r"[-0.,/%\s]*")  # nothing but dashes and zeros: -, 0, -/-, 0.0/0.0, 0 %


def informative(cells: Iterable[str]) -> bool:
    """Whether a table column's cells, as shown, carry information: one at least is neither empty
    (``-``) nor zero. A column without any yields its room to one that has some."""
    return any(not _NO_INFORMATION.fullmatch(c) for c in cells)


def shown(x: Any) -> str:
    """A value of any type as prose shows it: an integer or a float in the number style, as precise as it
    is (``16,384``, ``0.95``, ``1,234.5``), a mapping or a list with its numbers alike (``{tokens: 9,216}``,
    ``[31,000, 31,000]``), anything else as ``str`` gives it (a bool stays ``True``)."""
    if isinstance(x, int | float) and not isinstance(x, bool):
        return f"{x:,}"
    if isinstance(x, Mapping):
        return "{" + ", ".join(f"{k}: {shown(v)}" for k, v in x.items()) + "}"
    if isinstance(x, list | tuple):
        return "[" + ", ".join(shown(v) for v in x) + "]"
    return str(x)


class _Prose(string.Formatter):
    """``str.format`` whose plain fields (no format spec) show numbers in the number style."""

    def format_field(self, value: Any, format_spec: str) -> str:
        return shown(value) if not format_spec else super().format_field(value, format_spec)


_PROSE = _Prose()


def prose(template: str, values: Mapping[str, Any]) -> str:
    """A catalog template filled in: ``{concurrency}`` of 4096 reads ``4,096``; a field with a spec is
    formatted as ``str.format`` would. A name ``values`` lacks raises KeyError."""
    return _PROSE.vformat(template, (), values)


def compact(x: float | int | None) -> str:
    """A figure in at most five characters for narrow cells and axis ticks: ``999``, ``15.2k``, ``152k``,
    ``1.4M``; whole, never cut."""
    if x is None:
        return MISSING
    a = abs(x)
    for limit, div, unit in ((1e9, 1e9, "G"), (1e6, 1e6, "M"), (1e3, 1e3, "k")):
        if a >= limit:
            v = x / div
            return f"{v:.1f}{unit}" if abs(v) < 100 else f"{v:.0f}{unit}"
    return f"{x:.0f}" if a >= 10 or float(x).is_integer() else f"{x:.1f}"


def seconds(x: float | None) -> str:
    """A latency in seconds, three significant digits: ``0.0213``, ``4.52``, ``118``."""
    return MISSING if x is None else f"{x:.3g}"


def milliseconds(ms: float) -> str:
    """A latency given in ms as a person reads it: ``15.6 ms``, ``2 s``, ``38.8 s``."""
    if ms >= 1000:
        return f"{ms / 1000:,.1f} s".replace(".0 s", " s")
    return f"{ms:.1f} ms".replace(".0 ms", " ms")


def duration(s: float | None, *, coarse: bool = False) -> str:
    """A time span: ``45s``, ``4m05s``, ``1h12m``; ``coarse`` gives one unit, rounded down, for ages in
    narrow cells: ``12s``, ``4m``, ``3h``, ``9d``."""
    if s is None:
        return MISSING
    sec = max(0, round(s) if not coarse else int(s))
    if coarse:
        if sec < 120:
            return f"{sec}s"
        if sec < 2 * 3600:
            return f"{sec // 60}m"
        return f"{sec // 3600}h" if sec < 48 * 3600 else f"{sec // 86400}d"
    if sec < 60:
        return f"{sec}s"
    if sec < 3600:
        return f"{sec // 60}m{sec % 60:02d}s"
    return f"{sec // 3600}h{sec % 3600 // 60:02d}m"


def clock(t: datetime | None) -> str:
    """A log time without the year: ``03-14 09:12:05``."""
    return t.strftime("%m-%d %H:%M:%S") if t else MISSING


# ------------------------------------------------------------------ one style table
# Terminal styles (rich) for text and the TUI; HTML colours for the report. Keyed by the closed
# vocabularies: severity, health, verdict class.
SEVERITY_STYLE = {"error": "bold red", "warning": "yellow", "info": "cyan"}
HEALTH_STYLE = {"OK": "green", "WARN": "yellow", "LIMITS": "bold yellow", "CRIT": "bold red",
                "DOWN": "bold white on red", "STALE": "magenta", "NO STATS": "dim", "READY": "cyan"}
VERDICT_STYLE = {"healthy": "green", "under-loaded": "cyan", "prefill-bound": "yellow", "decode-bound": "magenta",
                 "transfer-bound": "bold yellow", "startup-stuck": "bold red", "invalid": "bold red",
                 "unknown": "dim"}
# the endpoint figures each verdict class rests on: a table keeps their columns first (after the endpoint and its
# health), whatever their values (a 0 waiting is a healthy run's evidence; a stage, a stuck start-up's)
VERDICT_FIGURES = {"invalid": ("stage", "last_seen"), "startup-stuck": ("stage",),
                   "transfer-bound": ("waiting", "kv"), "decode-bound": ("kv", "waiting", "running", "preemptions"),
                   "prefill-bound": ("waiting", "kv", "prompt_tps"), "under-loaded": ("running", "kv", "waiting"),
                   "healthy": ("waiting", "kv"), "unknown": ("samples",)}
VERDICT_COLOUR = {"healthy": "#2ca02c", "under-loaded": "#17becf", "prefill-bound": "#ff7f0e",
                  "decode-bound": "#9467bd", "transfer-bound": "#d62728", "startup-stuck": "#8c564b",
                  "invalid": "#7f7f7f", "unknown": "#bbbbbb"}
SEVERITY_FILL = {"error": "rgba(214,39,40,0.16)", "warning": "rgba(255,127,14,0.14)", "info": "rgba(31,119,180,0.08)"}
PALETTE = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf", "#8c564b", "#e377c2", "#7f7f7f",
           "#bcbd22")
TERMINAL_PALETTE = ("cyan", "magenta", "green", "yellow", "blue", "red", "bright_cyan", "white")


# Endpoint colours by role: prefill in blues and greens, decode in reds and oranges, so that within a run the
# two sides never share a colour and ``prefill-w3`` is the same blue in every run.
ROLE_PALETTE = {
    "prefill": ("#1f77b4", "#2ca02c", "#17becf", "#9467bd", "#0b4f8a", "#7fbf3f", "#5fa2dd", "#3b7d4f"),
    "decode": ("#d62728", "#ff7f0e", "#e377c2", "#8c564b", "#bcbd22", "#a8325e"),
}
_ENDPOINT = re.compile(r"^(?P<role>prefill|decode)\D*?(?P<index>\d+)$")


def colour_of(name: str, palette: tuple[str, ...] = PALETTE) -> str:
    """A series' colour from its name alone (an endpoint keeps its colour across runs and reloads): a role's
    worker N takes its role's N-th colour; any other name a colour by its hash."""
    m = _ENDPOINT.match(name)
    if m is not None:
        shades = ROLE_PALETTE[m["role"]]
        return shades[int(m["index"]) % len(shades)]
    return palette[int.from_bytes(hashlib.blake2s(name.encode(), digest_size=4).digest(), "big") % len(palette)]
