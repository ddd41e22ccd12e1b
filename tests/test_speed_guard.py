"""A cheap guard against a large slowdown of the bulk path; not a timing test.

The bench (bench/run.py) measures speed. This only compares the bulk path with a plain Python
loop over the same few MB, in the same process, taking the best of a few rounds; the margin is
wide enough for a loaded machine and catches a ~3× regression (the ratio measured when this was
written is in the assertion message). Both sides are measured in CPU time of the process (every
thread): on a loaded machine a multi-threaded path waits for cores in wall time, a loop does not.
"""

from __future__ import annotations

import re
import time
from pathlib import Path

from diag.parsers.ingest import parse_blocks

from helpers import blocks_of

HEALTHY = Path(__file__).resolve().parents[1] / "samples" / "runs" / "healthy" / "logs"
MEASURED = 7.7   # diag / pyloop CPU time on this input when written (2 CPUs, polars 2.1)
_STATS = re.compile(r"Engine (\d+): Avg prompt throughput: ([\d.]+) tokens/s, Avg generation throughput: ([\d.]+)"
                    r" tokens/s, Running: (\d+) reqs, Waiting: (\d+) reqs.*?GPU KV cache usage: ([\d.]+)%")
_KV = re.compile(r"KV Transfer metrics: Num successful transfers=(\d+), Avg xfer time \(ms\)=([\d.]+)")


def _input() -> bytes:
    """A decode worker log repeated to ~8 MB: one contiguous log of the usual mix."""
    data = next(HEALTHY.glob("*decode_w0.out")).read_bytes()
    return data * max(1, (8 << 20) // len(data))


def _pyloop(text: str) -> int:
    n = 0
    for line in text.split("\n"):
        if "Avg prompt throughput" in line:
            n += len(_STATS.findall(line))
        elif "KV Transfer metrics" in line and _KV.search(line):
            n += 1
    return n


def _best(fn, rounds: int = 3) -> float:
    best = float("inf")
    for _ in range(rounds):
        t0 = time.process_time()
        fn()
        best = min(best, time.process_time() - t0)
    return best


def test_bulk_path_is_not_much_slower_than_a_python_loop() -> None:
    data = _input()
    parsed = parse_blocks(blocks_of(data, 4 << 20), year=2026)
    assert parsed.stats.height > 1000 and parsed.kv.height > 100
    diag_s = _best(lambda: parse_blocks(blocks_of(data, 4 << 20), year=2026))
    loop_s = _best(lambda: _pyloop(data.decode("utf-8", errors="replace")))
    ratio = diag_s / loop_s
    assert ratio < 3 * MEASURED, f"bulk path {diag_s:.3f} s vs Python loop {loop_s:.3f} s: {ratio:.1f}× " \
                                 f"(was {MEASURED}× when written)"
