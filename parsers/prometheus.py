"""Prometheus exposition text -> vLLM engine samples -> :class:`StatsSample` rows (pure, no I/O).

* :func:`parse_exposition` parses ``/metrics`` text with ``prometheus_client``'s parser after
  :func:`clean_exposition` has undone markdown pastes (``> `` quoting, the ``#`` of HELP/TYPE lost,
  code fences). Bad text raises :class:`ExpositionError` (a ``ValueError``) with one line.
* Metric names are handled as data: counters lose ``_total``, ``_created`` series are ignored
  (they are creation timestamps, not counts), and :data:`ALIASES` maps renamed metrics to their
  current names (vllm-formats.md §3.3). :data:`FIELDS` says which metric feeds which stats field.
* :class:`StatsConverter` turns successive scrapes of one endpoint into one ``StatsSample(variant=
  "prom")`` per engine (``engine`` label) per scrape (and a Prometheus server's computed values into the
  same rows, :meth:`StatsConverter.from_rates`): gauges as they are (KV 0..1 -> percent),
  counters as per-interval rates (tok/s), deltas (preemptions) and hit ratios (prefix and external
  prefix cache, percent of queried tokens in the interval), a counter that went down
  counting as reset (the increase since the reset is its new value), and the latency histograms
  (``_bucket`` series) as per-interval quantiles from bucket deltas (:mod:`parsers.histogram`). A
  scrape only sets the baseline for an engine whose counters have no previous value, so every row
  has its rates.
* :func:`read_capture` reads srt-slurm's ``raw_prometheus.jsonl`` (srt-dynamo.md §3.1):
  one scrape per line ``{timestamp_ns, endpoint_url, role, worker_id, text}``.
* :func:`choose_step` and :func:`server_queries` hold the PromQL side (same FIELDS and ALIASES).

The module is long because it holds the one metric vocabulary (fields, KV signals, endpoint roles) that
the scrape, capture and server paths and the exported rules all read.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Container, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlsplit

from prometheus_client.parser import text_string_to_metric_families

from .columns import KV_VALUE_KEYS
from .histogram import COLUMNS as LATENCY_COLUMNS
from .histogram import FALLBACK as LATENCY_FALLBACK
from .histogram import LATENCY, QUANTILES, Buckets, buckets, column, interval_quantiles, parse_le
from .records import KVExpiry, KVTransfer, Record, RequestCounts, StatsSample

__all__ = [
    "ALIASES", "BACKEND", "COUNTED_METRICS", "COUNTS", "DEPLOYMENT_LABEL", "ENGINE_LABELS", "FIELDS", "GROUP_LABELS",
    "KV_COUNTS", "MAX_POINTS", "REQUEST_COUNTS", "CaptureRow", "ExpositionError", "PromSample", "StatsConverter",
    "backend_role", "canonical", "choose_step", "clean_exposition", "combine_vectors", "count_records", "counter_selector",
    "engine_counters", "engine_histograms", "engine_label", "engine_values", "hit_rate", "iter_capture", "member_of",
    "parse_duration", "parse_exposition", "prefill_deployments", "read_capture", "role_from_samples",
    "role_of_label", "scrapes_to_stats", "series_endpoint", "server_queries", "signal_increase", "worker_of",
]

VARIANT = "prom"
MAX_POINTS = 11000  # Prometheus refuses a range query with more points per series

# old name -> current name (vllm-formats.md §3.3); names without the counter suffix
ALIASES: dict[str, str] = {
    "vllm:gpu_cache_usage_perc": "vllm:kv_cache_usage_perc",
    "vllm:gpu_prefix_cache_queries": "vllm:prefix_cache_queries",
    "vllm:gpu_prefix_cache_hits": "vllm:prefix_cache_hits",
    "vllm:time_per_output_token_seconds": "vllm:inter_token_latency_seconds",
}

# stats field -> (kind, sources in priority order: (current metric name, required label or None)).
# Since 2026-02 the log's "Avg prompt throughput" counts locally computed tokens only: the
# ``prompt_tokens_by_source{source="local_compute"}`` counter matches it; ``prompt_tokens`` counts all.
# Dynamo's own series come after vLLM's (ai-dynamo 1.6 prometheus_names.py, common/utils/prometheus.py):
# a worker's ``dynamo_component_gpu_cache_usage_percent`` (0..1, per ``dp_rank``), a frontend's
# in-flight and queued requests, so a capture without vllm: series still has its endpoints' load.
FIELDS: dict[str, tuple[str, tuple[tuple[str, tuple[str, str] | None], ...]]] = {
    "running": ("gauge", (("vllm:num_requests_running", None), ("dynamo_frontend_inflight_requests", None))),
    "waiting": ("gauge", (("vllm:num_requests_waiting", None), ("dynamo_frontend_queued_requests", None))),
    "kv": ("gauge", (("vllm:kv_cache_usage_perc", None), ("dynamo_component_gpu_cache_usage_percent", None))),
    "prompt": ("counter", (("vllm:prompt_tokens_by_source", ("source", "local_compute")),
                           ("vllm:prompt_tokens", None))),
    "gen": ("counter", (("vllm:generation_tokens", None),)),
    "preempt": ("counter", (("vllm:num_preemptions", None),)),
    "prefix_q": ("counter", (("vllm:prefix_cache_queries", None),)),
    "prefix_h": ("counter", (("vllm:prefix_cache_hits", None),)),
    "ext_q": ("counter", (("vllm:external_prefix_cache_queries", None),)),
    "ext_h": ("counter", (("vllm:external_prefix_cache_hits", None),)),
    # waiting split (vLLM >= 0.31, v1/metrics/loggers.py): ``deferred`` is the log's "Deferred: N reqs"
    # (skipped: KV transfer, LoRA budget, blocked), ``capacity`` the rest; a P/D decode engine's (KV
    # consumer, 0.33) KV loads by stage are the log's "KV fetch: N waiting to start, N in progress, ..."
    "deferred": ("gauge", (("vllm:num_requests_waiting_by_reason", ("reason", "deferred")),)),
    **{f"kv_fetch_{key}": ("gauge", (("vllm:num_requests_kv_fetch_by_stage", ("stage", stage)),))
       for key, stage in (("waiting", "waiting_to_start"), ("running", "in_progress"), ("done", "completed_waiting"))},
}
COUNTERS = tuple(k for k, (kind, _) in FIELDS.items() if kind == "counter")

# P/D KV-connector failure counters (counters without ``_total``), per signal: groups whose
# increases add up, each group's members overlapping (the group counts its largest increase).
# NIXL: up to vLLM 0.30 ``nixl_num_failed_transfers`` and ``nixl_num_failed_notifications`` were
# disjoint; since 0.31 (nixl/stats.py) failed transfers include handshake and notification failures
# and notifications are also counted on their own. The largest of the two is exact since 0.31 and
# still sees every failed interval before it (a lower bound on the count), without a version.
# Mooncake (vLLM >= 0.33, mooncake/stats.py): failed transfers and failed receives are disjoint.
KV_SIGNALS: dict[str, tuple[tuple[str, ...], ...]] = {
    "kv_failures": (("vllm:nixl_num_failed_transfers", "vllm:nixl_num_failed_notifications"),
                    ("vllm:mooncake_num_failed_transfers",), ("vllm:mooncake_num_failed_recvs",)),
    "kv_expiry": (("vllm:nixl_num_kv_expired_reqs",), ("vllm:mooncake_num_kv_expired_reqs",)),
}
# what the Python paths count besides the exported signals: successful transfers, one observation of the
# connector's transfer-time histogram each (nixl/stats.py, mooncake/stats.py observe every transfer_duration)
KV_COUNTS: dict[str, tuple[tuple[str, ...], ...]] = {
    **KV_SIGNALS,
    "kv_transfers": (("vllm:nixl_xfer_time_seconds_count",), ("vllm:mooncake_xfer_time_seconds_count",)),
}
# Dynamo's request counters (ai-dynamo 1.6 prometheus_names.py): the frontend's ``requests_total``
# (``status`` success|error) and ``failures_total`` (terminal failures: the same failed requests, so one
# group), a worker's ``dynamo_component_requests_total`` and ``errors_total`` (per ``error_type``).
# A member ``name{label="value"}`` counts that label value's series only.
REQUEST_COUNTS: dict[str, tuple[tuple[str, ...], ...]] = {
    "requests": (("dynamo_frontend_requests",), ("dynamo_component_requests",)),
    "request_errors": (('dynamo_frontend_requests{status="error"}', "dynamo_frontend_failures"),
                       ("dynamo_component_errors",)),
}
COUNTS = {**KV_COUNTS, **REQUEST_COUNTS}   # every counter signal the Python paths turn into records
_MEMBER = re.compile(r'^([^{]+)(?:\{(\w+)="([^"]*)"\})?$')


def member_of(member: str) -> tuple[str, tuple[str, str] | None]:
    """(metric, required (label, value) or None) of a counter-group member."""
    m = _MEMBER.match(member)
    assert m, member
    return m[1], (m[2], m[3]) if m[2] else None


COUNTED_METRICS = {member_of(m)[0] for groups in COUNTS.values() for group in groups for m in group}


class ExpositionError(ValueError):
    """Text that is not Prometheus exposition format; the message is one line."""


@dataclass(frozen=True, slots=True)
class PromSample:
    """One sample: ``name`` as exposed, ``metric`` its current name (no ``_total``, aliases applied),
    ``legacy`` when ``metric`` came from an old alias."""

    name: str
    metric: str
    labels: dict[str, str]
    value: float
    type: str
    legacy: bool = False


def canonical(name: str) -> tuple[str, bool] | None:
    """(current metric name, renamed?) of a sample name; None for ``_created`` series."""
    if name.endswith("_created"):
        return None
    base = name[:-6] if name.endswith("_total") else name
    new = ALIASES.get(base)
    return (new, True) if new else (base, False)


_NEEDS_CLEAN = re.compile(r"^(?:[ \t]*>|[ \t]+\S|HELP |TYPE |```)", re.M)
_QUOTE = re.compile(r"^(?:[ \t]*>[ \t]?)+")


def clean_exposition(text: str) -> str:
    """Undo markdown pastes: ``> `` quoting, ``HELP``/``TYPE`` without ``#``, fences, indentation, CR."""
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    if not _NEEDS_CLEAN.search(text):
        return text
    out = []
    for line in text.split("\n"):
        line = _QUOTE.sub("", line).strip()
        if line.startswith("```"):
            continue
        if line.startswith(("HELP ", "TYPE ")):
            line = "# " + line
        out.append(line)
    return "\n".join(out)


def _bad_line(text: str) -> tuple[int, str, str] | None:
    """The first line the parser rejects on its own: (1-based number, line, error)."""
    for n, line in enumerate(text.split("\n"), 1):
        if not line.strip():
            continue
        try:
            list(text_string_to_metric_families(line + "\n"))
        except Exception as e:  # the parser raises ValueError, IndexError, KeyError...
            return n, line, str(e).splitlines()[0] if str(e) else type(e).__name__
    return None


def family_names() -> set[str]:
    """Every metric family diag reads (FIELDS and the LATENCY histograms), current and old names."""
    names = {m for _, srcs in FIELDS.values() for m, _ in srcs} | set(LATENCY.values()) | set(LATENCY_FALLBACK)
    names |= COUNTED_METRICS
    return names | {old for old, new in ALIASES.items() if new in names}


_FIELD_LINES = re.compile(
    r"^(?:# (?:HELP|TYPE) )?(?:" + "|".join(re.escape(n) for n in sorted(family_names(), key=len, reverse=True))
    + r")(?:_total|_bucket)?[{ \t].*$", re.M)


def parse_exposition(text: str, *, fields_only: bool = False) -> list[PromSample]:
    """Every sample of an exposition (``_created`` series dropped). Raises ExpositionError.

    ``fields_only`` keeps only the lines of the FIELDS metrics before parsing (a full vLLM scrape
    is mostly histograms): much faster on large captures."""
    clean = clean_exposition(text)
    if fields_only:
        clean = "\n".join(m.group() for m in _FIELD_LINES.finditer(clean)) + "\n"
    try:
        families = list(text_string_to_metric_families(clean))
    except Exception as e:
        bad = _bad_line(clean)
        if bad:
            n, line, why = bad
            raise ExpositionError(f"not Prometheus text: line {n} {line[:80]!r}: {why}") from None
        raise ExpositionError(f"not Prometheus text: {str(e).splitlines()[0] if str(e) else e!r}") from None
    out = []
    for fam in families:
        for s in fam.samples:
            canon = canonical(s.name)
            if canon is None:
                continue
            out.append(PromSample(s.name, canon[0], dict(s.labels), float(s.value), fam.type, canon[1]))
    return out


ENGINE_LABELS = ("engine", "dp_rank")   # vLLM's engine index; Dynamo's component gauges: the DP rank


def engine_label(labels: Mapping[str, str]) -> str | None:
    """The engine a series belongs to (:data:`ENGINE_LABELS`); None for an endpoint-wide series."""
    return next((labels[k] for k in ENGINE_LABELS if k in labels), None)


def engine_values(samples: Iterable[PromSample]) -> dict[str | None, dict[str, float]]:
    """Per ``engine`` label (None when absent): the FIELDS values present, best source first."""
    rank: dict[tuple[str | None, str], tuple[int, bool]] = {}
    out: dict[str | None, dict[str, float]] = {}
    for s in samples:
        for fname, (_, sources) in FIELDS.items():
            for pos, (metric, need) in enumerate(sources):
                if s.metric != metric or (need and s.labels.get(need[0]) != need[1]):
                    continue
                eng = engine_label(s.labels)
                r = (pos, s.legacy)
                if rank.get((eng, fname), (99, True)) > r:
                    rank[(eng, fname)] = r
                    out.setdefault(eng, {})[fname] = s.value
    return out


_LATENCY_KEY = {family: key for key, family in LATENCY.items()}


def engine_histograms(samples: Iterable[PromSample]) -> dict[str | None, dict[str, Buckets]]:
    """Per engine (:func:`engine_label`): the LATENCY histograms present (:data:`parsers.histogram.LATENCY`
    key -> cumulative buckets), label sets of one engine summed; the current name preferred over an old
    one, vLLM's over Dynamo's (:data:`parsers.histogram.FALLBACK`)."""
    acc: dict[tuple[str | None, str, int], dict[float, float]] = {}
    for s in samples:
        if not s.name.endswith("_bucket") or "le" not in s.labels:
            continue
        canon = canonical(s.name.removesuffix("_bucket"))
        if canon is None:
            continue
        key = _LATENCY_KEY.get(canon[0]) or LATENCY_FALLBACK.get(canon[0])
        if key is None:
            continue
        try:
            le = parse_le(s.labels["le"])
        except ValueError:
            continue
        rank = 2 if canon[0] in LATENCY_FALLBACK else int(canon[1])
        counts = acc.setdefault((engine_label(s.labels), key, rank), {})
        counts[le] = counts.get(le, 0.0) + s.value
    out: dict[str | None, dict[str, Buckets]] = {}
    for (eng, key, _), counts in sorted(acc.items(), key=lambda kv: kv[0][2], reverse=True):
        out.setdefault(eng, {})[key] = buckets(counts.items())  # the preferred names last: they win
    return out


# ---------------------------------------------------------------- endpoint roles
# The one mapping from labels to an endpoint's (role, worker index): the series of a scrape, of a
# Prometheus server (diag.prom) and the exported recording rules (rules.promrules) all read it.

ROLE_LABELS = ("dynamo_component", "worker_role", "role", "worker_type", "job")  # the first that names a role wins
INDEX_LABELS = ("worker_index", "worker", "job")   # the first with a trailing number (a role label: of that role)
ROLE_WORDS = ("prefill", "decode", "frontend", "agg")   # a label value names the first one it contains
# Dynamo's vLLM worker is component ``prefill`` in prefill mode and ``backend`` otherwise (ai-dynamo 1.6
# dynamo/vllm/args.py): ``backend`` is a decode worker beside a prefill component of its deployment, an
# aggregated one without; it yields to any other label that names a role.
BACKEND = "backend"
ROLE_ALIASES = {"dynamo_component": {"backend": BACKEND}}
DEPLOYMENT_LABEL = "dynamo_namespace"   # one deployment (a run); series without it: one deployment ""
WORKER_NUMBER = r"(?:.*[-_])?w?([0-9]+)"           # ``decode-w1``, ``prefill_3``, ``2``: the worker index
_WORKER_NUMBER = re.compile(WORKER_NUMBER)


def role_of_label(value: str | None, label: str | None = None) -> str | None:
    """The role a label value names: prefill | decode | agg | frontend, or :data:`BACKEND` (None: unknown).
    ``label``: the label it is the value of (:data:`ROLE_ALIASES`)."""
    v = (value or "").lower()
    for word in ROLE_WORDS:
        if word in v:
            return word
    return ROLE_ALIASES.get(label or "", {}).get(v)


def backend_role(with_prefill: bool) -> str:
    """What a :data:`BACKEND` worker is: decode when its deployment has a prefill component, else agg."""
    return "decode" if with_prefill else "agg"


def _series_role(labels: Mapping[str, str]) -> str | None:
    """The role the first of :data:`ROLE_LABELS` naming one gives; :data:`BACKEND` only when none other does."""
    roles = [r for key in ROLE_LABELS if (r := role_of_label(labels.get(key), key))]
    return next((r for r in roles if r != BACKEND), roles[0] if roles else None)


def prefill_deployments(label_sets: Iterable[Mapping[str, str]]) -> set[str]:
    """The deployments (:data:`DEPLOYMENT_LABEL` values, "" without one) that have a prefill series."""
    return {ls.get(DEPLOYMENT_LABEL, "") for ls in label_sets if _series_role(ls) == "prefill"}


def series_endpoint(labels: Mapping[str, str], with_prefill: Container[str] = ()) -> tuple[str, int | None]:
    """(role, index or None) of one series: the role from the first of :data:`ROLE_LABELS` that names
    one (:data:`BACKEND`: decode when its deployment is in ``with_prefill``, see
    :func:`prefill_deployments`, else agg), the index from the first of :data:`INDEX_LABELS` with a
    trailing number (``job`` only when it names that role); ``unknown`` without a role label."""
    role = _series_role(labels)
    if role is None:
        return "unknown", None
    if role == BACKEND:
        role = backend_role(labels.get(DEPLOYMENT_LABEL, "") in with_prefill)
    for ikey in INDEX_LABELS:
        m = _WORKER_NUMBER.fullmatch(labels.get(ikey) or "")
        if m and (ikey not in ROLE_LABELS or role_of_label(labels.get(ikey), ikey) == role):
            return role, int(m.group(1))
    return role, None


def role_from_samples(samples: Iterable[PromSample], with_prefill: bool = False) -> str | None:
    """An endpoint's role from the labels of its scrape: the first of :data:`ROLE_LABELS` whose values
    name exactly one role, Dynamo frontend metrics right after the component label (a frontend exposes
    per-worker gauges of both ``worker_type`` values); :data:`BACKEND` only when no other label names a
    role, then :func:`backend_role` (``with_prefill``: the scrape set has a prefill endpoint)."""
    values: dict[str, set[str]] = {label: set() for label in ROLE_LABELS}
    frontend = False
    for s in samples:
        for label in ROLE_LABELS:
            if label in s.labels:
                values[label].add(s.labels[label])
        frontend = frontend or s.name.startswith("dynamo_frontend_")
    backend = False
    for label in ROLE_LABELS:
        roles = {r for v in values[label] if (r := role_of_label(v, label))}
        backend = backend or roles == {BACKEND}
        roles.discard(BACKEND)
        if len(roles) == 1:
            return roles.pop()
        if label == ROLE_LABELS[0] and frontend:
            return "frontend"
    return backend_role(with_prefill) if backend else None


def _engine_int(label: str | None) -> int | None:
    m = re.search(r"\d+", label or "")
    return int(m.group()) if m else None


_COUNTED = [m for groups in COUNTS.values() for group in groups for m in group]


@dataclass
class StatsConverter:
    """Successive scrapes of one endpoint -> ``StatsSample`` rows (see the module docstring).
    ``baseline_rows``: a baseline scrape still yields its gauges (rates None), for single snapshots."""

    baseline_rows: bool = False
    resets: int = 0
    _prev: dict[str | None, tuple[datetime, dict[str, float], dict[str, Buckets]]] = field(default_factory=dict)
    _kv_prev: dict[str | None, tuple[datetime, dict[str, float]]] = field(default_factory=dict)

    def add(self, ts: datetime, samples: Iterable[PromSample], line: int) -> list[Record]:
        """The rows of one scrape: a ``StatsSample`` per engine, and the KV-transfer failures and lease
        expiries counted since the previous scrape as the logs' records (:func:`kv_records`)."""
        samples = list(samples)
        out: list[Record] = list(self._stats(ts, samples, line))
        for eng, cur in engine_counters(samples, _COUNTED).items():
            prev = self._kv_prev.get(eng)
            if prev is not None and (ts - prev[0]).total_seconds() <= 0:
                continue
            self._kv_prev[eng] = (ts, cur)
            if prev is not None:
                out.extend(count_records(line, ts, {signal: signal_increase(groups, prev[1], cur)
                                                    for signal, groups in COUNTS.items()}))
        return out

    def _stats(self, ts: datetime, samples: list[PromSample], line: int) -> list[StatsSample]:
        out = []
        hists = engine_histograms(samples)
        for eng, vals in sorted(engine_values(samples).items(), key=lambda kv: (kv[0] is None, kv[0] or "")):
            prev = self._prev.get(eng)
            if prev is not None and (ts - prev[0]).total_seconds() <= 0:
                continue  # a repeated or out-of-order scrape says nothing new
            self._prev[eng] = (ts, vals, hists.get(eng, {}))
            counters = [c for c in COUNTERS if c in vals]
            baseline = counters and (prev is None or not any(c in prev[1] for c in counters))
            if baseline and not self.baseline_rows:
                continue  # baseline only
            rates: dict[str, float] = {}
            latency = interval_quantiles(prev[2], hists.get(eng, {})) if prev is not None else {}
            if prev is not None:
                dt = (ts - prev[0]).total_seconds()
                for c in counters:
                    if c in prev[1]:
                        delta = vals[c] - prev[1][c]
                        if delta < 0:
                            self.resets += 1
                            delta = vals[c]
                        rates[c] = delta if c == "preempt" else delta / dt
            out.append(_sample(line, ts, eng, vals, rates, latency))
        return out

    @staticmethod
    def from_rates(ts: datetime, line: int, engine: str | None, values: Mapping[str, Any],
                   step_s: float) -> StatsSample:
        """The row of values a Prometheus server computed over one ``step_s`` step (:func:`server_queries`):
        gauges, counters as per-second rates (preemptions become the step's count), latency quantiles."""
        vals = {k: float(v) for k in (*FIELDS, *LATENCY_COLUMNS) if (v := values.get(k)) is not None and v == v}
        rates = {c: vals[c] * (step_s if c == "preempt" else 1.0) for c in COUNTERS if c in vals}
        latency = {c: vals[c] for c in LATENCY_COLUMNS if c in vals}
        return _sample(line, ts, engine, vals, rates, latency)


def engine_counters(samples: Iterable[PromSample], members: Iterable[str]) -> dict[str | None, dict[str, float]]:
    """Per engine (:func:`engine_label`): the value of each counter-group member present
    (:func:`member_of`), label sets summed."""
    by_metric: dict[str, list[tuple[str, tuple[str, str] | None]]] = {}
    for m in members:
        name, need = member_of(m)
        by_metric.setdefault(name, []).append((m, need))
    out: dict[str | None, dict[str, float]] = {}
    for s in samples:
        for m, need in by_metric.get(s.metric, ()):
            if need is None or s.labels.get(need[0]) == need[1]:
                vals = out.setdefault(engine_label(s.labels), {})
                vals[m] = vals.get(m, 0.0) + s.value
    return out


def signal_increase(groups: tuple[tuple[str, ...], ...], prev: Mapping[str, float], cur: Mapping[str, float]) -> float:
    """A KV signal's increase between two scrapes of one engine (:data:`KV_SIGNALS`): the largest member
    increase of each group, summed over the groups; a counter that went down restarted from zero."""
    def delta(m: str) -> float:
        return cur[m] - prev[m] if cur[m] >= prev[m] else cur[m]
    return sum(max((delta(m) for m in group if m in cur and m in prev), default=0.0) for group in groups)


_TRANSFER_KEYS = {"kv_transfers": KV_VALUE_KEYS["transfers"][0], "kv_failures": KV_VALUE_KEYS["failed"][0]}


def count_records(line: int, ts: datetime | None, increases: Mapping[str, float]) -> list[Record]:
    """The records the increases of :data:`COUNTS` in an interval stand for: successful and failed KV
    transfers as a ``KV Transfer metrics`` row, each expired lease as a ``KVExpiry`` (``expired``), the
    requests finished and failed as ``RequestCounts``."""
    out: list[Record] = []
    counts = {key: float(round(increases.get(signal, 0.0))) for signal, key in _TRANSFER_KEYS.items()}
    if any(counts.values()):
        out.append(KVTransfer(line, connector=None, values=tuple(counts.items()), ts=ts))
    out.extend(KVExpiry(line, event="expired", ts=ts) for _ in range(round(increases.get("kv_expiry", 0.0))))
    requests, errors = (round(increases.get(k, 0.0)) for k in REQUEST_COUNTS)
    if requests or errors:
        out.append(RequestCounts(line, requests=max(requests, errors), errors=errors, ts=ts))
    return out


def _sample(line: int, ts: datetime, engine: str | None, gauges: Mapping[str, float], rates: Mapping[str, float],
            latency: Mapping[str, float]) -> StatsSample:
    """One ``StatsSample(variant="prom")`` from an engine's gauges (FIELDS names), per-interval counter rates
    (per second; ``preempt`` a count) and latency quantiles: KV 0..1 -> percent, hit ratios in percent."""
    return StatsSample(
        line, variant=VARIANT, engine=_engine_int(engine), ts=ts,
        prompt_tps=rates.get("prompt"), gen_tps=rates.get("gen"),
        running=_int(gauges.get("running")), waiting=_int(gauges.get("waiting")),
        preemptions=_int(rates.get("preempt")), deferred=_int(gauges.get("deferred")),
        kv_fetch_waiting=_int(gauges.get("kv_fetch_waiting")), kv_fetch_running=_int(gauges.get("kv_fetch_running")),
        kv_fetch_done=_int(gauges.get("kv_fetch_done")),
        kv_usage=None if "kv" not in gauges else gauges["kv"] * 100.0,
        prefix_hit=hit_rate(rates, "prefix"), ext_hit=hit_rate(rates, "ext"),
        latency=dict(latency) or None)


def hit_rate(rates: Mapping[str, float], which: str) -> float | None:
    """Percent of queried tokens that hit in the interval (``prefix`` or ``ext``); None without queries."""
    q, h = rates.get(f"{which}_q"), rates.get(f"{which}_h")
    return None if not q or h is None else 100.0 * h / q


def _int(x: float | None) -> int | None:
    return None if x is None or math.isnan(x) else round(x)


def scrapes_to_stats(scrapes: Iterable[tuple[datetime, int, list[PromSample]]]) -> list[Record]:
    """Rows of one endpoint's scrapes ``(ts, line, samples)``, taken in time order."""
    conv = StatsConverter()
    out: list[Record] = []
    for ts, line, samples in sorted(scrapes, key=lambda t: (t[0], t[1])):
        out.extend(conv.add(ts, samples, line))
    return out


# ---------------------------------------------------------------- raw_prometheus.jsonl

@dataclass(frozen=True, slots=True)
class CaptureRow:
    """One scrape of srt-slurm's capture; ``line`` is its 1-based line in the file."""

    line: int
    timestamp_ns: int
    endpoint_url: str
    role: str | None
    worker_id: str | None
    text: str

    @property
    def ts(self) -> datetime:
        return datetime.fromtimestamp(self.timestamp_ns / 1e9, tz=UTC)


def read_capture(lines: Iterable[str | bytes]) -> tuple[list[CaptureRow], list[str]]:
    """Rows of a capture, and one problem line per line that is not a scrape (torn, not JSON...)."""
    rows: list[CaptureRow] = []
    problems: list[str] = []
    for item in iter_capture(lines):
        (rows if isinstance(item, CaptureRow) else problems).append(item)  # type: ignore[arg-type]
    return rows, problems


def iter_capture(lines: Iterable[str | bytes]) -> Iterator[CaptureRow | str]:
    """Streaming :func:`read_capture`: a row, or a problem line, per non-blank line."""
    for n, raw in enumerate(lines, 1):
        line = raw.decode("utf-8", errors="replace") if isinstance(raw, bytes) else raw
        if not line.strip():
            continue
        try:
            d = json.loads(line)
            ts = int(d["timestamp_ns"])
            text = d["text"]
            if not isinstance(text, str):
                raise TypeError("text is not a string")
        except (ValueError, KeyError, TypeError) as e:
            yield f"line {n}: not a scrape record ({type(e).__name__}: {str(e)[:60]})"
            continue
        yield CaptureRow(n, ts, str(d.get("endpoint_url") or ""), d.get("role") or None,
                         d.get("worker_id") or None, text)


_WORKER_ID = re.compile(r"^(?P<role>[A-Za-z]+)_(?P<idx>\d+)(?:_(?P<node>.+))?$")


def worker_of(row: CaptureRow) -> tuple[str | None, int | None, str | None]:
    """(role, worker index, node) of a capture row: ``prefill_0_gb200-r09-n12``, ``frontend_0``; the
    node falls back to the endpoint URL's host."""
    m = _WORKER_ID.match(row.worker_id or "")
    role = role_of_label(row.role) or (role_of_label(m["role"]) if m else None) or row.role
    host = urlsplit(row.endpoint_url).hostname if row.endpoint_url else None
    return role, int(m["idx"]) if m else None, (m["node"] if m and m["node"] else host)


# ---------------------------------------------------------------- PromQL side

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
    for fname, (kind, sources) in FIELDS.items():
        parts = []
        for metric, need in sources:
            for name in (metric, *old_of.get(metric, [])):
                sel = f'{{{need[0]}="{need[1]}"}}' if need else ""
                if kind == "gauge":
                    parts.append(f"{by} ({name}{sel})")
                else:
                    parts.append(f"{by} (rate({name}_total{sel}[{w}]))")
        out[fname] = " or ".join(parts)
        dynamo = [p for p in parts if "(dynamo_" in p]
        if dynamo:  # Dynamo's series only where an instance has no vLLM one (they name the engine differently)
            vllm = " or ".join(p for p in parts if p not in dynamo)
            out[fname] = f"{vllm} or (({' or '.join(dynamo)}) unless on(instance) ({vllm}))"
    # KV signals (per second, turned into per-step counts by the caller): the groups of KV_SIGNALS
    for signal, groups in COUNTS.items():
        out[signal] = combine_vectors("sum", "diag_group", [combine_vectors("max", "diag_counter", [
            f"{by} (rate({counter_selector(m)}[{w}]))" for m in group]) for group in groups])
    # latency quantiles: the server's histogram_quantile over irate() of the buckets, the delta of the
    # last two scrapes (rate()'s extrapolation clamps each bucket series to zero on its own, which
    # bends the quantiles; irate is the per-interval bucket delta every other source uses)
    by_le = f"sum by(le, {', '.join(GROUP_LABELS)})"
    for key, family in LATENCY.items():
        names = (family, *old_of.get(family, []), *(f for f, k in LATENCY_FALLBACK.items() if k == key))
        for q in QUANTILES:
            out[column(key, q)] = " or ".join(f"histogram_quantile({q}, {by_le} (irate({name}_bucket[{w}])))"
                                              for name in names)
    return out
