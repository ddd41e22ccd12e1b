"""Timestamp helpers: year-less vLLM month-day times, ISO stamps, and local-time offsets.

vLLM subprocess records carry ``MM-DD HH:MM:SS`` in the node's local time and no year; the year
comes from the orchestrator log or an ISO stamp elsewhere, and the offset to UTC from an outer
UTC stamp (docker, Dynamo) on the same line. Everything returned here is timezone-aware UTC.
"""

from __future__ import annotations

import re
from datetime import UTC, date, datetime, timedelta, timezone

_MD = re.compile(r"^\s*(\d\d)-(\d\d)[ T](\d\d):(\d\d):(\d\d)(?:[.,](\d+))?\s*$")
_ISO = re.compile(
    r"^\s*(\d{4})-(\d\d)-(\d\d)[T ](\d\d):(\d\d)(?::(\d\d))?(?:[.,](\d+))?"
    r"\s*(Z|z|UTC|[+-]\d\d(?::?\d\d)?)?\s*$"
)
_HALF_YEAR_DAYS = 182
# A line holding any timestamp diag reads (month-day or ISO, bare or quoted; UCX's epoch seconds; the
# month-first dates with the year after, slash- or dash-separated, of a logger's datefmt '%m/%d/%Y-%H:%M:%S' or
# '%m-%d-%Y %H:%M:%S') matches this; most lines that match hold one: a cheap necessary condition before parsing
# a line's head.
STAMP_HINT = r"\d\d-\d\d[ T]\d\d:\d\d|\[\d{10}\.\d|\d\d[/-]\d\d[/-]\d{4}[ -]\d\d:\d\d"
_QUARTER_HOUR = 900


def _micros(frac: str | None) -> int:
    """Fractional-second digits to microseconds, truncating nanoseconds."""
    if not frac:
        return 0
    return int(frac[:6].ljust(6, "0"))


def _split_md(md: str) -> tuple[int, int, int, int, int, int]:
    m = _MD.match(md)
    if not m:
        raise ValueError(f"not a month-day time 'MM-DD HH:MM:SS': {md!r}")
    mo, d, h, mi, s = (int(g) for g in m.groups()[:5])
    return mo, d, h, mi, s, _micros(m.group(6))


def resolve_md(md: str, year: int, tz_offset_s: int = 0) -> datetime:
    """A vLLM ``MM-DD HH:MM:SS`` local time in ``year`` → UTC (``tz_offset_s`` = local - UTC)."""
    mo, d, h, mi, s, us = _split_md(md)
    try:
        local = datetime(year, mo, d, h, mi, s, us, tzinfo=UTC)
    except ValueError as e:
        raise ValueError(f"invalid date {md!r} in {year}: {e}") from None
    return local - timedelta(seconds=tz_offset_s)


def _day_index(mo: int, d: int) -> int:
    """Approximate day of year, good enough to compare month-days (no leap-year needs)."""
    return (mo - 1) * 31 + (d - 1)


class YearTracker:
    """Assigns years to a stream of month-day times, moving to the next year on a Dec→Jan wrap.

    A month-day that falls back by more than half a year (Dec 31 → Jan 1) starts the next year;
    a small step back (out-of-order writers) keeps the year, and a straggler from before the wrap
    (Jan → Dec) is placed in the previous year without changing the tracker.
    """

    __slots__ = ("_last", "year")

    def __init__(self, year: int) -> None:
        self.year = year
        self._last: int | None = None

    def _place(self, md: str) -> tuple[int, int, int]:
        """(the year of ``md``, the tracker's year and last day index after it)."""
        mo, d, *_ = _split_md(md)
        idx = _day_index(mo, d)
        if self._last is None:
            return self.year, self.year, idx
        if self._last - idx > _HALF_YEAR_DAYS:      # wrapped into a new year
            return self.year + 1, self.year + 1, idx
        if idx - self._last > _HALF_YEAR_DAYS:      # straggler from the old year
            return self.year - 1, self.year, self._last
        return self.year, self.year, max(idx, self._last)

    def resolve(self, md: str, tz_offset_s: int = 0) -> datetime:
        """UTC datetime of ``md`` with the tracked year."""
        year, self.year, self._last = self._place(md)
        return resolve_md(md, year, tz_offset_s)

    def peek(self, md: str, tz_offset_s: int = 0) -> datetime:
        """What :meth:`resolve` would give, the tracker left as it is."""
        return resolve_md(md, self._place(md)[0], tz_offset_s)


def _offset(tz: str | None) -> timezone:
    if not tz or tz in ("Z", "z", "UTC"):
        return UTC
    sign = -1 if tz[0] == "-" else 1
    digits = tz[1:].replace(":", "")
    hours, minutes = int(digits[:2]), int(digits[2:4] or 0)
    return timezone(sign * timedelta(hours=hours, minutes=minutes))


def parse_iso(text: str, tz_offset_s: int = 0) -> datetime:
    """Parse an ISO-8601 stamp (``Z``, ``±HH:MM``, ns fractions, or ``YYYY-MM-DD HH:MM:SS``) to UTC.

    A stamp without a zone is local time ``tz_offset_s`` seconds ahead of UTC (default: UTC).
    """
    m = _ISO.match(text)
    if not m:
        raise ValueError(f"not an ISO-8601 timestamp: {text[:60]!r}")
    y, mo, d, h, mi = (int(g) for g in m.groups()[:5])
    s = int(m.group(6) or 0)
    try:
        if m.group(8):
            dt = datetime(y, mo, d, h, mi, s, _micros(m.group(7)), tzinfo=_offset(m.group(8)))
            return dt.astimezone(UTC)
        dt = datetime(y, mo, d, h, mi, s, _micros(m.group(7)), tzinfo=UTC)
    except ValueError as e:
        raise ValueError(f"invalid timestamp {text[:60]!r}: {e}") from None
    return dt - timedelta(seconds=tz_offset_s)


def local_time(text: str, fmt: str, tz_offset_s: int = 0) -> datetime | None:
    """A full local stamp in the ``strptime`` format ``fmt`` to UTC (``tz_offset_s`` ahead of it); None when
    it names no real time."""
    try:
        return datetime.strptime(text, fmt).replace(tzinfo=UTC) - timedelta(seconds=tz_offset_s)
    except ValueError:
        return None


def tz_offset_from(ext_iso: str, md: str) -> int:
    """Seconds local time is ahead of UTC, from an outer UTC stamp and the vLLM local month-day
    time on the same line; rounded to 15 minutes. The year is the one nearest the UTC stamp."""
    utc = parse_iso(ext_iso)
    best: float | None = None
    for year in (utc.year - 1, utc.year, utc.year + 1):
        try:
            local_as_utc = resolve_md(md, year)
        except ValueError:
            continue
        diff = (local_as_utc - utc).total_seconds()
        if best is None or abs(diff) < abs(best):
            best = diff
    if best is None:
        raise ValueError(f"cannot place {md!r} near {ext_iso!r}")
    return round(best / _QUARTER_HOUR) * _QUARTER_HOUR


# A full date in any head diag reads, the log's first one deciding: ISO (Dynamo, docker, SGLang, Python's
# logging), TensorRT-LLM's Python logger (month/day/year-time) and C++ logger (month-day-year time), glog with
# its year (log_year_in_prefix: level, year, month, day).
_FULL_DATE = re.compile(
    r"(?<!\d)(?P<y>20\d\d)-(?P<m>\d\d)-\d\d[T ]\d\d:\d\d:\d\d"
    r"|(?<!\d)(?P<m2>\d\d)/\d\d/(?P<y2>20\d\d)-\d\d:\d\d:\d\d"
    r"|(?<![\d-])(?P<m3>\d\d)-\d\d-(?P<y3>20\d\d) \d\d:\d\d:\d\d"
    r"|(?<![\w])[IWEF](?P<y4>20\d\d)(?P<m4>\d\d)\d\d \d\d:\d\d:\d\d")


def infer_year(head: str, ref: datetime | None = None, first_md: str | None = None,
               not_after: datetime | None = None) -> int | None:
    """The year of a log's first month-day time.

    The reference date is the log's own first full date (:data:`_FULL_DATE`), else ``ref`` (the run's orchestrator
    start, or the file's mtime). When the first month-day lies more than half a year from the
    reference month, the run crossed New Year between them. ``not_after`` (the file's mtime: no
    line was written after it) is a bound: a first month-day that would fall after it (a day of
    slack for local time) belongs to the year before.
    """
    m = _FULL_DATE.search(head)
    if m:
        year, month = int(m["y"] or m["y2"] or m["y3"] or m["y4"]), int(m["m"] or m["m2"] or m["m3"] or m["m4"])
    elif ref is not None:
        year, month = ref.year, ref.month
    else:
        return None
    if first_md is None:
        mm = re.search(r"(?:DEBUG|INFO|WARNING|ERROR|CRITICAL) (\d\d-\d\d) \d\d:\d\d:\d\d", head)
        first_md = mm.group(1) if mm else None
    if first_md:
        md_month = int(first_md[:2])
        if md_month - month > 6:
            year -= 1
        elif month - md_month > 6:
            year += 1
        if not_after is not None and not m:   # the latest such year whose date is not after the bound
            day = int(first_md[3:5]) if len(first_md) >= 5 and first_md[3:5].isdigit() else 1
            latest = not_after.date() + timedelta(days=1)
            while year > 1 and _md_date(year, md_month, day) > latest:
                year -= 1
    return year


def _md_date(year: int, month: int, day: int) -> date:
    """The month-day in ``year`` (Feb 29 of a common year as Feb 28; out-of-range days clamped)."""
    month = min(max(month, 1), 12)
    for d in range(min(max(day, 1), 31), 27, -1):
        try:
            return date(year, month, d)
        except ValueError:
            continue
    return date(year, month, min(max(day, 1), 28))
