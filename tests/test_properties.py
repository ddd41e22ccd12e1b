"""Property tests: arbitrary input never raises; stats survive any decoration with the same values."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from diag.parsers.ingest import StreamParser, parse_bulk
from diag.parsers.records import StatsSample

from helpers import blocks_of, parse_text

LINE = ("(APIServer pid=3646) INFO 05-19 10:13:11 [loggers.py:271] Engine 004: Avg prompt throughput: 812.5 "
        "tokens/s, Avg generation throughput: 1055.3 tokens/s, Running: 18 reqs, Waiting: 43 reqs, "
        "Preemptions: 2, GPU KV cache usage: 95.9%, Prefix cache hit rate: 0.0%, External prefix cache hit rate: 97.1%")
VALUES = dict(engine=4, prompt_tps=812.5, gen_tps=1055.3, running=18, waiting=43, preemptions=2, kv_usage=95.9,
              prefix_hit=0.0, ext_hit=97.1)

ESCAPES = st.sampled_from(["\x1b[0;36m", "\x1b[0;0m", "[0;36m", "[0m", "^[[1;36m", "#033[0;0m", "\ufffd[32m",
                           "\x1b[2K", "\x1b]0;t\x07", ""])
PREFIXES = st.sampled_from(["", "0: ", "17: ", "2026-05-12T08:01:39.331095044Z ", "vllm  | ", "  | ",
                            "Aug 19 18:34:30 vllm vllm[8707]: ", "node1_decode_w0.out:", "[2025-03-10T15:07:20Z] "])


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=2000))
def test_arbitrary_bytes_never_raise(data: bytes) -> None:
    parse_bulk(blocks_of(data, 97), year=2026)
    sp = StreamParser(year=2026)
    sp.feed(data)
    sp.finish()


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=600))
def test_arbitrary_text_never_raises(text: str) -> None:
    parse_text(text)
    parse_text(LINE[: len(text) % len(LINE)] + text)


@settings(max_examples=400, deadline=None)
@given(PREFIXES, ESCAPES, ESCAPES, ESCAPES, st.sampled_from(["", "\r", "\r\n", "^M"]), st.booleans())
def test_stats_line_survives_decoration(prefix: str, e1: str, e2: str, e3: str, end: str, colour_level: bool) -> None:
    head, rest = LINE.split(" INFO ", 1)
    level = f"{e3}INFO{e2}" if colour_level else "INFO"
    decorated = f"{prefix}{e1}{head}{e2} {level} {rest}{end}"
    recs = [r for r in parse_text(decorated) if isinstance(r, StatsSample)]
    assert len(recs) == 1
    assert {k: getattr(recs[0], k) for k in VALUES} == VALUES


@settings(max_examples=200, deadline=None)
@given(st.integers(min_value=40, max_value=len(LINE) - 5), st.sampled_from(["", "\x1b[0;36m"]))
def test_torn_stats_line_rejoined(cut: int, esc: str) -> None:
    text = esc + LINE[:cut] + "\n" + LINE[cut:] + "\n"
    recs = [r for r in parse_text(text) if isinstance(r, StatsSample)]
    if LINE[cut:].startswith(("(", "INFO", " INFO")):
        return  # the cut fell on a record head: the second half is a record of its own
    assert len(recs) == 1 and {k: getattr(recs[0], k) for k in VALUES} == VALUES


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from([0.0, 1.0, 2.5, 2.5, 40.0, 80.5]) | st.floats(0, 1e4), min_size=2, max_size=12),
       st.data())
def test_a_sibling_median_by_index_is_the_median_of_the_siblings(row: list[float], data: st.DataObject) -> None:
    """engine_skew's sibling median (one value taken out of the sorted row by index) is ``statistics.median``."""
    from statistics import median

    from diag.rules.windows import median_without

    i = data.draw(st.integers(0, len(row) - 1))
    assert median_without(sorted(row), row[i]) == median(row[:i] + row[i + 1:])


def _windows_by_every_bucket(ts: list, cond: list[bool], hole: object) -> list[list[int]]:
    """The runs of true buckets as the rule engine read them before: every bucket visited in turn."""
    runs: list[list[int]] = []
    cur: list[int] = []
    for i, (t, c) in enumerate(zip(ts, cond, strict=True)):
        if c and cur and (t - ts[cur[-1]]) > hole:
            runs.append(cur)
            cur = []
        if c:
            cur.append(i)
        elif cur:
            runs.append(cur)
            cur = []
    return [*runs, cur] if cur else runs


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.sampled_from([10, 10, 10, 20, 30, 60]), st.booleans()), max_size=40))
def test_windows_are_the_runs_of_true_buckets(steps: list[tuple[int, bool]]) -> None:
    """A window is a run of consecutive true buckets without a hole; found over the true buckets only."""
    from datetime import UTC, datetime, timedelta

    from diag.rules.windows import windows

    t0 = datetime(2026, 1, 1, tzinfo=UTC)
    ts = [t0 + timedelta(seconds=sum(s for s, _ in steps[: k + 1])) for k in range(len(steps))]
    cond = [c for _, c in steps]
    want = _windows_by_every_bucket(ts, cond, timedelta(seconds=20))
    assert [list(w.rows) for w in windows(ts, cond, for_s=0, interval_s=10)] == want
