"""The stats rules on short, sparse series: 2-10 stats lines of one engine, gaps of 5-60 s, in the three
shapes diag reads (vLLM V1 and V0 stats lines, SGLang decode batch lines), written as a pasted excerpt and
judged by ``diag tail --format json`` in this process. Each property states the physics a rule encodes:
a queue standing over time at a full cache is exhaustion (DIAG-K001), usage rising with nobody waiting is
filling (DIAG-K004) but a ramp-up after idle is not, requests in flight with no throughput over long enough
is a stall (DIAG-B004), idle (nothing running) is none of these, preemptions are counted (DIAG-K002), and one
engine alone is never a prefill/decode imbalance (DIAG-B001/B002). Thresholds come from the catalog."""

from __future__ import annotations

import json
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from hypothesis import assume, given, settings
from hypothesis import strategies as st

from diag.rules.catalog import get

from helpers import ROOT, run_diag

sys.path.insert(0, str(ROOT / "samples"))   # the sample generators' line builders (make_sglang imports its sibling)
import make_samples as ms
import make_sglang as msg

SHAPES = ("v1", "v0", "sglang")
K001, K004, B004 = get("DIAG-K001").params, get("DIAG-K004").params, get("DIAG-B004").params
START = datetime(2026, 3, 2, 10, 0, 0, tzinfo=UTC)
PROPERTY = settings(max_examples=60, deadline=None, derandomize=True)


@dataclass(frozen=True)
class Point:
    """One engine's stats line: the interval ending at ``t``."""

    t: datetime
    running: int
    waiting: int = 0
    kv: float = 0.0          # KV usage, %
    gen: float = 0.0         # generation tok/s
    prompt: float = 0.0      # prompt tok/s
    preempted: int = 0       # preemptions in the interval


def _v0_line(p: Point) -> str:
    """A V0 stats line (the wording of the engine's format samples, engines/vllm/stats.py)."""
    return (f"INFO {ms.md(p.t)} [metrics.py:229] Avg prompt throughput: {p.prompt:.1f} tokens/s, Avg generation "
            f"throughput: {p.gen:.1f} tokens/s, Running: {p.running} reqs, Swapped: 0 reqs, Pending: {p.waiting} reqs, "
            f"GPU KV cache usage: {p.kv:.1f}%, CPU KV cache usage: 0.0%.")


def _v0_preemption(p: Point, cumulative: int) -> str:
    return (f"WARNING {ms.md(p.t)} [scheduler.py:1560] Sequence group {cumulative} is preempted by "
            "PreemptionMode.RECOMPUTE mode because there is not enough KV cache space. This can affect the end-to-end "
            f"performance. Increase gpu_memory_utilization or tensor_parallel_size to provide more KV cache memory. "
            f"total_num_cumulative_preemption={cumulative}")


def render(shape: str, points: Sequence[Point]) -> str:
    """The excerpt: each point as its engine prints it (with V0's preemption warnings at its 1st, 51st, ...
    preemption and SGLang's retraction lines)."""
    lines, cumulative = [], 0
    for p in points:
        if shape == "v1":
            stats = ms.mk(p.prompt, p.gen, p.running, p.waiting, p.preempted, p.kv, None)
            lines.append(ms.vl(p.t, "APIServer", 7, "INFO", "loggers.py:271", ms.stats_msg(0, stats)))
        elif shape == "v0":
            for _ in range(p.preempted):
                cumulative += 1
                if cumulative % 50 == 1:
                    lines.append(_v0_preemption(p, cumulative))
            lines.append(_v0_line(p))
        else:
            fig = {"run": p.running, "gen": p.gen, "usage": p.kv / 100, "queue": p.waiting, "retracted": 0,
                   "prealloc": 0, "transfer": 0}
            lines.append(msg.sg(p.t, msg.decode_line(fig), 0))
            if p.preempted:
                lines.append(msg.sg(p.t, "KV cache pool is full. Retract requests. #retracted_reqs: "
                                         f"{p.preempted}, #new_token_ratio: 0.4210 -> 0.6105", 0))
    return "\n".join(lines) + "\n"


def judge(shape: str, points: Sequence[Point]) -> dict[str, list[dict[str, Any]]]:
    """The warning/error findings of ``diag tail --format json`` on the excerpt, by code."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "excerpt.log"
        path.write_text(render(shape, points))
        res = run_diag("tail", str(path), "--format", "json")
    assert res.returncode in (0, 1), res.stderr
    out: dict[str, list[dict[str, Any]]] = {}
    for f in json.loads(res.stdout)["findings"]:
        if f["severity"] in ("warning", "error"):
            out.setdefault(f["code"], []).append(f)
    return out


# ---------------------------------------------------------------- series

@st.composite
def times(draw: st.DrawFn, n: int) -> list[datetime]:
    """``n`` stats times: a start anywhere in a minute, gaps of 5-60 s."""
    t = START + timedelta(seconds=draw(st.integers(0, 59)))
    out = [t]
    for gap in draw(st.lists(st.integers(5, 60), min_size=n - 1, max_size=n - 1)):
        t += timedelta(seconds=gap)
        out.append(t)
    return out


def _span(points: Sequence[Point]) -> float:
    return (points[-1].t - points[0].t).total_seconds()


def _resolution(shape: str) -> float:
    """The KV usage step a shape prints: 0.1 % (vLLM), 1 % (SGLang's token usage, two decimals of a fraction)."""
    return 1.0 if shape == "sglang" else 0.1


# ---------------------------------------------------------------- properties

@PROPERTY
@given(shape=st.sampled_from(SHAPES), data=st.data(), n=st.integers(2, 10))
def test_idle_is_never_exhaustion_filling_or_a_stall(shape: str, data: st.DataObject, n: int) -> None:
    """Nothing running and nobody waiting, whatever the cache holds (prefix-cached blocks): no K001/K004/B004."""
    kv = data.draw(st.lists(st.floats(0, 100), min_size=n, max_size=n))
    points = [Point(t, 0, 0, round(k, 1)) for t, k in zip(data.draw(times(n)), kv, strict=True)]
    found = judge(shape, points)
    assert not {"DIAG-K001", "DIAG-K004", "DIAG-B004"} & found.keys(), found.keys()


@PROPERTY
@given(shape=st.sampled_from(SHAPES), data=st.data(), n=st.integers(2, 10), at_end=st.booleans())
def test_a_queue_standing_at_a_full_cache_is_exhaustion(shape: str, data: st.DataObject, n: int,
                                                        at_end: bool) -> None:
    """Requests waiting with KV >= kv_usage on >= 2 consecutive lines spanning a stats interval or more, where
    the excerpt begins or ends (it cannot tell how long the queue stood): K001. Other lines: no queue, KV lower."""
    ts = data.draw(times(n))
    k = data.draw(st.integers(2, n))   # the lines with the queue
    full = range(n - k, n) if at_end else range(k)
    assume((ts[full[-1]] - ts[full[0]]).total_seconds() >= K001["interval_s"])
    res = _resolution(shape)
    points = [Point(t, running=data.draw(st.integers(1, 256)), gen=data.draw(st.floats(50, 5000)),
                    waiting=data.draw(st.integers(1, 500)) if i in full else 0,
                    kv=data.draw(st.floats(K001["kv_usage"] + res, 100)) if i in full else
                    data.draw(st.floats(0, K001["kv_usage"] - 10)))
              for i, t in enumerate(ts)]
    assert "DIAG-K001" in judge(shape, points)


@PROPERTY
@given(shape=st.sampled_from(SHAPES), data=st.data(), n=st.integers(2, 10))
def test_no_queue_and_no_eviction_is_not_exhaustion(shape: str, data: st.DataObject, n: int) -> None:
    """A full cache nobody waits for and nothing is evicted from is high usage, not exhaustion: no K001."""
    points = [Point(t, running=data.draw(st.integers(1, 256)), kv=data.draw(st.floats(0, 100)),
                    gen=data.draw(st.floats(0, 5000))) for t in data.draw(times(n))]
    assert "DIAG-K001" not in judge(shape, points)


@st.composite
def filling(draw: st.DrawFn, shape: str) -> list[Point]:
    """KV rising linearly in time to >= kv_usage with the same requests running and nobody waiting, full
    (at that rate) within the horizon and risen by more than rise_pp (plus the shape's print resolution)."""
    n = draw(st.integers(int(K004["min_intervals"]), 10))
    ts = draw(times(n))
    res = _resolution(shape)
    end = draw(st.floats(K004["kv_usage"] + res, 99.0 - res))
    rate = draw(st.floats(0.01, 2.0))   # %/s
    span = (ts[-1] - ts[0]).total_seconds()
    assume(end - rate * span >= 0 and rate * span >= K004["rise_pp"] + 2 * res)
    assume((100 - end) / rate <= 0.8 * K004["horizon_s"])
    running = draw(st.integers(1, 256))
    return [Point(t, running, 0, round(end - rate * (ts[-1] - t).total_seconds(), 1), gen=draw(st.floats(1, 5000)))
            for t in ts]


@PROPERTY
@given(shape=st.sampled_from(SHAPES), data=st.data())
def test_usage_rising_with_nobody_waiting_is_filling(shape: str, data: st.DataObject) -> None:
    """KV rising over min_intervals lines or more, nobody waiting, full within the horizon: K004."""
    points = data.draw(filling(shape))
    found = judge(shape, points)
    assert "DIAG-K004" in found, [p.kv for p in points]
    assert found["DIAG-K004"][0]["evidence"]["forecast"]["time_to_full_s"] <= K004["horizon_s"]


@PROPERTY
@given(shape=st.sampled_from(SHAPES), data=st.data(), idle_first=st.booleans())
def test_a_ramp_up_is_not_filling(shape: str, data: st.DataObject, idle_first: bool) -> None:
    """The same rise while requests are being admitted (running grows from 0 after an idle line, or to more
    than twice what the rise began with): KV grows with the requests, not within them: no K004."""
    points = data.draw(filling(shape))
    final = data.draw(st.integers(8, 256))
    n = len(points)
    grown = [max(1, final * (i + 1) // n) for i in range(n)]
    if idle_first:
        grown[0] = 0
    assume(grown[0] < K004["ramp_running_frac"] * grown[-1])
    points = [replace(p, running=r) for p, r in zip(points, grown, strict=True)]
    assert "DIAG-K004" not in judge(shape, points)


@PROPERTY
@given(shape=st.sampled_from(SHAPES), data=st.data(), n=st.integers(2, 10))
def test_requests_in_flight_without_throughput_are_a_stall(shape: str, data: st.DataObject, n: int) -> None:
    """Requests running and no throughput on every line, the lines spanning at least stall_s: B004 (with nothing
    to compare with, zero is the measure; the same lines with nothing running are idle: the first property)."""
    ts = data.draw(times(n))
    assume((ts[-1] - ts[0]).total_seconds() >= B004["stall_s"])
    kv = data.draw(st.floats(0, 90))
    stuck = [Point(t, running=data.draw(st.integers(1, 256)), kv=kv) for t in ts]
    assert "DIAG-B004" in judge(shape, stuck)


@PROPERTY
@given(shape=st.sampled_from(SHAPES), data=st.data())
def test_a_stall_shorter_than_the_stall_window_is_not_one(shape: str, data: st.DataObject) -> None:
    """Lines with requests running and no throughput covering less than stall_s (their span plus one interval
    of the series' own cadence; SGLang's folded into clock intervals, at most twice the span): no B004."""
    t0 = START + timedelta(seconds=data.draw(st.integers(0, 59)))
    ts = [t0]
    while True:
        gap = data.draw(st.integers(5, 60))
        if 2 * ((ts[-1] - t0).total_seconds() + gap) >= B004["stall_s"]:
            break
        ts.append(ts[-1] + timedelta(seconds=gap))
    assume(len(ts) >= 2)
    points = [Point(t, running=data.draw(st.integers(1, 256)), kv=10.0) for t in ts]
    assert "DIAG-B004" not in judge(shape, points)


@PROPERTY
@given(shape=st.sampled_from(SHAPES), data=st.data(), n=st.integers(2, 10))
def test_steady_healthy_serving_raises_no_stats_finding(shape: str, data: st.DataObject, n: int) -> None:
    """Requests running at a steady throughput, nobody waiting, KV steady below kv_usage, no preemption: no
    K001, K002, K004, B004, and one engine alone is never prefill- or decode-bound (B001/B002)."""
    kv = data.draw(st.floats(1, K004["kv_usage"] - 5))
    running = data.draw(st.integers(1, 256))
    gen = data.draw(st.floats(100, 5000))
    points = [Point(t, running, 0, kv, gen=gen * data.draw(st.floats(0.9, 1.1))) for t in data.draw(times(n))]
    found = judge(shape, points)
    assert not {"DIAG-K001", "DIAG-K002", "DIAG-K004", "DIAG-B004", "DIAG-B001", "DIAG-B002"} & found.keys()


@PROPERTY
@given(shape=st.sampled_from(SHAPES), data=st.data(), n=st.integers(2, 10))
def test_preemptions_are_counted(shape: str, data: st.DataObject, n: int) -> None:
    """Preemptions in any interval raise K002, none never do. Counted as they are printed: V1's per-line counts
    summed, V0's cumulative counter by its rise between warnings (one warning per 50), SGLang's retractions."""
    counts = data.draw(st.lists(st.integers(0, 120) | st.just(0), min_size=n, max_size=n))
    points = [Point(t, running=64, kv=80.0, gen=900.0, preempted=c) for t, c in zip(data.draw(times(n)), counts,
                                                                                   strict=True)]
    found = judge(shape, points)
    assert ("DIAG-K002" in found) == (sum(counts) > 0)
    if shape == "v1" and sum(counts):
        assert found["DIAG-K002"][0]["evidence"]["total"] == sum(counts)
    if shape == "v0" and sum(counts):
        warned = [c for c in range(1, sum(counts) + 1) if c % 50 == 1]   # the cumulative totals V0 printed
        assert found["DIAG-K002"][0]["evidence"]["total"] == warned[-1] - warned[0] + 1
