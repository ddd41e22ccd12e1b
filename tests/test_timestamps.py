"""Timestamps: year-less vLLM month-day times, ISO stamps, local-time offsets."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from diag.parsers.timestamps import YearTracker, infer_year, parse_iso, resolve_md, tz_offset_from

from helpers import year_from_iso


def test_resolve_md() -> None:
    assert resolve_md("08-06 12:34:56", 2026) == datetime(2026, 8, 6, 12, 34, 56, tzinfo=UTC)
    # node in PDT (UTC-7): local 17:02:38 is 00:02:38 UTC the next day
    assert resolve_md("10-14 17:02:38", 2025, -7 * 3600) == datetime(2025, 10, 15, 0, 2, 38, tzinfo=UTC)
    assert resolve_md("08-06 12:34:56.250", 2026) == datetime(2026, 8, 6, 12, 34, 56, 250000, tzinfo=UTC)
    assert resolve_md("02-29 01:00:00", 2028).day == 29
    with pytest.raises(ValueError):
        resolve_md("02-29 01:00:00", 2026)
    with pytest.raises(ValueError):
        resolve_md("2026-08-06 12:34:56", 2026)


def test_year_tracker_crosses_new_year() -> None:
    yt = YearTracker(2025)
    stamps = [
        "12-31 23:59:50",
        "12-31 23:59:59",
        "01-01 00:00:09",
        "12-31 23:59:58",
        "01-01 00:00:19",
        "01-02 08:00:00",
    ]
    got = [yt.resolve(s) for s in stamps]
    assert [d.year for d in got] == [2025, 2025, 2026, 2025, 2026, 2026]
    assert got[2] == datetime(2026, 1, 1, 0, 0, 9, tzinfo=UTC)
    assert got[3] < got[2]  # a late writer from the old year stays in the old year
    assert got[0] < got[1] < got[2] < got[4] < got[5]
    assert yt.year == 2026
    # small steps back (out-of-order writers) and ordinary progress keep the year
    yt2 = YearTracker(2026)
    assert [yt2.resolve(s).year for s in ("08-06 12:00:00", "08-05 23:59:59", "09-01 00:00:00")] == [2026] * 3
    assert yt2.resolve("08-06 12:00:00", 3600) == datetime(2026, 8, 6, 11, 0, tzinfo=UTC)


def test_year_from_iso() -> None:
    assert year_from_iso("2026-04-21 14:10:37 [INFO] Waiting for workers to be ready...") == 2026
    assert year_from_iso("[2025-11-04 05:31:43 DP0 TP0 EP0] Prefill batch") == 2025
    assert year_from_iso("2025-10-15T00:02:38.756689123Z (APIServer pid=1) INFO 10-14 17:02:38") == 2025
    assert year_from_iso("INFO 08-06 12:34:56 [core.py:95] no year here") is None
    assert year_from_iso("build 12026-13-45") is None


def test_parse_iso() -> None:
    assert parse_iso("2026-08-06T12:34:56.123456Z") == datetime(2026, 8, 6, 12, 34, 56, 123456, tzinfo=UTC)
    assert parse_iso("2025-10-15T00:02:38.756689123Z") == datetime(2025, 10, 15, 0, 2, 38, 756689, tzinfo=UTC)
    assert parse_iso("2026-08-06T14:34:56+02:00") == datetime(2026, 8, 6, 12, 34, 56, tzinfo=UTC)
    assert parse_iso("2026-08-06T05:34:56-0700") == datetime(2026, 8, 6, 12, 34, 56, tzinfo=UTC)
    assert parse_iso("2026-04-21 14:10:37") == datetime(2026, 4, 21, 14, 10, 37, tzinfo=UTC)
    assert parse_iso("2026-04-21 14:10:37,123") == datetime(2026, 4, 21, 14, 10, 37, 123000, tzinfo=UTC)
    assert parse_iso("2026-04-21 14:10:37", tz_offset_s=-7 * 3600) == datetime(
        2026, 4, 21, 21, 10, 37, tzinfo=UTC
    )
    assert parse_iso("2025-03-10T15:07:20Z").tzinfo is UTC
    for bad in ("08-06 12:34:56", "2026-13-01T00:00:00Z", "yesterday", ""):
        with pytest.raises(ValueError):
            parse_iso(bad)


def test_tz_offset_from() -> None:
    # docker RFC3339 stamp (UTC) + vLLM local time on the same line (a-03.log style, PDT)
    assert tz_offset_from("2025-10-15T00:02:38.756689123Z", "10-14 17:02:38") == -7 * 3600
    assert tz_offset_from("2026-08-06T12:34:56Z", "08-06 12:34:57") == 0
    assert tz_offset_from("2026-08-06T12:34:56Z", "08-06 18:04:55") == 5 * 3600 + 1800  # India
    assert tz_offset_from("2026-08-06T12:34:56Z", "08-06 18:19:50") == 5 * 3600 + 2700  # Nepal
    # the local time is already in the next year
    assert tz_offset_from("2025-12-31T23:30:00Z", "01-01 08:30:01") == 9 * 3600
    assert tz_offset_from("2026-01-01T02:00:00Z", "12-31 18:00:00") == -8 * 3600


# ---------------------------------------------------------------- the year of a log's month-day times

VLLM = "(APIServer pid=1) INFO {md} [api_server.py:1] vLLM API server version 0.19.0\n"


def test_a_log_over_new_year_dated_by_its_file_time_keeps_its_year() -> None:
    """Month-day times only, 12-31 -> 01-01, the file written 2025-01-05: the log starts 2024-12-31
    (the half-year rule and the mtime bound each moved it back a year: 2023)."""
    mtime = datetime(2025, 1, 5, 9, 0, tzinfo=UTC)
    head = VLLM.format(md="12-31 23:50:00") + VLLM.format(md="01-01 00:10:00")
    assert infer_year(head, mtime, not_after=mtime) == 2024
    assert infer_year(VLLM.format(md="01-02 08:00:00"), mtime, not_after=mtime) == 2025
    assert infer_year(VLLM.format(md="01-06 08:00:00"), mtime, not_after=mtime) == 2025   # a day of slack
    assert infer_year(VLLM.format(md="01-07 08:00:00"), mtime, not_after=mtime) == 2024   # after the mtime
    assert infer_year(VLLM.format(md="02-29 08:00:00"), datetime(2024, 3, 1, tzinfo=UTC),
                      not_after=datetime(2024, 3, 1, tzinfo=UTC)) == 2024


NEW_YEARS = st.integers(2020, 2032).map(lambda y: datetime(y, 1, 1, tzinfo=UTC))
OFFSET = st.integers(-20 * 86400, 20 * 86400).map(lambda s: timedelta(seconds=s))
HOURS = st.integers(0, 6 * 3600).map(lambda s: timedelta(seconds=s))
SPAN = st.integers(0, 20 * 86400).map(lambda s: timedelta(seconds=s))
TZ = st.integers(-12, 14).map(lambda h: timedelta(hours=h))


@settings(max_examples=200, deadline=None)
@given(new_year=NEW_YEARS, start=OFFSET, span=SPAN, lag=HOURS, tz=TZ, source=st.sampled_from(
    ["file time", "job json", "sweep log", "iso line"]))
def test_the_first_month_day_gets_its_year_under_every_dating_source(
        new_year: datetime, start: timedelta, span: timedelta, lag: timedelta, tz: timedelta, source: str) -> None:
    """A log whose first vLLM line is at ``first`` (local time ``first + tz``), around a New Year: the
    year of that local month-day, whichever source dates it (the file's mtime after its last line, the
    job's start before its first, or an ISO stamp of another process near it)."""
    first = new_year + start
    local = first + tz
    head = VLLM.format(md=local.strftime("%m-%d %H:%M:%S"))
    if source == "file time":
        mtime = first + span + lag
        got = infer_year(head, mtime, not_after=mtime)
    elif source in ("job json", "sweep log"):
        got = infer_year(head, first - lag)
    else:
        got = infer_year(f"{(first - lag).isoformat()} INFO dynamo: start\n" + head)
    assert got == local.year


@pytest.mark.parametrize("head", [
    "E20251112 11:16:11.129717 58058 master_client.cpp:146] RPC call failed: Connection timed out",  # glog, its year
    "[11/12/2025-11:16:11] [TRT-LLM] [W] Logger level already set from environment.",             # TRT-LLM Python
    "11-12-2025 11:16:11.123456 [TRT-LLM] [I] Set logger level to [I]",                          # TRT-LLM C++
    "2025-11-12T11:16:11.252Z  INFO dynamo_runtime::distributed: x",                             # ISO
])
def test_a_month_day_takes_the_year_of_the_first_full_date_in_any_head(head: str) -> None:
    """A log's year-less month-day stamps take the year its first full date says, whichever head carries it (an
    engine's own heads with the year beside vLLM's month-day lines), not the reference's."""
    ref = datetime(2026, 12, 5, tzinfo=UTC)
    assert infer_year(head + "\n" + VLLM.format(md="11-12 11:16:12"), ref) == 2025
