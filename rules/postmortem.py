"""The postmortem of a failed run: when it went wrong, its root causes and who owns each fix, what was set
aside (consequences after the failure, noise before it), and the run's timeline.

The policy (which runs failed, owners by fault class, which orchestrator events the timeline shows) is
catalog data, ``rules/catalog/postmortem.toml``; this module reads the run model, the findings and the
fault catalogs, never an engine's wording. Computed once, in diag's analyze.
"""

from __future__ import annotations

import tomllib
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import cache
from importlib import resources
from typing import Any

from diag.parsers.faults import CAUSES, CUT, TEARDOWN, UNCLASSIFIED

from .catalog import OWNERS, catalog
from .engine import cause_key
from .finding import Finding
from .incidents import DEATH
from .present import clock, number, prose
from .runmodel import Run
from .verdict import Verdict

KINDS = ("stage", "startup", "ready", "benchmark", "error", "death", "failure", "teardown")  # at one time, this order
SHOWN = ("warning", "error")
BENCH_LOG = "benchmark.out"      # the result source whose lines a benchmark point's location counts      # the severities a postmortem sets aside (info findings are no evidence)
_EPOCH = datetime.min.replace(tzinfo=UTC)


@cache
def policy() -> dict[str, Any]:
    """``rules/catalog/postmortem.toml``, checked: every owner it names is one of :data:`OWNERS`, and each has
    its next step."""
    text = resources.files("diag.rules").joinpath("catalog", "postmortem.toml").read_text(encoding="utf-8")
    data = tomllib.loads(text)
    named = [*data["owner"]["fault_class"].values(), data["config_owner"], *(e["owner"] for e in data["examples"]),
             *data["next_step"]]
    if tuple(data["owners"]) != OWNERS or (bad := sorted(set(named) - set(OWNERS))):
        raise ValueError(f"postmortem.toml: owners must be {', '.join(OWNERS)}; unknown: {bad}")
    if missing := [o for o in OWNERS if o not in data["next_step"]]:
        raise ValueError(f"postmortem.toml: [next_step] lacks {', '.join(missing)}")
    return data


def _at(file: str | None, line: int | None) -> str | None:
    return None if not file else f"{file}:{line}" if line else file


def _finding_at(f: Finding) -> str | None:
    return _at(f.location.path, f.location.line) if f.location else None


def _order(ts: datetime | None) -> tuple[bool, datetime]:
    return ts is None, ts or _EPOCH


@dataclass(frozen=True)
class Event:
    """One entry of a run's timeline."""

    ts: datetime | None
    kind: str                       # stage | startup | ready | benchmark | error | death | failure | teardown
    text: str
    at: str | None = None           # file:line
    endpoint: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"ts": self.ts.isoformat() if self.ts else None, "kind": self.kind, "text": self.text,
                "at": self.at, "endpoint": self.endpoint}


@dataclass(frozen=True)
class RootCause:
    """A finding the failure rests on, and who owns its fix (and why the evidence says so)."""

    code: str
    endpoint: str | None
    text: str
    owner: str                      # one of OWNERS
    why: str
    at: str | None
    ts: datetime | None
    cause: str | None = None        # the fault cause (an incident's root cause), when one is named
    config: tuple[str, ...] = ()    # the config findings (DIAG-C) that explain it
    engine: str | None = None       # for an engine-owned cause: the engine and its build
    build: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"code": self.code, "endpoint": self.endpoint, "text": self.text, "owner": self.owner,
                "why": self.why, "at": self.at, "ts": self.ts.isoformat() if self.ts else None,
                "cause": self.cause, "config": list(self.config), "engine": self.engine, "build": self.build}


@dataclass(frozen=True)
class SetAside:
    """A finding or a group of fault lines that is not a cause: a consequence after the failure, or noise the
    run survived before it; ``reason`` says which and why."""

    text: str
    reason: str
    at: str | None
    ts: datetime | None
    code: str | None = None
    endpoint: str | None = None
    count: int = 1

    def to_dict(self) -> dict[str, Any]:
        return {"code": self.code, "endpoint": self.endpoint, "text": self.text, "reason": self.reason,
                "at": self.at, "ts": self.ts.isoformat() if self.ts else None, "count": self.count}


@dataclass(frozen=True)
class Postmortem:
    """A failed run: the failure moment and what marks it, the first error at or before it, the root causes
    with their owners, and what was set aside."""

    failed_at: datetime | None
    marked_by: tuple[Event, ...]
    first_error: Event | None
    root_causes: tuple[RootCause, ...]
    consequences: tuple[SetAside, ...] = ()
    noise: tuple[SetAside, ...] = ()

    @property
    def owner(self) -> str:
        """The first root cause's owner (``unknown`` without one)."""
        return self.root_causes[0].owner if self.root_causes else "unknown"

    def to_dict(self) -> dict[str, Any]:
        return {"failed_at": self.failed_at.isoformat() if self.failed_at else None, "owner": self.owner,
                "marked_by": [e.to_dict() for e in self.marked_by],
                "first_error": self.first_error.to_dict() if self.first_error else None,
                "root_causes": [r.to_dict() for r in self.root_causes],
                "consequences": [s.to_dict() for s in self.consequences],
                "noise": [s.to_dict() for s in self.noise]}


# ------------------------------------------------------------------ owners
def fault_owner(cause: str) -> tuple[str, str]:
    """(owner, why) of a fault cause: its own ``owner`` in the fault catalogs, else its class's."""
    c = CAUSES.get(cause) or (CUT if cause == CUT.name else UNCLASSIFIED)
    owner = c.owner or policy()["owner"]["fault_class"].get(c.cls, "unknown")
    whose = "its own owner" if c.owner else f"the owner of its class, {c.cls}"
    return owner, f"fault cause {cause} ({c.text}): {whose}; no config rule faults what ran"


def _counted_owner(f: Finding) -> tuple[str, str, str] | None:
    """(owner, why, fault cause) of a finding that counts fault lines (``evidence.counts`` by cause) when exactly
    one owner is stated by the causes counted that carry their own: the others are what that fault makes fail."""
    counts = f.evidence.get("counts") if f.evidence else None
    if not isinstance(counts, dict):
        return None
    owned = {name: c.owner for name in counts if (c := CAUSES.get(name)) is not None and c.owner}
    if len(set(owned.values())) != 1:
        return None
    cause = min(owned, key=list(counts).index)
    owner = owned[cause]
    others = sum(n for name, n in counts.items() if name not in owned)
    return owner, (f"fault cause {cause} ({CAUSES[cause].text}): its own owner"
                   + (f"; the other {number(others)} failure(s) counted follow from it" if others else "")), cause


def owner_of(f: Finding, recipe_read: bool = True) -> tuple[str, str, str | None]:
    """(owner, why, fault cause) of a root-cause finding: the config rule that explains it, else its fault
    cause's owner, else its rule's own, else unknown. The engine owns a fault only with valid flags: without
    the run's recipe (``recipe_read`` false: an excerpt, a folder without its config) nothing shows that no
    config rule faults what ran, so an ``engine`` owner reads ``unknown``."""
    owner, why, cause = _owner_of(f)
    if owner == "engine" and not recipe_read:
        return "unknown", f"{why}; {policy()['owner']['engine_without_recipe']}", cause
    return owner, why, cause


def _owner_of(f: Finding) -> tuple[str, str, str | None]:
    rules = catalog()
    cause = f.evidence.get("root_cause") if f.evidence else None
    for link in f.caused_by:
        rule = rules.get(link["code"])
        owner = (rule.owner if rule is not None else None) or policy()["config_owner"]
        return owner, f"{link['code']} on what ran explains it" + (f": {link['note']}" if link.get("note") else ""), cause
    if isinstance(cause, str):
        owner, why = fault_owner(cause)
        return owner, why, cause
    if (counted := _counted_owner(f)) is not None:
        return counted
    rule = rules.get(f.code)
    if rule is not None and rule.owner:
        return rule.owner, f"{f.code}: {rule.summary}", None
    return "unknown", "nothing in the evidence settles whose fix it is", None


def _root(run: Run, f: Finding) -> RootCause:
    owner, why, cause = owner_of(f, run.recipe is not None)
    engine = owner == "engine"
    return RootCause(f.code, f.endpoint, f.message.split(" (", 1)[0], owner, why, _finding_at(f), f.first_ts, cause,
                     tuple(c["code"] for c in f.caused_by), run.engine_name if engine else None,
                     run.build if engine else None)


def next_step(r: RootCause) -> str:
    """The next step of a root cause by its owner (``[next_step]`` of the policy), filled in with its endpoint,
    location and, for an engine's, the engine and build (``-`` where the evidence lacks one)."""
    return prose(policy()["next_step"][r.owner], {"endpoint": r.endpoint or "-", "at": r.at or "-",
                                                  "engine": r.engine or "-", "build": r.build or "-"})


# ------------------------------------------------------------------ the timeline
def _lifecycle_events(run: Run) -> list[Event]:
    table = policy()["timeline"]["lifecycle"]
    out = []
    for file, ev in run.lifecycle:
        spec = table.get(ev.event)
        if spec is None:
            continue
        words = spec["text"].format_map(_Fields((k, number(v) if isinstance(v, int) and not isinstance(v, bool)
                                                 else v) for k, v in ev.fields))
        out.append(Event(ev.ts, spec["kind"], words, _at(file, ev.line)))
    return out


class _Fields(dict[str, Any]):
    """An event's fields for a text template: a field the event lacks reads as ``?``."""

    def __missing__(self, key: str) -> str:
        return "?"


def _endpoint_events(run: Run) -> list[Event]:
    out = []
    for ep in run.endpoints.values():
        for span in ep.startup.stages:
            if span.stage in ("ready", "serving") or span.end is None:
                continue
            where = _at(*span.where) if span.where else None
            out.append(Event(span.end, "startup", f"{span.label} done", where, ep.id))
        if ep.startup.ready_at is not None:
            r = ep.startup.span("ready")
            out.append(Event(ep.startup.ready_at, "ready", "ready", _at(*r.where) if r and r.where else None, ep.id))
        deaths = [(f, r) for f, r in ep.records if getattr(r, "cause", None) in DEATH]
        if deaths:
            file, r = deaths[0]
            out.append(Event(r.ts, "death", f"{CAUSES[r.cause].text}", _at(file, r.line), ep.id))  # type: ignore[attr-defined]
    return out


def _benchmark_events(run: Run) -> list[Event]:
    out = []
    bench_log = next((s.path for s in run.sources if s.path.endswith(BENCH_LOG)), None)
    for b in run.benchmark:
        at = _at(bench_log, b.line) if b.line and b.source == BENCH_LOG else None
        label = f"benchmark point C={number(b.concurrency)}" if b.concurrency else "benchmark point"
        if b.started is not None:
            out.append(Event(b.started, "benchmark", f"{label} started", at))
        if b.ended is not None or not b.complete:
            out.append(Event(b.ended, "benchmark", f"{label} {'ended' if b.complete else 'cut short'}", at))
    return out


KEPT_KINDS = ("error", "death", "failure")   # the events a timeline cut to a size keeps whatever the size
SPARE_KINDS = ("startup",)                  # the events that give way first


def kept(kinds: Sequence[str], limit: int) -> list[int]:
    """The indices (in order) of the timeline events, given as their kinds, that a timeline cut to ``limit``
    events shows: the failure's always, start-up stages last."""
    ranked = sorted(range(len(kinds)), key=lambda i: (kinds[i] not in KEPT_KINDS, kinds[i] in SPARE_KINDS, i))
    return sorted(ranked[:limit])


def timeline(run: Run, pm: Postmortem | None = None) -> tuple[Event, ...]:
    """The run's events in time order (those without a time last, in their files' order): the orchestrator's
    stages, each endpoint's start-up stages, ready time and first death, the benchmark points, and a failed
    run's first error."""
    events = [*_lifecycle_events(run), *_endpoint_events(run), *_benchmark_events(run)]
    if pm is not None and pm.first_error is not None:
        events.append(pm.first_error)
    return tuple(sorted(events, key=lambda e: (*_order(e.ts), KINDS.index(e.kind))))


# ------------------------------------------------------------------ the postmortem
def failed(verdict: Verdict | None, findings: Sequence[Finding]) -> bool:
    """Whether the run failed: its verdict's outcome says so, or a finding a failure rests on stands (not a
    likely consequence of another)."""
    p = policy()
    if verdict is not None and verdict.outcome in p["failed_outcomes"]:
        return True
    return any(f.code in p["failure_rules"] and f.severity == "error" and cause_key(f) is None for f in findings)


def _roots(findings: Sequence[Finding], verdict: Verdict | None) -> list[Finding]:
    """The findings the failure rests on: the first fatal incident (a finding that takes its endpoint DOWN)
    when there is one, else the verdict's findings and the failure rules' that are no consequence."""
    rules = catalog()
    own = [f for f in findings if cause_key(f) is None and f.severity in SHOWN]
    fatal = sorted((f for f in own if (r := rules.get(f.code)) is not None and r.health == "DOWN"
                    and f.evidence.get("root_cause")), key=lambda f: _order(f.first_ts))
    if fatal:
        return [f for f in fatal if f.first_ts == fatal[0].first_ts]
    rests = set(verdict.findings) if verdict is not None else set()
    picked = [f for f in own if (f.code, f.endpoint) in rests or f.code in policy()["failure_rules"]]
    return sorted(picked, key=lambda f: _order(f.first_ts))


def _first_error(run: Run, failed_at: datetime | None, roots: Sequence[Finding]) -> Event | None:
    """The first fault line at or before the failure moment (a death line is the consequence side of an
    incident and a teardown line a failure's echo, neither its error), else the earliest root cause's own line
    (a stamped one first; an unstamped one with its line, as an argument error before any log clock)."""
    for eid, file, f in run.faults():
        if f.ts is not None and f.cause not in DEATH | TEARDOWN and (failed_at is None or f.ts <= failed_at):
            text = CAUSES[f.cause].text if f.cause in CAUSES else (f.exception or f.message)[:160]
            return Event(f.ts, "error", f"first error: {text}", _at(file, f.traceback_line or f.line),
                         None if eid == "run" else eid)
    first = next((f for f in sorted(roots, key=lambda f: f.first_ts is None)
                  if f.severity == "error" and (f.first_ts is not None or f.location is not None)), None)
    if first is None:
        return None
    return Event(first.first_ts, "error", f"first error: {first.message.split(' (', 1)[0]}", _finding_at(first),
                 first.endpoint)


def _set_aside(findings: Sequence[Finding], roots: Sequence[Finding], failed_at: datetime | None
               ) -> tuple[list[SetAside], list[SetAside]]:
    """Findings that are no root cause: those after the failure (or marked as another's likely consequence)
    are consequences; warnings and errors the run survived before it are noise. Untimed findings (on the
    recipe, on what ran) are neither."""
    after: list[SetAside] = []
    before: list[SetAside] = []
    for f in findings:
        if f in roots or f.severity not in SHOWN or f.first_ts is None:
            continue
        at = _finding_at(f)
        cause = cause_key(f)
        if cause is not None:
            after.append(SetAside(f.message, f"likely consequence of {cause[0]} on {cause[1]} (it began after that "
                                  "death)", at, f.first_ts, f.code, f.endpoint))
        elif failed_at is not None and f.first_ts >= failed_at:
            after.append(SetAside(f.message, f"began at {clock(f.first_ts)}, at or after the failure at "
                                  f"{clock(failed_at)}: teardown or fan-out", at, f.first_ts, f.code, f.endpoint))
        elif failed_at is not None:
            before.append(SetAside(f.message, f"a {f.severity} the run survived: it began at {clock(f.first_ts)}, "
                                   f"before the failure at {clock(failed_at)}", at, f.first_ts, f.code, f.endpoint))
    return after, before


def _fault_lines_after(run: Run, failed_at: datetime | None, first: Event | None) -> list[SetAside]:
    """Fault lines after the failure moment, one entry per endpoint and cause: an engine death's echoes
    (fan-out) or the errors teardown produces."""
    if failed_at is None:
        return []
    groups: dict[tuple[str, str], list[tuple[str, Any]]] = {}
    for eid, file, f in run.faults():
        if f.ts is not None and f.ts > failed_at and _at(file, f.traceback_line or f.line) != (first and first.at):
            groups.setdefault((eid, f.cause), []).append((file, f))
    out = []
    for (eid, cause), hits in groups.items():
        file, f = hits[0]
        text = CAUSES[cause].text if cause in CAUSES else (f.exception or f.message)[:160]
        why = ("the death's fan-out" if cause in DEATH else f"teardown ({CAUSES[cause].text})" if cause in TEARDOWN
               else "teardown or fan-out")
        out.append(SetAside(f"{eid}: {text}", f"{len(hits)} fault line(s) after the failure at {clock(failed_at)}: "
                            f"{why}", _at(file, f.traceback_line or f.line), f.ts, None, eid, len(hits)))
    return out


def postmortem(run: Run, findings: Sequence[Finding], verdict: Verdict | None) -> Postmortem | None:
    """The postmortem of a failed run (:func:`failed`); None for a run that did not fail."""
    if not failed(verdict, findings):
        return None
    roots = _roots(findings, verdict)
    kinds = policy()["timeline"]["failure_kinds"]
    marks = [e for e in _lifecycle_events(run) if e.kind in kinds]
    fatal = [Event(f.first_ts, "failure", f"{f.code} {f.message.split(' (', 1)[0]}", _finding_at(f), f.endpoint)
             for f in roots if catalog()[f.code].health == "DOWN"]
    stamped = [e.ts for e in (*fatal, *marks) if e.ts is not None]
    failed_at = min(stamped) if stamped else next((f.first_ts for f in roots if f.first_ts is not None), None)
    first = _first_error(run, failed_at, roots)
    after, before = _set_aside(findings, roots, failed_at)
    after += _fault_lines_after(run, failed_at, first)
    return Postmortem(failed_at, tuple(sorted([*fatal, *marks], key=lambda e: _order(e.ts))), first,
                      tuple(_root(run, f) for f in roots), tuple(sorted(after, key=lambda s: _order(s.ts))),
                      tuple(before))


__all__ = ["Event", "Postmortem", "RootCause", "SetAside", "failed", "fault_owner", "next_step", "owner_of",
           "policy", "postmortem", "timeline"]
