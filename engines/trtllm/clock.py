"""The node's offset from UTC, for TensorRT-LLM's stamps: its loggers and its iteration ``timestamp`` write
local time (``datetime.now()``, ``std::localtime``), while Dynamo's lines in the same log are UTC.

The offset is inferred, never assumed, from the order of the log's lines: a local line written between two
UTC lines happened between them, so the offset lies between its stamp minus the later UTC stamp and its
stamp minus the earlier one. Every such line narrows the range; the offset is the one whole hour left in it.
No UTC line on both sides of some local line, or a range that holds no whole hour or more than one, settles
nothing: the stamps then stay on the log's own clock, and the note says so.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from datetime import datetime

from diag.parsers.clean import logical_lines

# a Dynamo tracing head (UTC); TensorRT-LLM's Python head, its C++ head, and an iteration line's timestamp
_UTC = re.compile(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.\d+)?Z\s")
_LOCAL = (
    (re.compile(r"^\[(\d\d/\d\d/\d{4}-\d\d:\d\d:\d\d)\] \[TRT-LLM\]"), "%m/%d/%Y-%H:%M:%S"),
    (re.compile(r"^(\d\d-\d\d-\d{4} \d\d:\d\d:\d\d)(?:\.\d+)? \[TRT-LLM\]"), "%m-%d-%Y %H:%M:%S"),
    (re.compile(r"\btimestamp = (\d{4}-\d\d-\d\d \d\d:\d\d:\d\d), states = "), "%Y-%m-%d %H:%M:%S"),
)
SLACK_S = 60.0      # lines of two writers may land this far out of order in one file
_HOUR = 3600.0


@dataclass(frozen=True)
class ClockOffset:
    """Whole hours local time is ahead of UTC (None: not settled) and the note that says how it was told
    ("": the log has no local stamp)."""

    hours: int | None
    note: str

    @property
    def seconds(self) -> int | None:
        return None if self.hours is None else self.hours * 3600


def _stamp(line: str) -> tuple[str, datetime] | None:
    """("utc" | "local", the stamp read as naive) of a line that has one."""
    if m := _UTC.match(line):
        return "utc", datetime.fromisoformat(m.group(1))
    for rx, fmt in _LOCAL:
        if m := rx.search(line):
            try:
                return "local", datetime.strptime(m.group(1), fmt)
            except ValueError:
                return None
    return None


def infer(stamps: list[tuple[str, datetime]]) -> ClockOffset:
    """The offset from stamps in line order: each local stamp between two UTC ones bounds it."""
    lo, hi = -math.inf, math.inf
    locals_seen = bracketed = 0
    last_utc: datetime | None = None
    pending: list[datetime] = []          # local stamps since the last UTC one
    for kind, ts in stamps:
        if kind == "local":
            locals_seen += 1
            pending.append(ts)
            continue
        for loc in pending:
            hi_i = (loc - last_utc).total_seconds() + SLACK_S if last_utc is not None else math.inf
            lo_i = (loc - ts).total_seconds() - SLACK_S
            lo, hi = max(lo, lo_i), min(hi, hi_i)
            bracketed += last_utc is not None
        pending, last_utc = [], ts
    if last_utc is not None:              # local lines after the last UTC one: written after it
        hi = min([hi, *((loc - last_utc).total_seconds() + SLACK_S for loc in pending)])
    if not locals_seen:
        return ClockOffset(None, "")     # nothing on a local clock: nothing to say
    if not bracketed:
        return ClockOffset(None, "TensorRT-LLM's local times not placed: no TensorRT-LLM line between two UTC lines; "
                                 "its times are kept on the log's own clock")
    hours = list(range(math.ceil(lo / _HOUR), math.floor(hi / _HOUR) + 1))
    if len(hours) != 1:
        why = "no whole hour fits" if not hours else f"{len(hours)} whole hours fit"
        return ClockOffset(None, f"TensorRT-LLM's local times not placed: {why} its lines written between UTC "
                                 "lines; its times are kept on the log's own clock")
    h = hours[0]
    return ClockOffset(h, f"TensorRT-LLM's local times read as UTC{h:+d} h, from its lines written between UTC lines")


def offset_of(head: str) -> ClockOffset:
    """The offset a log's head settles (:func:`infer` over its stamped lines, cleaned as the line parser cleans
    them: colours, srun labels and other prefixes off)."""
    if "[TRT-LLM]" not in head and "timestamp = " not in head:
        return ClockOffset(None, "")   # no local stamp of its forms (every one holds one of these literals)
    return infer([s for raw in head.splitlines() for text, _, _ in logical_lines(raw)
                  if (s := _stamp(text)) is not None])
