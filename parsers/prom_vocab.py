"""The Prometheus metric vocabulary diag reads: metric names and the labels that name an endpoint.

* Metric names are data: counters lose ``_total``, ``_created`` series are ignored (they are
  creation timestamps, not counts), and :data:`ALIASES` maps renamed metrics to their current names
  (:func:`canonical`). :data:`FIELDS` says which metric feeds which stats field; :data:`KV_SIGNALS`,
  :data:`KV_COUNTS` and :data:`REQUEST_COUNTS` which counters make a signal; :data:`LATENCY` which
  histograms hold a latency.
* :data:`ENGINE_LABELS` and the endpoint roles (:func:`series_endpoint`) map a series' labels to its
  engine and its endpoint's (role, worker index).

The engines' names come from their adapters (``ADAPTER.metrics_module``, see
:func:`diag.parsers.engines.metrics`), merged here in registry order; Dynamo's series are core's and come
after every engine's (the fallback where an instance has no engine series). An engine's metrics module
holds, names without the counter suffix ``_total``:

* ``ALIASES: dict[str, str]``: old name -> current name.
* ``FIELDS: dict[str, tuple[kind, tuple[(metric, (label, value) | None), ...]]]``: stats field (``running``,
  ``waiting``, ``kv`` (0..1), ``prompt``, ``prompt_all``, ``gen``, ``preempt``, ``prefix_q``/``prefix_h``,
  ``ext_q``/``ext_h``, ``deferred``, ``kv_fetch_*``) -> ``"gauge"`` or ``"counter"`` and its sources in
  priority order, each a current metric name and the label value a series must carry, or None.
* ``KV_SIGNALS`` / ``KV_COUNTS: dict[str, tuple[tuple[str, ...], ...]]``: signal (``kv_failures``,
  ``kv_expiry``; ``KV_COUNTS`` adds ``kv_transfers``) -> groups of counters whose increases add up, the
  members of a group overlapping (the group counts its largest increase).
* ``LATENCY: dict[str, str]``: latency key of :data:`parsers.histogram.KEYS` -> histogram family (seconds).
* ``PRESENCE: str``: a gauge the engine exports from its start (a target with it is that engine).

The scrape and capture path (:mod:`parsers.prometheus`), the server path (:mod:`parsers.promql`,
diag.prom) and the exported rules (rules.promrules) all read this one vocabulary.
"""

from __future__ import annotations

import re
from collections.abc import Container, Iterable, Mapping, Sequence

from . import engines
from .histogram import FALLBACK as LATENCY_FALLBACK
from .histogram import KEYS as LATENCY_KEYS

__all__ = [
    "ALIASES", "BACKEND", "COUNTED_METRICS", "COUNTERS", "COUNTS", "DEPLOYMENT_LABEL", "DYNAMO_FIELDS", "ENGINE_LABELS",
    "FIELDS", "INDEX_LABELS", "KV_COUNTS", "KV_SIGNALS", "LATENCY", "METRIC_ENGINES", "PRESENCE", "REQUEST_COUNTS",
    "ROLE_ALIASES", "ROLE_LABELS", "ROLE_WORDS", "WORKER_NUMBER", "any_series", "backend_role", "canonical",
    "engine_label", "family_names", "member_of", "prefill_deployments", "role_of_label", "series_endpoint",
]

Sources = tuple[tuple[str, tuple[str, str] | None], ...]
Groups = tuple[tuple[str, ...], ...]
_ENGINES = engines.metrics()
METRIC_ENGINES = tuple(a.display for a, _ in _ENGINES)   # the engines whose series diag reads

# Dynamo's own series (ai-dynamo 1.6 prometheus_names.py, common/utils/prometheus.py), after the engines':
# a worker's ``dynamo_component_gpu_cache_usage_percent`` (0..1, per ``dp_rank``), a frontend's in-flight and
# queued requests, so a capture without engine series still has its endpoints' load.
DYNAMO_FIELDS: dict[str, tuple[str, Sources]] = {
    "running": ("gauge", (("dynamo_frontend_inflight_requests", None),)),
    "waiting": ("gauge", (("dynamo_frontend_queued_requests", None),)),
    "kv": ("gauge", (("dynamo_component_gpu_cache_usage_percent", None),)),
}


def _fields(tables: Iterable[Mapping[str, tuple[str, Sources]]]) -> dict[str, tuple[str, Sources]]:
    """FIELDS tables merged: a field's sources in table order (its kind must agree)."""
    out: dict[str, tuple[str, Sources]] = {}
    for table in tables:
        for name, (kind, sources) in table.items():
            have = out.get(name, (kind, ()))
            if have[0] != kind:
                raise ValueError(f"metric field {name!r} is a {have[0]} and a {kind}")
            out[name] = (kind, (*have[1], *sources))
    return out


def _groups(tables: Iterable[Mapping[str, Groups]]) -> dict[str, Groups]:
    """Counter-group tables merged: a signal's groups in table order."""
    out: dict[str, Groups] = {}
    for table in tables:
        for signal, groups in table.items():
            out[signal] = (*out.get(signal, ()), *groups)
    return out


ALIASES: dict[str, str] = {old: new for _, m in _ENGINES for old, new in m.ALIASES.items()}
# stats field -> (kind, sources in priority order: (current metric name, required label or None))
FIELDS = _fields([*(m.FIELDS for _, m in _ENGINES), DYNAMO_FIELDS])
COUNTERS = tuple(k for k, (kind, _) in FIELDS.items() if kind == "counter")
KV_SIGNALS = _groups(m.KV_SIGNALS for _, m in _ENGINES)
KV_COUNTS = _groups(m.KV_COUNTS for _, m in _ENGINES)
if unknown := {k for _, m in _ENGINES for k in m.LATENCY} - set(LATENCY_KEYS):
    raise ValueError(f"latency keys no run-model column has: {sorted(unknown)}")
# latency key -> the engines' histogram families (current names); Dynamo's are LATENCY_FALLBACK
LATENCY: dict[str, tuple[str, ...]] = {
    key: fams for key in LATENCY_KEYS if (fams := tuple(m.LATENCY[key] for _, m in _ENGINES if key in m.LATENCY))}
PRESENCE = tuple(m.PRESENCE for _, m in _ENGINES)


def any_series(names: Sequence[str]) -> str:
    """A PromQL selector of the series of any of ``names``: the name itself when there is one."""
    return names[0] if len(names) == 1 else f'{{__name__=~"{"|".join(names)}"}}'


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
    names = {m for _, srcs in FIELDS.values() for m, _ in srcs} | {f for fams in LATENCY.values() for f in fams}
    names |= set(LATENCY_FALLBACK)
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
