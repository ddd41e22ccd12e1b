"""Prometheus histograms -> latency quantiles per interval (pure): one implementation for every source.

An engine exports its request latencies as cumulative histograms (TTFT, inter-token latency,
end-to-end latency, queue time). A scrape holds, per bucket upper bound ``le``, the number of
observations since the process started; the distribution of one interval is the difference of two
consecutive scrapes (:func:`bucket_delta`), and its quantiles follow Prometheus' ``histogram_quantile``
(:func:`quantile`): linear interpolation inside the bucket that holds the rank, the first bucket starting
at 0, a rank in the ``+Inf`` bucket answered with the largest finite bound, no observations -> None.

A scrape whose counts went down, or whose buckets changed, follows a restart: the interval's
observations are the new counts (a reset counts for the whole histogram, the process restarted).

:data:`KEYS` names the latencies diag reads (the engines' histograms of each are
:data:`parsers.prom_vocab.LATENCY`, Dynamo's :data:`FALLBACK`), :data:`COLUMNS` the run model's columns
``<key>_p<q>_s``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

__all__ = ["COLUMNS", "FALLBACK", "KEYS", "QUANTILES", "Buckets", "bucket_delta", "buckets", "column", "interval_quantiles",
           "quantile"]

# the run model's latency keys; each engine maps them onto its histograms (:data:`parsers.prom_vocab.LATENCY`)
KEYS = ("ttft", "itl", "e2e", "queue")
# the same latencies as Dynamo's frontend measures them (ai-dynamo 1.6 prometheus_names.py frontend_service),
# read where no engine histogram of the key is present
FALLBACK: dict[str, str] = {
    "dynamo_frontend_time_to_first_token_seconds": "ttft",
    "dynamo_frontend_inter_token_latency_seconds": "itl",
    "dynamo_frontend_request_duration_seconds": "e2e",
}
QUANTILES = (0.5, 0.9, 0.99)

Buckets = tuple[tuple[float, float], ...]  # (upper bound le, cumulative count), ascending le, +Inf last


def column(key: str, q: float) -> str:
    """The run model's column of one quantile: ``ttft_p90_s``."""
    return f"{key}_p{round(q * 100)}_s"


COLUMNS = tuple(column(k, q) for k in KEYS for q in QUANTILES)


def parse_le(text: str) -> float:
    """A bucket bound as exposed (``0.5``, ``+Inf``). Raises ValueError."""
    return math.inf if text.strip() in ("+Inf", "Inf", "inf") else float(text)


def buckets(pairs: Iterable[tuple[float, float]]) -> Buckets:
    """(le, cumulative count) pairs in any order -> :data:`Buckets` (a repeated bound keeps its last)."""
    return tuple(sorted(dict(pairs).items()))


def bucket_delta(prev: Buckets | None, cur: Buckets) -> Buckets | None:
    """The observations between two cumulative scrapes of one histogram (None without a previous one);
    after a reset (a count went down, the bounds changed) the new counts themselves."""
    if prev is None:
        return None
    if [le for le, _ in prev] != [le for le, _ in cur] or any(c < p for (_, p), (_, c) in zip(prev, cur, strict=True)):
        return cur
    return tuple((le, c - p) for (le, p), (_, c) in zip(prev, cur, strict=True))


def quantile(q: float, b: Buckets) -> float | None:
    """The ``q`` quantile of a cumulative histogram, as Prometheus' ``histogram_quantile`` computes it;
    None without observations or without a ``+Inf`` bucket."""
    if len(b) < 2 or not math.isinf(b[-1][0]):
        return None
    counts, top = [], 0.0
    for _, c in b:  # Prometheus forces cumulative counts to be monotonic
        top = max(top, c)
        counts.append(top)
    total = counts[-1]
    if total <= 0:
        return None
    rank = q * total
    i = next((i for i, c in enumerate(counts[:-1]) if c >= rank), len(b) - 1)
    if i == len(b) - 1:
        return b[-2][0]
    if i == 0 and b[0][0] <= 0:
        return b[0][0]
    start, below = (b[i - 1][0], counts[i - 1]) if i > 0 else (0.0, 0.0)
    if counts[i] <= below:  # q = 0 on an empty first bucket
        return start
    return start + (b[i][0] - start) * (rank - below) / (counts[i] - below)


def interval_quantiles(prev: dict[str, Buckets] | None, cur: dict[str, Buckets]) -> dict[str, float]:
    """The :data:`COLUMNS` values of one interval from two scrapes' histograms (key -> buckets); only
    the quantiles that have observations."""
    out: dict[str, float] = {}
    for key, now in cur.items():
        delta = bucket_delta((prev or {}).get(key), now)
        if delta is None:
            continue
        for q in QUANTILES:
            v = quantile(q, delta)
            if v is not None:
                out[column(key, q)] = v
    return out
