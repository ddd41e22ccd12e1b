"""The runtime catalog as a Prometheus rule file: the same thresholds, windows and texts, evaluated by
Prometheus (or Thanos/Mimir rulers) on the fleet instead of by diag on one run.

Recording rules hold the shared per-engine series (summed by endpoint and engine, current and renamed
vLLM metric names through ``or``); each alerting rule is one catalog rule whose template has a PromQL
form, with its ``for``/``keep_firing_for``, labels (severity, code, role) and annotations (summary,
a description with ``$labels``/``$value``, the ``diag explain`` text as runbook). Rules that need what
only logs hold are listed in a comment with the reason. Changing a threshold in the catalog (or in
diag.toml, through :meth:`Rule.with_params`) changes the exported expression.
"""

from __future__ import annotations

from typing import Any

import yaml

from diag.parsers.prometheus import ALIASES

from .catalog import Rule

BY = "job, instance, engine, dynamo_component, worker_role, worker_index"
WINDOW = "1m"


def _names(metric: str) -> list[str]:
    return [metric, *(old for old, new in ALIASES.items() if new == metric)]


def _gauge(metric: str) -> str:
    return " or ".join(f"sum by({BY}) ({n})" for n in _names(metric))


def _rate(metric: str) -> str:
    return " or ".join(f"sum by({BY}) (rate({n}_total[{WINDOW}]))" for n in _names(metric))


RECORDING = {
    "diag:vllm_kv_usage:percent": f"100 * ({_gauge('vllm:kv_cache_usage_perc')})",
    "diag:vllm_waiting:requests": _gauge("vllm:num_requests_waiting"),
    "diag:vllm_running:requests": _gauge("vllm:num_requests_running"),
    "diag:vllm_generation_tokens:rate1m": _rate("vllm:generation_tokens"),
    "diag:vllm_prompt_tokens:rate1m": _rate("vllm:prompt_tokens"),
    "diag:vllm_preemptions:increase1m": " or ".join(
        f"sum by({BY}) (increase({n}_total[{WINDOW}]))" for n in _names("vllm:num_preemptions")),
}

def _expr(rule: Rule) -> str | None:
    """The alert expression of one rule; None when its template has no PromQL form."""
    p = rule.params
    if rule.template == "window_threshold" and p.get("kv_usage") is not None:
        return (f"diag:vllm_kv_usage:percent >= {p['kv_usage']} and on({BY}) "
                f"(diag:vllm_waiting:requests > 0 or diag:vllm_preemptions:increase1m > 0)")
    if rule.template == "presence" and p.get("signal") == "preemptions":
        return f"diag:vllm_preemptions:increase1m >= {p.get('min_count', 1)}"
    if rule.template == "absence":
        return ("(sum by(job, instance) (present_over_time(vllm:num_requests_running[5m]))) unless on(job, instance) "
                "(sum by(job, instance) (present_over_time(vllm:num_requests_running[1m])))")
    if rule.template == "stall_vs_median":
        frac, floor = p.get("stall_frac", 0.25), p.get("min_median", 1.0)
        tokens = "(diag:vllm_generation_tokens:rate1m + diag:vllm_prompt_tokens:rate1m)"
        return (f"diag:vllm_running:requests > 0 and {tokens} < on(job) group_left() "
                f"({frac} * quantile by(job) (0.5, {tokens} > {floor}))")
    return None


WHY_NOT = {
    "role_balance": "compares prefill queues and throughput against decode fill over the run (p90 plateaus, "
                    "concurrency per engine): needs the run's topology and benchmark concurrency",
    "engine_skew": "compares an engine's load with its siblings' median over the run window",
    "capacity": "needs the startup 'Maximum concurrency' line and the recipe's concurrency",
    "noise_ratio": "is about log lines",
    "fault_incident": "is about tracebacks and fault lines in logs",
}


def _duration(seconds: float) -> str:
    return f"{int(seconds)}s"


def export(rules: list[Rule]) -> str:
    """The rule file (YAML) for ``rules``: runtime rules only; the others are listed with the reason."""
    alerts: list[dict[str, Any]] = []
    skipped = []
    for rule in rules:
        if rule.scope == "recipe":
            continue
        expr = _expr(rule)
        if expr is None:
            skipped.append(f"{rule.code} {rule.name}: {WHY_NOT.get(rule.template, 'its evidence is in logs only')}")
            continue
        alert: dict[str, Any] = {"alert": f"{rule.code.replace('-', '_')}_{rule.name.replace('-', '_')}",
                                 "expr": expr}
        if rule.for_s:
            alert["for"] = _duration(rule.for_s)
        if rule.keep_firing_for_s:
            alert["keep_firing_for"] = _duration(rule.keep_firing_for_s)
        alert["labels"] = {"severity": rule.severity, "code": rule.code, "role": "{{ $labels.worker_role }}"}
        alert["annotations"] = {
            "summary": rule.summary,
            "description": f"{rule.code} on {{{{ $labels.job }}}} {{{{ $labels.instance }}}} engine "
                           f"{{{{ $labels.engine }}}}: value {{{{ $value }}}}",
            "runbook": f"{rule.why.strip()}\n\nRemediation: {rule.remediation.strip()}",
        }
        alerts.append(alert)
    doc = {"groups": [
        {"name": "diag-recording", "rules": [{"record": k, "expr": v} for k, v in RECORDING.items()]},
        {"name": "diag-alerts", "rules": alerts}]}
    head = "# Generated by `diag rules export --format prometheus` from diag's rule catalog.\n"
    if skipped:
        head += "# Not expressible in PromQL:\n" + "".join(f"#   {s}\n" for s in skipped)
    return head + yaml.safe_dump(doc, sort_keys=False, width=120, allow_unicode=True)
