"""The compiled prefilter (Hyperscan over raw bytes) and the polars path give the same block results:
records, stats and KV rows, counts and the clock, on every sample run, every real log and generated
blocks (escape sequences inside triggers, CRLF, no trailing newline, blocks cut anywhere)."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from diag.parsers import blockframe, prefilter
from diag.parsers.counts import CLASSIFY_EVERY, CLASSIFY_HEAD, CLASSIFY_WINDOW
from diag.parsers.ingest import Parsed, parse_blocks

from helpers import blocks_of

pytestmark = pytest.mark.skipif(not prefilter.available(), reason="no Hyperscan wheel on this platform")
ROOT = Path(__file__).resolve().parents[1]


def _key(p: Parsed) -> tuple:
    c = p.counts
    return (p.records, p.stats.rows(), p.kv.rows(), c.lines, c.candidates, c.ansi_lines, dict(c.noise),
            c.unclassified, c.last_ts)


def _both(data: bytes, block: int, monkeypatch: pytest.MonkeyPatch) -> tuple[tuple, tuple]:
    monkeypatch.setattr(blockframe, "USE_PREFILTER", False)
    plain = _key(parse_blocks(blocks_of(data, block), year=2026))
    monkeypatch.setattr(blockframe, "USE_PREFILTER", True)
    monkeypatch.setattr(blockframe, "PREFILTER_MIN_BYTES", 0)   # the prefilter on blocks of any size and density
    monkeypatch.setattr(blockframe, "PREFILTER_MAX_STATS_SHARE", float("inf"))
    return plain, _key(parse_blocks(blocks_of(data, block), year=2026))


def _logs() -> list[Path]:
    """The real logs (the sample runs' logs: tests/test_ingest.py holds both scans to the record path)."""
    shared = ROOT.parent / "shared" / "samples" / "real-logs"
    return sorted((ROOT / "tests" / "data" / "real-logs").glob("*.log")) + \
        (sorted(shared.glob("*.log")) if shared.is_dir() else [])


LOGS = _logs()


def test_the_logs_are_all_there() -> None:
    assert len(LOGS) >= 80


@pytest.mark.parametrize("path", LOGS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_every_sample_and_real_log(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Whole (one block) and cut into 64 KiB blocks (a large log's lines split across block ends; blocks cut
    at any byte are the generated cases' job below)."""
    data = path.read_bytes()
    for block in (64 << 10, 1 << 20):
        plain, fast = _both(data, block, monkeypatch)
        assert fast == plain, (path.name, block)


_SGR = ["\x1b[0m", "\x1b[2m", "\x1b[32m", "\x1b[1;31m", "\x1b[38;5;208m", "\x1b]0;title\x07", "\x1b[K", "\x1b"]
_LINES = [
    "(APIServer pid=1) INFO 03-02 10:00:00 [loggers.py:271] Engine 000: Avg prompt throughput: 12.0 tokens/s, "
    "Avg generation throughput: 9.1 tokens/s, Running: 1 reqs, Waiting: 0 reqs, GPU KV cache usage: 1.5%, "
    "Prefix cache hit rate: 0.0%",
    "(EngineCore pid=9) INFO 03-02 10:00:01 [nixl_connector.py:1] KV Transfer metrics: Num successful "
    "transfers=4, Avg xfer time (ms)=2.5",
    "Traceback (most recent call last):",
    '  File "/opt/vllm/vllm/v1/worker/gpu_model_runner.py", line 4420, in capture_model',
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB",
    "\x1b[2m2026-03-02T10:00:02.000000Z\x1b[0m \x1b[32m INFO\x1b[0m \x1b[2mdynamo_runtime\x1b[0m: request received",
    "plain noise line",
    "",
    "ERROR 03-02 10:00:03 [core.py:1] EngineCore failed to start.",
]


@st.composite
def _log(draw: st.DrawFn) -> bytes:
    out = []
    for _ in range(draw(st.integers(1, 40))):
        line = draw(st.sampled_from(_LINES))
        if line and draw(st.booleans()):   # an escape sequence somewhere, often inside a trigger word
            at = draw(st.integers(0, len(line)))
            line = line[:at] + draw(st.sampled_from(_SGR)) + line[at:]
        out.append(line + draw(st.sampled_from(["\n", "\r\n", "\n", "\r"])))
    text = "".join(out)
    if draw(st.booleans()):
        text = text.rstrip("\n")
    return text.encode()


@settings(max_examples=50, deadline=None)
@given(data=_log(), block=st.integers(16, 4096))
def test_generated_blocks(data: bytes, block: int) -> None:
    mp = pytest.MonkeyPatch()
    try:
        plain, fast = _both(data, block, mp)
    finally:
        mp.undo()
    assert fast == plain


def _frame(block: bytes, first_line: int, use: bool) -> tuple:
    saved = blockframe.USE_PREFILTER, blockframe.PREFILTER_MIN_BYTES, blockframe.PREFILTER_MAX_STATS_SHARE
    blockframe.USE_PREFILTER, blockframe.PREFILTER_MIN_BYTES, blockframe.PREFILTER_MAX_STATS_SHARE = use, 0, float("inf")
    try:
        rows, stats, kv, c, lines = blockframe.block_frame(block, first_line)
    finally:
        blockframe.USE_PREFILTER, blockframe.PREFILTER_MIN_BYTES, blockframe.PREFILTER_MAX_STATS_SHARE = saved
    return rows, stats.rows(), kv.rows(), c.lines, c.candidates, c.unclassified, c.last, lines.tail


@settings(max_examples=40, deadline=None)
@given(data=_log())
def test_unsampled_blocks_are_never_split(data: bytes) -> None:
    """Past the classified head and between the sampled windows, an escape-free block is scanned as bytes
    only, and the candidate frame is the polars path's."""
    far = CLASSIFY_HEAD + CLASSIFY_EVERY + CLASSIFY_WINDOW + 10
    assert _frame(data, far, True) == _frame(data, far, False)
    clean = data.replace(b"\x1b", b"")
    want = _frame(clean, far, False)
    split = prefilter.split_lines

    def no_split(block: bytes) -> None:
        raise AssertionError("an unsampled escape-free block was split")

    prefilter.split_lines = no_split
    try:
        got = _frame(clean, far, True)
    finally:
        prefilter.split_lines = split
    assert got[:-1] == want[:-1]   # (the tail lines are read without a split, and equal too)
    assert got[-1] == want[-1]
