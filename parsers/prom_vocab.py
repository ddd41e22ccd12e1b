"""The Prometheus metric vocabulary diag reads: metric names and the labels that name an endpoint.

* Metric names are data: counters lose ``_total``, ``_created`` series are ignored (they are
  creation timestamps, not counts), and :data:`ALIASES` maps renamed metrics to their current names
  (vllm-formats.md §3.3) (:func:`canonical`). :data:`FIELDS` says which metric feeds which stats field;
  :data:`KV_SIGNALS`, :data:`KV_COUNTS` and :data:`REQUEST_COUNTS` which counters make a signal.
* :data:`ENGINE_LABELS` and the endpoint roles (:func:`series_endpoint`) map a series' labels to its
  engine and its endpoint's (role, worker index).

The scrape and capture path (:mod:`parsers.prometheus`), the server path (:mod:`parsers.promql`,
diag.prom) and the exported rules (rules.promrules) all read this one vocabulary.
"""

from __future__ import annotations

import re
from collections.abc import Container, Iterable, Mapping

from .histogram import FALLBACK as LATENCY_FALLBACK
from .histogram import LATENCY

__all__ = [
    "ALIASES", "BACKEND", "COUNTED_METRICS", "COUNTERS", "COUNTS", "DEPLOYMENT_LABEL", "ENGINE_LABELS", "FIELDS",
    "INDEX_LABELS", "KV_COUNTS", "KV_SIGNALS", "REQUEST_COUNTS", "ROLE_ALIASES", "ROLE_LABELS", "ROLE_WORDS",
    "WORKER_NUMBER", "backend_role", "canonical", "engine_label", "family_names", "member_of", "prefill_deployments",
    "role_of_label", "series_endpoint",
]

# old name -> current name (vllm-formats.md §3.3); names without the counter suffix
ALIASES: dict[str, str] = {
    "vllm:gpu_cache_usage_perc": "vllm:kv_cache_usage_perc",
    "vllm:gpu_prefix_cache_queries": "vllm:prefix_cache_queries",
    "vllm:gpu_prefix_cache_hits": "vllm:prefix_cache_hits",
    "vllm:time_per_output_token_seconds": "vllm:inter_token_latency_seconds",
}

# stats field -> (kind, sources in priority order: (current metric name, required label or None)).
# Since 2026-02 the log's "Avg prompt throughput" counts locally computed tokens only: the
# ``prompt_tokens_by_source{source="local_compute"}`` counter matches it (vLLM 0.33 v1/metrics/loggers.py;
# the other sources are ``local_cache_hit`` and ``external_kv_transfer``); ``prompt_tokens`` counts every
# source, a P/D decode's transferred KV included, so it feeds ``prompt_all`` and the run model takes it as
# computed only where no KV arrives by transfer (rules.endpoints).
# Dynamo's own series come after vLLM's (ai-dynamo 1.6 prometheus_names.py, common/utils/prometheus.py):
# a worker's ``dynamo_component_gpu_cache_usage_percent`` (0..1, per ``dp_rank``), a frontend's
# in-flight and queued requests, so a capture without vllm: series still has its endpoints' load.
FIELDS: dict[str, tuple[str, tuple[tuple[str, tuple[str, str] | None], ...]]] = {
    "running": ("gauge", (("vllm:num_requests_running", None), ("dynamo_frontend_inflight_requests", None))),
    "waiting": ("gauge", (("vllm:num_requests_waiting", None), ("dynamo_frontend_queued_requests", None))),
    "kv": ("gauge", (("vllm:kv_cache_usage_perc", None), ("dynamo_component_gpu_cache_usage_percent", None))),
    "prompt": ("counter", (("vllm:prompt_tokens_by_source", ("source", "local_compute")),)),
    "prompt_all": ("counter", (("vllm:prompt_tokens", None),)),
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


def canonical(name: str) -> tuple[str, bool] | None:
    """(current metric name, renamed?) of a sample name; None for ``_created`` series."""
    if name.endswith("_created"):
        return None
    base = name[:-6] if name.endswith("_total") else name
    new = ALIASES.get(base)
    return (new, True) if new else (base, False)


def family_names() -> set[str]:
    """Every metric family diag reads (FIELDS and the LATENCY histograms), current and old names."""
    names = {m for _, srcs in FIELDS.values() for m, _ in srcs} | set(LATENCY.values()) | set(LATENCY_FALLBACK)
    names |= COUNTED_METRICS
    return names | {old for old, new in ALIASES.items() if new in names}


ENGINE_LABELS = ("engine", "dp_rank")   # vLLM's engine index; Dynamo's component gauges: the DP rank


def engine_label(labels: Mapping[str, str]) -> str | None:
    """The engine a series belongs to (:data:`ENGINE_LABELS`); None for an endpoint-wide series."""
    return next((labels[k] for k in ENGINE_LABELS if k in labels), None)


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
