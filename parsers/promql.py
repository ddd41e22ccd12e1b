"""The PromQL side: what diag asks a Prometheus server (diag.prom) for the same stats rows.

:func:`server_queries` computes every stats field, KV signal and latency quantile on the server
(the names of :mod:`parsers.prom_vocab`), :func:`choose_step` keeps a range query within the server's
points limit, :func:`parse_duration` reads Prometheus durations.
"""

from __future__ import annotations

import math
import re

from .histogram import FALLBACK as LATENCY_FALLBACK
from .histogram import QUANTILES, column
from .prom_vocab import (
    ALIASES,
    COUNTS,
    DEPLOYMENT_LABEL,
    DYNAMO_FIELDS,
    ENGINE_LABELS,
    FIELDS,
    INDEX_LABELS,
    LATENCY,
    ROLE_LABELS,
    member_of,
)

__all__ = ["GROUP_LABELS", "MAX_POINTS", "choose_step", "combine_vectors", "counter_selector", "parse_duration",
           "server_queries"]

MAX_POINTS = 11000  # Prometheus refuses a range query with more points per series

_DUR = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h|d|w|y)")
_UNIT = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800, "y": 31536000}


def parse_duration(text: str) -> float:
    """Seconds in a Prometheus duration (``15s``, ``1m30s``, ``500ms``) or a plain number."""
    try:
        return float(text)
    except ValueError:
        pass
    parts = _DUR.findall(text)
    if not parts or "".join(a + b for a, b in parts) != text.strip():
        raise ValueError(f"not a duration: {text!r}")
    return sum(float(a) * _UNIT[b] for a, b in parts)


def choose_step(span_s: float, min_step_s: float, max_points: int = MAX_POINTS) -> float:
    """The smallest step >= ``min_step_s`` that keeps a range query within ``max_points`` per series."""
    need = span_s / max_points if span_s > 0 else 0.0
    step = max(min_step_s, need, 0.001)
    if step == need:  # whole milliseconds, rounded up, so (end-start)/step stays within the limit
        step = math.ceil(step * 1000) / 1000
    return step


def _dur(seconds: float) -> str:
    return f"{max(1, round(seconds * 1000))}ms"


# the labels a pushed-down query keeps: what names an endpoint (:func:`series_endpoint`) and the engine
GROUP_LABELS = tuple(dict.fromkeys(("instance", *ENGINE_LABELS, *ROLE_LABELS, *INDEX_LABELS, DEPLOYMENT_LABEL)))


def combine_vectors(how: str, label: str, parts: list[str]) -> str:
    """PromQL: ``max``/``sum`` of vectors that may each be absent: each part tagged by ``label``, the union
    taken with ``or``, then aggregated without the tag (series of one engine pair up)."""
    if len(parts) == 1:
        return parts[0]
    tagged = " or ".join(f'label_replace({e}, "{label}", "{i}", "__name__", ".*")' for i, e in enumerate(parts))
    return f"{how} without({label}) ({tagged})"


def counter_selector(member: str) -> str:
    """The series selector of a counter-group member: ``_total`` added (not to a histogram's ``_count``)."""
    name, need = member_of(member)
    sel = f'{{{need[0]}="{need[1]}"}}' if need else ""
    return f"{name if name.endswith('_count') else name + '_total'}{sel}"


def server_queries(window_s: float) -> dict[str, str]:
    """PromQL per stats field, summed by endpoint and engine (:data:`GROUP_LABELS`) on the server: gauges
    with old names as ``or`` fallbacks, counters as ``rate()`` over ``window_s`` (per second;
    preemptions and the KV signals are turned into per-step counts by the caller), latency quantiles per
    :data:`parsers.histogram.COLUMNS` as ``histogram_quantile`` of the buckets' ``irate()``."""
    old_of: dict[str, list[str]] = {}
    for old, new in ALIASES.items():
        old_of.setdefault(new, []).append(old)
    w = _dur(window_s)
    by = f"sum by({', '.join(GROUP_LABELS)})"
    out = {}
    fallback = {metric for _, sources in DYNAMO_FIELDS.values() for metric, _ in sources}
    for fname, (kind, sources) in FIELDS.items():
        parts: dict[bool, list[str]] = {False: [], True: []}   # the engines' series, Dynamo's
        for metric, need in sources:
            for name in (metric, *old_of.get(metric, [])):
                sel = f'{{{need[0]}="{need[1]}"}}' if need else ""
                if kind == "gauge":
                    parts[metric in fallback].append(f"{by} ({name}{sel})")
                else:
                    parts[metric in fallback].append(f"{by} (rate({name}_total{sel}[{w}]))")
        engine, dynamo = " or ".join(parts[False]), " or ".join(parts[True])
        # Dynamo's series only where an instance has no engine one (they name the engine differently)
        out[fname] = f"{engine} or (({dynamo}) unless on(instance) ({engine}))" if engine and dynamo else engine or dynamo
    # KV signals (per second, turned into per-step counts by the caller): the groups of KV_SIGNALS
    for signal, groups in COUNTS.items():
        out[signal] = combine_vectors("sum", "diag_group", [combine_vectors("max", "diag_counter", [
            f"{by} (rate({counter_selector(m)}[{w}]))" for m in group]) for group in groups])
    # latency quantiles: the server's histogram_quantile over irate() of the buckets, the delta of the
    # last two scrapes (rate()'s extrapolation clamps each bucket series to zero on its own, which
    # bends the quantiles; irate is the per-interval bucket delta every other source uses)
    by_le = f"sum by(le, {', '.join(GROUP_LABELS)})"
    for key, families in LATENCY.items():
        names = (*(n for family in families for n in (family, *old_of.get(family, []))),
                 *(f for f, k in LATENCY_FALLBACK.items() if k == key))
        for q in QUANTILES:
            out[column(key, q)] = " or ".join(f"histogram_quantile({q}, {by_le} (irate({name}_bucket[{w}])))"
                                              for name in names)
    return out
