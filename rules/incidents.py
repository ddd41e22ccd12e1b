"""Fault incidents (DIAG-E001 engine-dead, DIAG-E004 startup-failure) and accuracy (DIAG-A001).

Faults within ``window_s`` of each other are one incident; its root cause is the most specific
cause among them. The incident is a startup failure only on evidence that the endpoint never became
ready; where the log cannot tell, the cause's own phase decides, and otherwise it is a runtime death
(:func:`_phase`); its finding says which evidence decided (``phase_by``). :mod:`rules.runtime` registers ``fault_incident`` and
``accuracy`` in its ``TEMPLATES``.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from datetime import UTC, datetime
from statistics import median

from diag.parsers import engines
from diag.parsers.faults import CAUSES, CUT, ESCAPED, TAXONOMY, TEARDOWN, UNCLASSIFIED
from diag.parsers.records import Fault, StageMark

from .catalog import Rule
from .finding import Finding
from .present import number
from .runmodel import Run
from .templating import _finding, _loc

# ---------------------------------------------------------------- fault incidents (E001, E004)

_EPOCH = datetime.min.replace(tzinfo=UTC)
# The taxonomy (parsers/catalog/faults.toml and each engine's) is the one source of causes: its order is the rank.
# Deaths come after every other cause (they are the consequence side of an incident), and one request's failure
# after them all: it is what a dying engine does to the requests in flight, never why it died.
CAUSE_RANK = (*(c.name for c in TAXONOMY if not c.death and c.cls != "request"), UNCLASSIFIED.name, CUT.name,
              *(c.name for c in TAXONOMY if c.death), ESCAPED.name, *(c.name for c in TAXONOMY if c.cls == "request"))
DEATH = frozenset(c.name for c in (*TAXONOMY, ESCAPED) if c.death)
FATAL = frozenset(c.name for c in TAXONOMY if c.fatal)
FATAL_RAISED = frozenset(c.name for c in TAXONOMY if c.fatal_raised)   # fatal as an exception (catalog fatal_raised)
CAUSE_TEXT = {name: c.text for name, c in CAUSES.items()}
STARTUP_CAUSES = frozenset(c.name for c in TAXONOMY if c.phase == "startup")   # only a starting engine meets them
SERVING_CAUSES = frozenset(c.name for c in TAXONOMY if c.phase == "serving")   # only a serving engine meets them
# Words in a traceback's frames or a fault's text that place it: serving code, start-up code, and an engine's
# serving loop (an exception escaping it ends the engine, whatever its type). Core's are generic; each engine
# adds its own function names (``ADAPTER.frames``).
RUNTIME_MARKERS = ("serving_", "completion", "generate", "step", *engines.frames("runtime"))
STARTUP_MARKERS = ("load_model", "__init__", "initialization failed", "failed to start", "capture_end",
                   "ncclCommInitRank", "init_process_group", *engines.frames("startup"))  # a communicator's creation
# What decided an incident's phase (its finding's evidence ``phase_by``; :func:`_phase` gives the order).
PHASE_BY = ("cause phase", "readiness", "frames", "site phase", "serving evidence", "never ready",
            "no evidence: default")
FRAME_PHASE = {"startup": "startup", "serving": "runtime"}   # parsers.frames' phases as an incident's


@dataclass(frozen=True)
class Phase:
    """An incident's phase (startup | runtime), what decided it (one of :data:`PHASE_BY`) and the evidence."""

    phase: str
    by: str
    why: str
    frame: str | None = None   # the deciding frame (``module:function``) when the frames decided


def _marker(texts: list[str], markers: tuple[str, ...]) -> str | None:
    return next((m for t in texts for m in markers if m in t), None)


def _ready_before(run: Run, group: list[tuple[str, str, Fault]]) -> str | None:
    """What shows an endpoint of the incident ready (:mod:`rules.serving`) before its first fault, if anything."""
    _, file, first = group[0]
    for eid in dict.fromkeys(e for e, _, _ in group):
        if (ep := run.endpoints.get(eid)) is not None and (r := ep.served.before(first.ts, file, first.line)):
            return f"{r.what} ({r.file.rsplit('/', 1)[-1]}:{r.line}) before it"
    return None


def _never_ready(run: Run, group: list[tuple[str, str, Fault]]) -> str | None:
    """What shows the incident's endpoints starting and never ready, if anything: their start-up stage lines
    before the fault and no readiness evidence at all, or the orchestrator still waiting for workers."""
    _, file, first = group[0]
    eps = [ep for eid in dict.fromkeys(e for e, _, _ in group) if (ep := run.endpoints.get(eid)) is not None]
    if eps and not any(ep.served.evidence or ep.startup.ready_at for ep in eps):
        for ep in eps:
            mark = next((r for f, r in ep.records if isinstance(r, StageMark) and (
                (r.ts is not None and first.ts is not None and r.ts <= first.ts) or (f == file and r.line < first.line))),
                None)
            if mark is not None and (cur := ep.startup.current) is not None and cur.stage not in ("ready", "serving"):
                return f"its start-up lines reach {cur.label} and no ready line follows"
    polls = [r for _, r in run.lifecycle if r.event == "not_ready"]
    if polls and run.ready_at() is None:
        return f"the orchestrator was still waiting for workers ({number(len(polls))} not-ready poll(s), no ready)"
    return None


def _phase(run: Run, group: list[tuple[str, str, Fault]], ready: datetime | None) -> Phase:
    """The incident's phase from evidence, in this order: a start-up-only cause (``cause phase``); the endpoint
    ready before the fault (its ready line, a stats line, the orchestrator's readiness or benchmark: ``readiness``);
    the frames of its first traceback an engine's start-up path or serving loop decides (``frames``); the phase of
    the log site that printed a line of it, start-up or serving only (``site phase``); request lines in its files
    (``serving evidence``); start-up code named in its lines with no serving code, the fault before the
    orchestrator saw the workers ready, start-up stage lines with no ready line or the orchestrator
    still waiting (``never ready``); a serving-only cause (``cause phase``); serving code or a request id in its
    lines (``serving evidence``); else a runtime death (``no evidence: default``)."""
    causes = [f.cause for _, _, f in group]
    if cause := next((c for c in causes if c in STARTUP_CAUSES), None):
        return Phase("startup", "cause phase", f"a start-up-only cause ({cause})")
    if why := _ready_before(run, group):
        return Phase("runtime", "readiness", why)
    first = group[0][2].ts
    if ready is not None and first is not None and first >= ready:
        return Phase("runtime", "readiness", "the orchestrator saw the workers ready before it")
    if framed := next((f for _, _, f in group if f.frame_phase), None):
        return Phase(FRAME_PHASE[framed.frame_phase], "frames",
                     f"its traceback runs through {framed.frame_at} ({framed.frame_phase} code)", framed.frame_at)
    if sited := next((f for _, _, f in group if f.site and f.phase in FRAME_PHASE), None):
        where = "while it starts" if sited.phase == "startup" else "while it serves"
        return Phase(FRAME_PHASE[sited.phase], "site phase",
                     f"its line is printed by engine code that runs only {where} (log site {sited.site})")
    if any(ep.served.requests for eid in {e for e, _, _ in group} if (ep := run.endpoints.get(eid))):
        return Phase("runtime", "serving evidence", "request lines in its log")
    texts = [" ".join((f.message, f.exception or "", f.where or "", *f.frames)) for _, _, f in group]
    serving = _marker(texts, RUNTIME_MARKERS)
    if serving is None and (m := _marker(texts, STARTUP_MARKERS)):
        return Phase("startup", "never ready", f"its lines name start-up code ({m})")
    if ready is not None and first is not None:
        return Phase("startup", "never ready", "it came before the orchestrator saw the workers ready")
    if why := _never_ready(run, group):
        return Phase("startup", "never ready", why)
    if cause := next((c for c in causes if c in SERVING_CAUSES), None):
        return Phase("runtime", "cause phase", f"a serving-only cause ({cause})")
    if serving is not None:
        return Phase("runtime", "serving evidence", f"its lines name serving code or a request ({serving})")
    return Phase("runtime", "no evidence: default", "no line says whether the endpoint was ready")


def _incidents(faults: list[tuple[str, str, Fault]], window_s: float) -> list[list[tuple[str, str, Fault]]]:
    """The faults grouped into incidents (each within ``window_s`` of the one before); the lines a failure's
    teardown produces (catalog ``teardown``) are no part of any: they are its consequence, never its cause."""
    groups: list[list[tuple[str, str, Fault]]] = []
    for item in faults:
        if item[2].cause in TEARDOWN:
            continue
        ts = item[2].ts
        if groups and (ts is None or groups[-1][-1][2].ts is None
                       or (ts - groups[-1][-1][2].ts).total_seconds() <= window_s):
            groups[-1].append(item)
        else:
            groups.append([item])
    return groups


def fatal_phase(run: Run, group: list[tuple[str, str, Fault]], ready: datetime | None) -> Phase | None:
    """The phase of an incident that killed or kept an engine from starting, None when it did not: a death or
    fatal cause in it (or, raised, a cause fatal when raised: catalog ``fatal_raised``), or an error traceback (cut
    or whole, whatever its cause) whose frames run through an engine's start-up path (an exception escaping its
    construction stops it from starting) or its serving loop (an exception escaping it ends the engine), the
    incident's phase agreeing (:mod:`parsers.frames`)."""
    causes = {f.cause for _, _, f in group}
    fatal = bool(causes & (DEATH | FATAL) or any(f.exception and f.cause in FATAL_RAISED for _, _, f in group))
    framed = {FRAME_PHASE[f.frame_phase] for _, _, f in group if f.frame_phase}
    if not fatal and not framed:
        return None
    phase = _phase(run, group, ready)
    return phase if fatal or phase.phase in framed else None


def fault_incident(rule: Rule, run: Run) -> list[Finding]:
    p = rule.params
    faults = run.faults()
    ready = run.ready_at()
    out = []
    for group in _incidents(faults, float(p["window_s"])):
        phase = fatal_phase(run, group, ready)
        if phase is None or phase.phase != p["phase"]:
            continue
        root = min(group, key=lambda t: (CAUSE_RANK.index(t[2].cause) if t[2].cause in CAUSE_RANK else 99,
                                          t[2].ts or _EPOCH, t[2].line))
        eid, file, fault = root
        fan = Counter(f.cause for _, _, f in group)
        endpoints = sorted({e for e, _, _ in group})
        msg = f"{eid}: {CAUSE_TEXT.get(fault.cause, fault.cause)}"
        if fault.exception:
            msg += f" ({fault.exception[:160]})"
        elif fault.frames:  # a cut traceback, named by its call site when not CUT (parsers.callsites)
            site = (f"named by its log site {fault.site} at {fault.where}; " if fault.site else
                    f"named by its call site {fault.where}; " if fault.cause != CUT.name and fault.where else "")
            msg += f" ({site}innermost frame seen: {fault.frames[-1]})"
        if len(group) > 1:
            msg += f"; {number(len(group) - 1)} follow-on error(s) folded in" + (
                f" across {', '.join(endpoints)}" if len(endpoints) > 1 else "")
        msg += f"; phase by {phase.by}: {phase.why}"
        out.append(_finding(rule, msg, endpoint=eid, first_ts=group[0][2].ts, last_ts=group[-1][2].ts,
                            location=_loc(file, fault.traceback_line or fault.line),
                            evidence={"root_cause": fault.cause, "faults": dict(fan), "endpoints": endpoints,
                                      "line": fault.message[:300], "phase_by": phase.by,
                                      "phase_evidence": phase.why, **({"frame": phase.frame} if phase.frame else {})}))
    if p["phase"] == "startup":
        out.extend(_readiness_stall(rule, run))
    return out


def _readiness_stall(rule: Rule, run: Run) -> list[Finding]:
    polls = [(f, r) for f, r in run.lifecycle if r.event == "not_ready"]
    if run.ready_at() is not None or len(polls) < rule.params.get("stall_polls", 10):
        return []
    file, last = polls[-1]
    missing = f"{last.get('waiting_prefill', '?')} prefill and {last.get('waiting_decode', '?')} decode"
    return [_finding(rule, f"workers never became ready: still waiting for {missing} worker(s) after "
                     f"{number(len(polls))} polls", first_ts=polls[0][1].ts, last_ts=last.ts, location=_loc(file, last.line),
                     evidence={"polls": len(polls), "last": dict(last.fields)})]


# ---------------------------------------------------------------- uncaught exceptions (E005)

def ends_a_said_error(file: str, f: Fault, said: set[tuple[str, int]]) -> bool:
    """Whether ``f`` is the exception ending the traceback of an error line in ``said`` ((file, line) of the
    lines a cause explains): the traceback starts on that line or the next two, and is the same failure."""
    return f.exception is not None and f.traceback_line is not None and any(
        (file, f.traceback_line - d) in said for d in (0, 1, 2))


def uncaught_exception(rule: Rule, run: Run) -> list[Finding]:
    """Exceptions that end a traceback outside any engine-death incident: the ones no taxonomy entry
    knows ("unclassified") and those of a non-fatal class (config), each quoted once per endpoint."""
    p = rule.params
    classes = set(p["classes"])
    ready = run.ready_at()
    out = []
    for group in _incidents(run.faults(), float(p["window_s"])):
        if fatal_phase(run, group, ready) is not None:
            continue  # E001/E004 name it as the root cause
        seen: dict[tuple[str, str], list[tuple[str, Fault]]] = {}
        said = {(file, f.line) for _, file, f in group if not f.exception and f.cause in CAUSES
                and CAUSES[f.cause].cls not in classes}
        # the lines heading a traceback cut before its exception (it, or the blank line after it, just before)
        heads = {(file, f.traceback_line - d) for _, file, f in group if f.cause == CUT.name and f.traceback_line
                 for d in (1, 2)}
        for eid, file, f in group:
            cls = CAUSES[f.cause].cls if f.cause in CAUSES else "unknown"
            if ends_a_said_error(file, f, said):
                continue
            if cls in classes and (f.exception or f.cause == UNCLASSIFIED.name or (
                    f.cause != CUT.name and (file, f.line) in heads)):
                seen.setdefault((eid, f.exception or f.message), []).append((file, f))
        for (eid, text), hits in seen.items():
            file, f = hits[0]
            cls = CAUSES[f.cause].cls if f.cause in CAUSES else "unknown"
            label = "unclassified" if cls == "unknown" else cls
            out.append(_finding(rule, f"{eid}: uncaught {label} exception: {text[:200]}", endpoint=eid,
                                first_ts=f.ts, last_ts=hits[-1][1].ts,
                                location=_loc(file, f.traceback_line or f.line),
                                evidence={"exception": text[:300], "cause_class": label, "count": len(hits),
                                          "frames": list(f.frames)}))
    return out


# ---------------------------------------------------------------- accuracy (A001)

def accuracy(rule: Rule, run: Run) -> list[Finding]:
    scores = run.accuracy_scores()
    if not scores:
        return []
    med = median(s for _, s in scores)
    out = []
    for label, s in scores:
        if s < rule.params["min_score"] or (len(scores) > 2 and s < rule.params["rel_drop"] * med):
            msg = f"{label}: accuracy {s:,.3f} (sweep median {med:,.3f})"
            hint = run.async_race_hint()
            if hint:
                msg += f"; {hint}"
            out.append(_finding(rule, msg, evidence={"score": s, "median": med, "label": label}))
    return out
