"""Run validity: is the run's headline number a measurement at all? A benchmark that "succeeded"
with nothing generated, a P/D run whose every KV transfer failed, a measured window that starts
while the server was still warming up. Registered in :data:`rules.runtime.TEMPLATES` as
``run_validity``; which check a rule runs is its ``check`` parameter (catalog data)."""

from __future__ import annotations

from typing import Any

from diag.parsers.records import KVLoadFailure, NixlFailure

from .catalog import Rule
from .finding import Finding
from .present import number
from .runmodel import Run
from .templating import _finding


def run_validity(rule: Rule, run: Run) -> list[Finding]:
    check = rule.params["check"]
    if check == "empty_benchmark":
        return _empty_benchmark(rule, run)
    if check == "kv_all_failed":
        return _kv_all_failed(rule, run)
    if check == "warmup_overlap":
        return _warmup_overlap(rule, run)
    raise ValueError(f"{rule.code}: unknown run_validity check {check!r}")


def _empty_benchmark(rule: Rule, run: Run) -> list[Finding]:
    out = []
    for b in run.benchmark:
        if not b.complete:
            continue
        zero = [what for what, v in (("completed requests", b.successful_requests),
                                     ("generated tokens", b.total_output_tokens)) if v == 0]
        if not zero:
            continue
        c = f"concurrency {number(b.concurrency)}" if b.concurrency is not None else "the benchmark"
        out.append(_finding(rule, f"{c} reported a result with 0 {' and 0 '.join(zero)}"
                            + (f" ({b.failed_requests:,} failed)" if b.failed_requests else ""),
                            first_ts=b.started, last_ts=b.ended,
                            evidence={"concurrency": b.concurrency, "completed": b.successful_requests,
                                      "output_tokens": b.total_output_tokens, "failed": b.failed_requests,
                                      "source": b.source}))
    return out


def _kv_all_failed(rule: Rule, run: Run) -> list[Finding]:
    ok = failed = 0.0
    metric_rows = 0
    failures = 0
    first: Any = None
    for ep in run.endpoints.values():
        if ep.kv.height:
            metric_rows += ep.kv.height
            ok += float(ep.kv["transfers"].fill_null(0).sum())
            failed += float(ep.kv["failed"].fill_null(0).sum())
        for _, r in ep.records:
            if isinstance(r, NixlFailure | KVLoadFailure):
                failures += r.n_requests if isinstance(r, KVLoadFailure) else 1
                first = first or r.ts
    if not metric_rows or ok > 0 or failed + failures < rule.params.get("min_failures", 1):
        return []
    return [_finding(rule, f"every KV transfer of the run failed: 0 succeeded in {metric_rows:,} KV metric "
                     f"intervals, {failed + failures:,.0f} failed", first_ts=first,
                     evidence={"succeeded": 0, "failed_in_metrics": failed, "failure_records": failures,
                               "metric_intervals": metric_rows})]


def _warmup_overlap(rule: Rule, run: Run) -> list[Finding]:
    ready = run.ready_at()
    if ready is None:
        return []
    slack = float(rule.params.get("slack_s", 0))
    out = []
    for b in run.benchmark:
        if b.started is None or (ready - b.started).total_seconds() <= slack:
            continue
        early = (ready - b.started).total_seconds()
        out.append(_finding(rule, f"concurrency {number(b.concurrency)}: the measured window starts {early:,.0f} s before "
                            "the server was ready (warm-up counted in the result)", first_ts=b.started,
                            last_ts=ready, evidence={"concurrency": b.concurrency, "started": b.started.isoformat(),
                                                     "ready": ready.isoformat(), "early_s": early}))
    return out
