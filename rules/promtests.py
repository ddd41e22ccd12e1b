"""``promtool test rules`` unit tests generated from the catalog's own fire/pass examples.

Each example of an exported rule becomes one test group: the example's run as the series a worker's
``/metrics`` shows every stats interval (gauges as they are, tok/s and preemptions as running counters,
NIXL failures and lease expiries as their counters, ``up`` for every endpoint's target; a baseline
scrape before the first interval shows an engine's metrics at zero, as vLLM exports them from its
start), and one check
of the alerts that fired during it: exactly the endpoints (or the run) of diag's own findings on the
same example. A finding over a window shorter than the rule's ``for`` (a log excerpt shorter than the
window fires at lower severity in diag) has no Prometheus equivalent and is not expected.
"""

from __future__ import annotations

import re
from typing import Any

import yaml

from diag.parsers.prom_vocab import FIELDS, KV_SIGNALS

from .catalog import Rule
from .examples import DEFAULTS, SERIES, example_findings, series_length, value_at
from .promrules import GROUPS, STATS_INTERVAL_S, expressible


def _metric(field: str) -> str:
    """The series an example's engine exports for a stats field: the field's first source (the first engine's)."""
    return FIELDS[field][1][0][0]


# example key -> (metric, scale from the example's unit)
GAUGES = {"running": (_metric("running"), 1.0), "waiting": (_metric("waiting"), 1.0), "kv_usage": (_metric("kv"), 0.01)}
COUNTERS = {"prompt_tps": (_metric("prompt_all"), STATS_INTERVAL_S), "gen_tps": (_metric("gen"), STATS_INTERVAL_S),
            "preemptions": (_metric("preempt"), 1.0)}
EXPIRY_COUNTED = ("expired", "force_freed")   # the P side's expired-request counter; reads are D-side lines
_ENDPOINT = re.compile(r"^(?P<role>[a-z]+)-w(?P<idx>\d+)$")


def _fmt(values: list[float | None]) -> str:
    return " ".join("_" if v is None else f"{v:g}" for v in values)


def _cumulative(per_step: list[float]) -> list[float]:
    out, total = [], 0.0
    for v in per_step:
        total += v
        out.append(total)
    return out


def example_series(spec: dict[str, Any]) -> tuple[list[dict[str, str]], int]:
    """The input series of one example and its number of steps: a baseline at 0, one step per
    interval, then one step holding the events (failures, expiries) logged after the intervals."""
    series: list[dict[str, str]] = []
    steps = 2 + max((series_length(r) for k, r in spec.items() if k in ("prefill", "decode", "agg")), default=0)
    for role in ("prefill", "decode", "agg"):
        if role not in spec:
            continue
        r = spec[role]
        n = series_length(r)
        for idx in range(int(r.get("endpoints", 1))):
            target = f'job="diag-example",instance="node{idx}:8000",worker_role="{role}",worker_index="{idx}"'
            series.append({"series": f"up{{{target}}}", "values": _fmt([1.0] * steps)})
            for e in range(int(r.get("engines", 1)) if n else 0):
                labels = f'{target},engine="{e}",model_name="m"'
                vals = {k: [value_at(r.get(k, DEFAULTS[k]), i) for i in range(n)] for k in SERIES}
                skew = r.get("skew")
                if skew and int(skew["engine"]) == e:
                    vals.update({k: [value_at(v, i) for i in range(n)] for k, v in skew.items() if k in SERIES})
                for key, (metric, scale) in GAUGES.items():
                    series.append({"series": f"{metric}{{{labels}}}",
                                   "values": _fmt([0.0, *(float(v) * scale for v in vals[key]), None])})
                for key, (metric, scale) in COUNTERS.items():
                    total = _cumulative([0.0, *(float(v) * scale for v in vals[key])])
                    series.append({"series": f"{metric}_total{{{labels}}}", "values": _fmt([*total, total[-1]])})
            events = _events(r, n)
            for metric, per_step in events.items():
                labels = f'{target},engine="0",model_name="m"'
                series.append({"series": f"{metric}_total{{{labels}}}", "values": _fmt(_cumulative(per_step))})
    return series, steps


def _events(r: dict[str, Any], n: int) -> dict[str, list[float]]:
    """NIXL counters per step as vLLM >= 0.31 exports them: failed transfers from the KV metrics of each
    interval, failures and expiries at the step after the intervals (when the example logs them); a
    failed notification counts in both failure counters (:data:`parsers.prom_vocab.KV_SIGNALS`)."""
    (transfers, notifications), *_ = KV_SIGNALS["kv_failures"]
    (expired,), *_ = KV_SIGNALS["kv_expiry"]
    out: dict[str, list[float]] = {}

    def bump(metric: str, step: int, by: float) -> None:
        out.setdefault(metric, [0.0] * (n + 2))[step] += by

    for i, (_, failed) in enumerate(r.get("kv", [])):
        bump(transfers, i + 1, float(failed))
    for ftype in r.get("nixl", []):
        bump(transfers, n + 1, 1.0)
        if "notif" in ftype:
            bump(notifications, n + 1, 1.0)
    for event in r.get("expiry", []):
        bump(expired, n + 1, 1.0 if event in EXPIRY_COUNTED else 0.0)
    return out


def expected_alerts(rule: Rule, spec: dict[str, Any]) -> list[dict[str, str]]:
    """The alert groups (code, and the endpoint's diag_role/diag_worker) diag's findings imply."""
    found = []
    for f in example_findings(rule, spec):
        if rule.for_s and f.first_ts and f.last_ts and (f.last_ts - f.first_ts).total_seconds() < rule.for_s:
            continue  # a window shorter than `for`: only a log excerpt gives one
        labels = {"code": rule.code}
        m = _ENDPOINT.match(f.endpoint or "")
        if m:
            labels.update(diag_role=m["role"], diag_worker=m["idx"])
        if labels not in found:
            found.append(labels)
    return found


# figures only an engine's per-step iteration log gives (the share of an interval its steps took, the tokens of its
# batches): no Prometheus series carries them, so an example resting on one has no promtool test
STEP_FIGURES = frozenset({"busy", "batch_tokens"})


def prom_examples(rule: Rule) -> list[dict[str, Any]]:
    """The examples of ``rule`` a Prometheus server can replay (none resting on a :data:`STEP_FIGURES` figure)."""
    return [ex for ex in rule.examples
            if not any(isinstance(side, dict) and STEP_FIGURES & side.keys() for side in ex.get("run", {}).values())]


def unit_tests(rules: list[Rule], rule_file: str) -> str:
    """The promtool test file (YAML) for the examples of the exported ``rules``."""
    groups = []
    for rule in expressible(rules):
        for ex in prom_examples(rule):
            spec = ex.get("run", {})
            series, steps = example_series(spec)
            end = int((steps - 1) * STATS_INTERVAL_S)
            want = expected_alerts(rule, spec)
            groups.append({
                "name": f"{rule.code} example {rule.examples.index(ex)} ({ex['expect']})",
                "interval": f"{int(STATS_INTERVAL_S)}s", "input_series": series,
                "promql_expr_test": [{
                    "expr": f'group by(code, diag_role, diag_worker) (max_over_time(ALERTS{{alertstate="firing",'
                            f'code="{rule.code}"}}[{end + 1}s]))',
                    "eval_time": f"{end}s",
                    "exp_samples": [{"labels": "{" + ", ".join(f'{k}="{v}"' for k, v in w.items()) + "}", "value": 1}
                                    for w in want]}]})
    # the recording rules first at each step (promtool's default order of groups is not fixed)
    doc = {"rule_files": [rule_file], "evaluation_interval": f"{int(STATS_INTERVAL_S)}s",
           "group_eval_order": GROUPS, "tests": groups}
    return yaml.safe_dump(doc, sort_keys=False, width=200)
