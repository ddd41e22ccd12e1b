"""The runtime catalog as a Prometheus rule file: the same thresholds, windows and texts, evaluated by
Prometheus (or Thanos/Mimir rulers) on the fleet instead of by diag on one run.

Where series belong. Every engine series gets ``diag_role`` and ``diag_worker`` from the one label
mapping (:func:`parsers.prom_vocab.series_endpoint`: ``ROLE_LABELS``, ``INDEX_LABELS``; ``diag_worker``
is the ``instance`` when no index label has a number). An engine is (``dynamo_namespace``,
``diag_role``, ``diag_worker``, ``engine``), an endpoint the same without ``engine``, a role without
``diag_worker``, a run the ``dynamo_namespace`` (one deployment).

Recording rules hold the shared expressions, built from :data:`parsers.prom_vocab.FIELDS` (the metrics
every other source reads, the renamed names through ``or``): per engine gauges, and counters as
``irate`` (the increase between the last two samples: the same per-interval rate diag computes between
successive scrapes; Prometheus handles counter resets), then per endpoint and per role. Each alerting
rule is one catalog rule whose template has a PromQL form, with its ``for``/``keep_firing_for``, labels
(severity, code, role) and annotations (summary, a description with ``$labels``/``$value``, the ``diag
explain`` text as runbook). Rules that need what only logs hold are listed in a comment with the reason.
Changing a threshold in the catalog (or in diag.toml, through :meth:`Rule.with_params`) changes the
exported expression.

Windows: diag judges one run; Prometheus has no run, so "over the run" (a p90 plateau, an engine's
median, any preemption or failure) is over the last :data:`RUN_WINDOW`. A condition true at n
consecutive evaluations covers n stats intervals of data, as n buckets do in diag, but Prometheus
measures ``for`` from the first one: the exported ``for`` is the catalog's minus one interval.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import yaml

from diag.parsers import engines
from diag.parsers.prom_vocab import (
    ALIASES,
    BACKEND,
    DEPLOYMENT_LABEL,
    FIELDS,
    INDEX_LABELS,
    KV_SIGNALS,
    PRESENCE,
    REQUEST_COUNTS,
    ROLE_ALIASES,
    ROLE_LABELS,
    ROLE_WORDS,
    WORKER_NUMBER,
    backend_role,
)
from diag.parsers.promql import combine_vectors, counter_selector

from .catalog import Rule
from .verdict_catalog import verdict_catalog

RUN_WINDOW = "15m"          # "the run" on a server that never ends
# the engines' periodic stats interval (vLLM's 10 s): one bucket of diag's windows
STATS_INTERVAL_S = next((a.stats_cadence_s for a in engines.adapters() if a.stats_cadence_s), 10.0)
IRATE_WINDOW = "1m"         # how far back irate looks for its last two samples

GROUPS = ["diag-recording", "diag-alerts"]   # the rule groups, in evaluation order
RUN = DEPLOYMENT_LABEL
ROLE = f"{RUN}, diag_role"
ENDPOINT = f"{ROLE}, diag_worker"
ENGINE = f"{ENDPOINT}, engine"

# (label, replacement, regex) from parsers.prometheus's label mapping, lowest priority first: a later
# match overrides an earlier one. The serving roles only (a frontend's series are not an endpoint's).
# Dynamo's ``backend`` component (BACKEND) is weakest; it becomes decode in a deployment with a prefill
# series (any role label naming prefill), agg otherwise.
_SERVING = "|".join(w for w in ROLE_WORDS if w != "frontend")
_ROLE_FROM = [*((label, role, alias) for label, aliases in ROLE_ALIASES.items() for alias, role in aliases.items()),
              *((label, "$1", f".*?({_SERVING}).*") for label in reversed(ROLE_LABELS))]
_WORKER_FROM = [("instance", "$1", "(.+)")] + [(label, "$1", WORKER_NUMBER) for label in reversed(INDEX_LABELS)]
# a few series per target say whether it is prefill: its scrape's ``up``, an engine's presence gauge, a Dynamo
# worker's requests
_PRESENCE = "|".join(("up", *PRESENCE, "dynamo_component_requests_total"))
WITH_PREFILL = (f"group by({RUN}) ("
                + " or ".join(f'{{__name__=~"{_PRESENCE}", {label}=~".*prefill.*"}}' for label in ROLE_LABELS) + ")")


def labelled(selector: str) -> str:
    """``selector`` with ``diag_role`` and ``diag_worker`` added (see the module docstring)."""
    expr = selector
    for label, repl, regex in _ROLE_FROM:
        expr = f'label_replace({expr}, "diag_role", "{repl}", "{label}", "{regex}")'
    for label, repl, regex in _WORKER_FROM:
        expr = f'label_replace({expr}, "diag_worker", "{repl}", "{label}", "{regex}")'
    as_role = {role: f'label_replace({expr}, "diag_role", "{role}", "diag_role", "{BACKEND}")'
               for role in (backend_role(True), backend_role(False))}
    return (f"({as_role[backend_role(True)]} and on({RUN}) {WITH_PREFILL}"
            f" or {as_role[backend_role(False)]} unless on({RUN}) {WITH_PREFILL})")


def _names(metric: str) -> list[str]:
    return [metric, *(old for old, new in ALIASES.items() if new == metric)]


def _field(name: str) -> str:
    """One stats field per engine: the first source of FIELDS present (current name, then renamed)."""
    kind, sources = FIELDS[name]
    parts = []
    for metric, need in sources:
        sel = f'{{{need[0]}="{need[1]}"}}' if need else ""
        for n in _names(metric):
            inner = n + sel if kind == "gauge" else f"irate({n}_total{sel}[{IRATE_WINDOW}])"
            parts.append(f"sum by({ENGINE}) ({labelled(inner)})")
    return " or ".join(parts)


def _increase(metrics: tuple[str, ...]) -> str:
    """The increase of counters over :data:`RUN_WINDOW`, summed per endpoint (renamed names included)."""
    names = "|".join(f"{n}_total" for m in metrics for n in _names(m))
    inner = f'increase({{__name__=~"{names}"}}[{RUN_WINDOW}])'
    return f"sum by({ENDPOINT}) ({labelled(inner)})"


def _kv_increase(groups: tuple[tuple[str, ...], ...]) -> str:
    """The increase of a KV signal over :data:`RUN_WINDOW` per endpoint: per engine the largest increase
    within each group of overlapping counters, summed over the groups (:data:`parsers.prom_vocab.KV_SIGNALS`)."""
    per_engine = combine_vectors("sum", "diag_group", [
        combine_vectors("max", "diag_counter", [f"increase({m}_total[{RUN_WINDOW}])" for m in group]) for group in groups])
    return f"sum by({ENDPOINT}) ({labelled(per_engine)})"


REQUEST_SIDES = ("frontend", "component")   # REQUEST_COUNTS' groups, in order: the frontends', the workers'


def _request_increase(members: tuple[str, ...]) -> str:
    """The increase over :data:`RUN_WINDOW` of one group of overlapping request counters, per deployment."""
    return combine_vectors("max", "diag_counter", [f"sum by({RUN}) (increase({counter_selector(m)}[{RUN_WINDOW}]))"
                                                   for m in members])


# the counters behind the presence rules' signals (the engines' preemption counters; overlapping KV-connector
# counters in parsers.prom_vocab.KV_SIGNALS)
SIGNALS: dict[str, tuple[str, ...]] = {
    "preemptions": tuple(metric for metric, _ in FIELDS["preempt"][1]),
    **{signal: tuple(m for group in groups for m in group) for signal, groups in KV_SIGNALS.items()},
}
SIGNAL_EXPR: dict[str, str] = {
    "preemptions": _increase(SIGNALS["preemptions"]),
    **{signal: _kv_increase(groups) for signal, groups in KV_SIGNALS.items()},
}

RECORDING: dict[str, str] = {
    "diag:vllm_running:engine": _field("running"),
    "diag:vllm_waiting:engine": _field("waiting"),
    "diag:vllm_kv_usage:engine_percent": f"100 * ({_field('kv')})",
    # the computed prompt tokens where the engine splits them by source, else all of them (prefill's are computed)
    "diag:vllm_prompt_tokens:engine_irate": f"{_field('prompt')} or {_field('prompt_all')}",
    "diag:vllm_generation_tokens:engine_irate": _field("gen"),
    "diag:vllm_preemptions:engine_irate": _field("preempt"),
    "diag:vllm_tokens:engine_irate": "diag:vllm_prompt_tokens:engine_irate + diag:vllm_generation_tokens:engine_irate",
    "diag:vllm_busy_tokens:engine_irate": "diag:vllm_tokens:engine_irate and diag:vllm_running:engine > 0",
    "diag:vllm_kv_usage:endpoint_max_percent": "max without(engine) (diag:vllm_kv_usage:engine_percent)",
    "diag:vllm_waiting:endpoint": "sum without(engine) (diag:vllm_waiting:engine)",
    "diag:vllm_preemptions:endpoint_irate": "sum without(engine) (diag:vllm_preemptions:engine_irate)",
    "diag:vllm_waiting:role_avg": f"avg by({ROLE}) (diag:vllm_waiting:engine)",
    "diag:vllm_waiting:role": f"sum by({ROLE}) (diag:vllm_waiting:engine)",
    "diag:vllm_running:role_avg": f"avg by({ROLE}) (diag:vllm_running:engine)",
    "diag:vllm_kv_usage:role_avg_percent": f"avg by({ROLE}) (diag:vllm_kv_usage:engine_percent)",
    "diag:vllm_prompt_tokens:role_irate": f"sum by({ROLE}) (diag:vllm_prompt_tokens:engine_irate)",
    **{f"diag:vllm_{signal}:endpoint_increase": expr for signal, expr in SIGNAL_EXPR.items()},
    "diag:up:target": f"max by(job, instance, {ENDPOINT}) ({labelled('up')})",
    # the decode waiting split (verdict_figures.WAITING_KV): waiting for the KV transfer by the KV-fetch stages, else deferred
    "diag:vllm_waiting_kv:engine": f"({combine_vectors('sum', 'diag_stage', [f'({_field(k)})' for k in ('kv_fetch_waiting', 'kv_fetch_running')])})"
                                   f" or ({_field('deferred')})",
    "diag:vllm_waiting_kv:role_avg": f"avg by({ROLE}) (diag:vllm_waiting_kv:engine)",
    "diag:vllm_waiting_capacity:role_avg": "diag:vllm_waiting:role_avg - diag:vllm_waiting_kv:role_avg",
    # Dynamo's request counters per deployment: the frontends' when there are, else the workers' (verdict.metered)
    **{f"diag:dynamo_{signal}:{side}_increase": _request_increase(groups[i])
       for signal, groups in REQUEST_COUNTS.items() for i, side in enumerate(REQUEST_SIDES)},
    "diag:dynamo_request_errors:run_share": " or ".join(
        f"(diag:dynamo_request_errors:{side}_increase or 0 * diag:dynamo_requests:{side}_increase)"
        f" / diag:dynamo_requests:{side}_increase" for side in REQUEST_SIDES),
}


def _role(name: str, role: str) -> str:
    return f'{name}{{diag_role="{role}"}}'


def _plateau(frac: float) -> str:
    """The prefill prompt throughput at or above ``frac`` x its p90 over the run window."""
    tps = _role("diag:vllm_prompt_tokens:role_irate", "prefill")
    return f"{tps} >= {frac} * quantile_over_time(0.9, {tps}[{RUN_WINDOW}])"


def _role_balance(p: dict[str, Any]) -> str:
    pw, dkv = _role("diag:vllm_waiting:role_avg", "prefill"), _role("diag:vllm_kv_usage:role_avg_percent", "decode")
    dwait = _role("diag:vllm_waiting:role", "decode")
    if p["mode"] == "prefill-bound":
        rising = f"({pw} - {pw} offset {int(p['rise_lookback_s'])}s >= {p['waiting_min']})"
        return (f"(({pw} >= {p['waiting_high']}) or {rising})"
                f" and on({RUN}) ({_plateau(p['plateau_frac'])})"
                f" and on({RUN}) ({dkv} < {p['kv_low']} and {dkv} < {p['kv_high']})"
                f" and on({RUN}) ({dwait} == 0)")
    tps = _role("diag:vllm_prompt_tokens:role_irate", "prefill")
    idle = (f"({tps} < {p['idle_frac']} * quantile_over_time(0.9, {tps}[{RUN_WINDOW}])"
            f" or {_role('diag:vllm_waiting:role', 'prefill')} == 0)")
    saturated = f"({dkv} >= {p['kv_high']} or ({dkv} >= {p['waiting_kv_min']} and on({RUN}) {dwait} > 0))"
    return f"{saturated} and on({RUN}) {idle}"


def _expr(rule: Rule) -> str | None:
    """The alert expression of one rule; None when its template has no PromQL form."""
    p = rule.params
    if rule.template == "role_balance":  # a run's verdict: one alert per deployment
        return f"max by({RUN}) ({_role_balance(p)})"
    if rule.template == "engine_skew":
        load = f"diag:vllm_{p.get('metric', 'running')}:engine"
        med = f"quantile without(engine) (0.5, {load})"
        return f"{load} >= on({ENDPOINT}) group_left() ({p['ratio']} * ({med} >= {p['min_load']}))"
    if rule.template == "window_threshold" and p.get("kv_usage") is not None:
        return (f"diag:vllm_kv_usage:endpoint_max_percent >= {p['kv_usage']} and on({ENDPOINT}) "
                f"(diag:vllm_waiting:endpoint > 0 or diag:vllm_preemptions:endpoint_irate > 0)")
    if rule.template == "presence" and p.get("signal") in SIGNALS:
        return f"diag:vllm_{p['signal']}:endpoint_increase >= {p.get('min_count', 1)}"
    if rule.template == "absence":
        roles = "|".join(p.get("roles", ("prefill", "decode", "agg")))
        return (f'diag:up:target{{diag_role=~"{roles}"}} == 1 unless on(job, instance) '
                f"max by(job, instance) ({' or '.join(f'present_over_time({m}[{IRATE_WINDOW}])' for m in PRESENCE)})")
    if rule.template == "stall_vs_median":
        median = f"quantile_over_time(0.5, diag:vllm_busy_tokens:engine_irate[{RUN_WINDOW}])"
        return (f"(diag:vllm_tokens:engine_irate < {p['stall_frac']} * ({median} >= {p['min_median']})"
                f" or diag:vllm_tokens:engine_irate <= 0) and diag:vllm_running:engine > 0")
    return None


WHY_NOT = {
    "capacity": "needs each engine's maximum concurrency (a label of vllm:cache_config_info, which PromQL "
                "cannot turn into a number) and the benchmark's concurrency (not a metric)",
    "noise_ratio": "is about log lines",
    "fault_incident": "is about tracebacks and fault lines in logs",
    "uncaught_exception": "is about tracebacks in logs",
    "startup_stage": "reads the startup stages from the workers' log lines",
    "run_validity": "judges the benchmark's result and the orchestrator's readiness lines",
    "accuracy": "compares the accuracy benchmark's scores",
    "drift": "compares the launched command lines with the recipe",
}


def verdict_alerts(p: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The verdict's Prometheus-measurable conditions (``rules/catalog/verdicts.toml``, its thresholds ``p``),
    one alert per deployment: requests failing beyond ``failed_invalid_frac`` (invalid, by Dynamo's request
    counters), and by the decode waiting split, P/D decode requests waiting for their KV transfers with no
    prefill queue (transfer-bound) or waiting for capacity with their KV loaded (decode-bound). Held for
    ``min_steady_s`` of data, the shortest window the verdict trusts."""
    dkv, dcap = _role("diag:vllm_waiting_kv:role_avg", "decode"), _role("diag:vllm_waiting_capacity:role_avg", "decode")
    no_queue = f"on({RUN}) ({_role('diag:vllm_waiting:role_avg', 'prefill')} < {p['prefill_queue']})"
    held = _duration(max(0.0, float(p["min_steady_s"]) - STATS_INTERVAL_S))
    specs = [
        ("invalid", None, "request_errors", "error", f"diag:dynamo_request_errors:run_share > {p['failed_invalid_frac']}",
         "", f"more than {p['failed_invalid_frac']:.0%} of the requests failed (Dynamo's request counters)"),
        ("transfer-bound", "kv-transfer latency", "decode_waits_for_kv", "warning",
         f"max by({RUN}) ({dkv} >= {p['transfer_wait_min']} and {dkv} >= {dcap} and {no_queue})", held,
         "P/D decode requests wait for their KV transfers (vLLM's KV-fetch stages or deferred requests), "
         "not for capacity, with no prefill queue"),
        ("decode-bound", "batch/compute", "decode_waits_for_capacity", "warning",
         f"max by({RUN}) ({dcap} >= {p['transfer_wait_min']} and {dcap} > {dkv} and on({RUN}) {WITH_PREFILL})", held,
         "P/D decode requests wait for capacity with their KV loaded, not for their KV transfers"),
    ]
    classes = {c.name: c.summary for c in verdict_catalog().classes}
    out = []
    for cls, limiter, what, severity, expr, hold, summary in specs:
        alert: dict[str, Any] = {"alert": f"DIAG_verdict_{cls.replace('-', '_')}_{what}", "expr": expr}
        if hold:
            alert["for"] = hold
        alert["labels"] = {"severity": severity, "code": f"verdict/{cls}", "verdict": cls,
                           **({"limiter": limiter} if limiter else {})}
        alert["annotations"] = {"summary": summary, "description": f"verdict {cls} on {{{{ $labels.{RUN} }}}}: "
                                                                   "value {{ $value }}", "runbook": classes[cls]}
        out.append(alert)
    return out


def exported_for(rule: Rule) -> float:
    """The alert's ``for`` in seconds: n consecutive true evaluations cover n stats intervals (see the
    module docstring), so a window of ``for`` seconds is ``for`` minus one interval after the first."""
    p = rule.params
    if rule.template == "stall_vs_median":
        return max(0.0, float(p.get("stall_s", STATS_INTERVAL_S)) - STATS_INTERVAL_S)
    if rule.for_s and rule.template in ("role_balance", "engine_skew", "window_threshold"):
        return max(0.0, rule.for_s - float(p.get("interval_s", STATS_INTERVAL_S)))
    return rule.for_s


def _role_label(rule: Rule) -> str:
    mode = rule.params.get("mode", "")
    return mode.removesuffix("-bound") if mode.endswith("-bound") else "{{ $labels.diag_role }}"


def alert_name(rule: Rule) -> str:
    return f"{rule.code.replace('-', '_')}_{rule.name.replace('-', '_')}"


def _duration(seconds: float) -> str:
    return f"{int(seconds)}s"


def expressible(rules: list[Rule]) -> list[Rule]:
    """The runtime rules of ``rules`` that have an alert expression."""
    return [r for r in rules if r.scope != "recipe" and _expr(r) is not None]


def export(rules: list[Rule], verdicts: bool = False) -> str:
    """The rule file (YAML) for ``rules``: runtime rules only, the others listed with the reason; with
    ``verdicts``, the verdict's alerts too (:func:`verdict_alerts`, the catalog's thresholds)."""
    alerts: list[dict[str, Any]] = []
    skipped = []
    for rule in rules:
        if rule.scope == "recipe":
            continue
        expr = _expr(rule)
        if expr is None:
            why = WHY_NOT.get(rule.template) or f"its signal ({rule.params.get('signal', rule.template)}) is in logs only"
            skipped.append(f"{rule.code} {rule.name}: {why}")
            continue
        alert: dict[str, Any] = {"alert": alert_name(rule), "expr": expr}
        if exported_for(rule):
            alert["for"] = _duration(exported_for(rule))
        if rule.keep_firing_for_s:
            alert["keep_firing_for"] = _duration(rule.keep_firing_for_s)
        alert["labels"] = {"severity": rule.severity, "code": rule.code, "role": _role_label(rule)}
        where = "{{ $labels.diag_role }} {{ $labels.diag_worker }}"
        if rule.scope == "engine":
            where += " engine {{ $labels.engine }}"
        elif rule.scope == "run":
            where = "{{ $labels.dynamo_namespace }}"
        alert["annotations"] = {
            "summary": rule.summary,
            "description": f"{rule.code} {rule.name} on {where}: value {{{{ $value }}}}",
            "runbook": f"{rule.why.strip()}\n\nRemediation: {rule.remediation.strip()}",
        }
        alerts.append(alert)
    if verdicts:
        alerts.extend(verdict_alerts(verdict_catalog().params))
    doc = {"groups": [
        {"name": GROUPS[0], "rules": [{"record": k, "expr": v} for k, v in RECORDING.items()]},
        {"name": GROUPS[1], "rules": alerts}]}
    head = ("# Generated by `diag rules export --format prometheus` from diag's rule catalog.\n"
            f"# Run window {RUN_WINDOW}; role and worker from target labels (diag_role, diag_worker).\n")
    if skipped:
        head += "# Not expressible in PromQL:\n" + "".join(f"#   {s}\n" for s in skipped)
    return head + yaml.safe_dump(doc, sort_keys=False, width=120, allow_unicode=True)
