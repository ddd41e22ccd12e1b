"""Evaluate the runtime catalog over a run model; incremental re-evaluation keeps finding identity."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace
from datetime import timedelta
from typing import Any

from . import runtime
from .catalog import Rule, by_scope, catalog
from .finding import Finding, severity_rank
from .runmodel import Run


class RuleError(RuntimeError):
    pass


def runtime_rules() -> list[Rule]:
    return by_scope("run", "endpoint", "engine")


CONSEQUENCE = "after_engine_death"   # the evidence key that marks a likely consequence (its cause's identity)


def _correlate(findings: list[Finding]) -> list[Finding]:
    """Mark findings whose rule lists a ``consequence_of`` (KV-transfer failures, expiries, stalls) and
    that start after such a finding on another endpoint (an engine death) as its likely consequences:
    the peers of a dead engine fail their transfers. Evidence and message say so."""
    rules = catalog()
    causes = [f for f in findings if f.first_ts is not None]
    out = []
    for f in findings:
        rule = rules.get(f.code)
        after = rule.consequence_of if rule is not None else ()
        cause = next((d for d in causes if after and d.code in after and f.endpoint != d.endpoint
                      and f.first_ts is not None and f.first_ts >= d.first_ts - timedelta(seconds=5)), None)
        if cause is not None:
            ev = dict(f.evidence)
            ev[CONSEQUENCE] = {"endpoint": cause.endpoint, "at": cause.first_ts.isoformat(), "code": cause.code}
            f = replace(f, evidence=ev, message=f"{f.message} (after {cause.endpoint} died at "
                        f"{cause.first_ts:%H:%M:%S}: likely a consequence)")
        out.append(f)
    return out


def cause_key(f: Finding) -> tuple[str, str | None, str] | None:
    """The identity (:func:`key`) of the finding ``f`` is a likely consequence of, or None."""
    after = f.evidence.get(CONSEQUENCE) if f.evidence else None
    if not isinstance(after, dict):
        return None
    return after.get("code"), after.get("endpoint"), after.get("at")  # type: ignore[return-value]


def fold_cascades(findings: Iterable[Finding]
                  ) -> tuple[dict[tuple[str, str | None, str], tuple[Finding, ...]], set[tuple[str, str | None, str]]]:
    """The likely consequences of another finding present (E002/E003 on the peers of a dead engine), by
    their cause's key; and the keys of those folded. A folded finding is shown under its cause and colours
    no endpoint: its cause does (diag.report.endpoint_health)."""
    found = list(findings)
    present = {key(f) for f in found}
    causes: dict[tuple[str, str | None, str], list[Finding]] = {}
    for f in found:
        cause = cause_key(f)
        if cause is not None and cause in present and cause != key(f):
            causes.setdefault(cause, []).append(f)
    folded = {key(f) for fs in causes.values() for f in fs}
    return {k: tuple(v) for k, v in causes.items()}, folded


def evaluate(run: Run, rules: Iterable[Rule] | None = None) -> list[Finding]:
    """Every finding of every runtime rule, most severe first, then by time and code."""
    out: list[Finding] = []
    for rule in rules if rules is not None else runtime_rules():
        fn = runtime.TEMPLATES.get(rule.template)
        if fn is None:
            raise RuleError(f"rule {rule.code} uses unknown template {rule.template!r}")
        out.extend(fn(rule, run))
    return sort_findings(_correlate(out))


def sort_findings(findings: Iterable[Finding]) -> list[Finding]:
    """The one order of findings in every output: most severe first, then by time, code, endpoint, file, line."""
    def order(f: Finding) -> tuple[Any, ...]:
        loc = f.location
        return (-severity_rank(f.severity), f.first_ts is None, f.first_ts.isoformat() if f.first_ts else "",
                f.code, f.endpoint or "", loc.path if loc else "", (loc.line or 0) if loc else 0,
                (loc.col or 0) if loc else 0, f.message)
    return sorted(findings, key=order)


def key(f: Finding) -> tuple[str, str | None, str]:
    """A finding's identity across re-evaluations: code, endpoint, and where it started. Its message,
    counts, end and location may change while it stands (an update); a finding without a start time
    is one per code and endpoint (see :func:`keyed` for several of them)."""
    return f.code, f.endpoint, f.first_ts.isoformat() if f.first_ts else ""


def keyed(findings: Iterable[Finding]) -> dict[tuple[str, str | None, str], Finding]:
    """Findings by identity; the n-th finding sharing an identity (two untimed ones of one code and
    endpoint) gets ``#n`` on its start, in the catalog's sort order."""
    out: dict[tuple[str, str | None, str], Finding] = {}
    for f in findings:
        k = key(f)
        n = 1
        while k in out:
            n += 1
            k = (k[0], k[1], f"{key(f)[2]}#{n}")
        out[k] = f
    return out


def same(a: Finding, b: Finding) -> bool:
    """The same finding re-reported: same identity, or same code and endpoint over an overlapping
    span (a window or stage whose start moved as lines arrived, an untimed one that got a time)."""
    if a.code != b.code or a.endpoint != b.endpoint:
        return False
    if key(a) == key(b) or a.first_ts is None or b.first_ts is None:
        return True
    return a.first_ts <= (b.last_ts or b.first_ts) and b.first_ts <= (a.last_ts or a.first_ts)


def diff(before: list[Finding], after: list[Finding]) -> tuple[list[Finding], list[Finding], list[Finding]]:
    """(opened, closed, updated) between two evaluations; used by follow mode and the TUI. A finding
    that stays (:func:`same`) but whose message, span or state changed is updated; one whose window
    stopped firing (open -> not open) is closed."""
    b, a = keyed(before), keyed(after)
    pairs = {k: k for k in a if k in b}
    for k, f in a.items():  # re-keyed: the unmatched finding of the same code and endpoint it overlaps
        if k not in pairs:
            pairs[k] = next((j for j, g in b.items() if j not in pairs.values() and j not in a and same(f, g)), None)
    matched = {j for j in pairs.values() if j is not None}
    opened = [f for k, f in a.items() if pairs[k] is None]
    closed = [g for j, g in b.items() if j not in matched]
    closed += [a[k] for k, j in pairs.items() if j is not None and b[j].open and not a[k].open]
    updated = [a[k] for k, j in pairs.items() if j is not None and a[k] != b[j] and not (b[j].open and not a[k].open)]
    return opened, closed, updated
