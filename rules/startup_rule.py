"""DIAG-S001's template: an endpoint's startup stage against the same stage of its siblings and against
the stage's limit (``rules/catalog/startup.toml``); the timeline itself is :mod:`rules.startup`."""

from __future__ import annotations

from statistics import median
from typing import Any

from .catalog import Rule
from .finding import Finding
from .present import duration, number
from .runmodel import Run
from .templating import _finding, _loc


def startup_stage(rule: Rule, run: Run) -> list[Finding]:
    """An endpoint's stage against the same stage of its siblings (those that finished it: a later
    stage began, so a growing log cannot shorten it) and against the stage's limit; the stage under
    way counts up to the endpoint's evidence (:meth:`Startup.as_of`: its own last line, noise included)."""
    p = rule.params
    limits = p.get("max_s", {})
    # a log whose local stamps are not placed on UTC times its stages on two clocks: nothing to judge there
    unplaced = {lg.path for lg in run.sources if not lg.clock_placed}
    done: dict[str, list[tuple[str, float]]] = {}
    for ep in run.endpoints.values():
        if unplaced.intersection(ep.files):
            continue
        for span in ep.startup.stages:
            took = span.duration_s()
            if ep.startup.finished(span) and took is not None:
                done.setdefault(span.stage, []).append((ep.id, took))
    out = []
    for ep in run.endpoints.values():
        if unplaced.intersection(ep.files):
            continue
        worst: tuple[float, Any, float | None, int, str] | None = None
        now = ep.startup.as_of(run.clock)
        for span in ep.startup.stages:
            took = span.duration_s(now)
            if span.stage == "serving" or took is None:
                continue
            sib = [t for eid, t in done.get(span.stage, []) if eid != ep.id]
            med = median(sib) if len(sib) >= p.get("min_siblings", 1) else None
            why = ""
            if med is not None and took > p["ratio"] * med and took - med >= p["min_excess_s"]:
                why = "siblings"
            elif span.stage in limits and took > limits[span.stage]:
                why = "limit"
            if why and (worst is None or took - (med or 0) > worst[0] - (worst[2] or 0)):
                worst = (took, span, med, len(sib), why)
        if worst is None:
            continue
        took, span, med, n_sib, why = worst
        verb = "has been in" if span.end is None else "took"
        what = f"{ep.id} {verb} {span.label} for {duration(took)}" if span.end is None else \
            f"{ep.id} took {duration(took)} in {span.label}"
        if span.progress:
            what += f" ({number(span.progress[0])}/{number(span.progress[1])} at its last progress line)"
        if med:
            what += f", {took / med:,.0f}x the {duration(med)} its {number(n_sib)} sibling(s) took"
        elif med is not None:  # the siblings went through the stage within their clock's second
            what += f", where its {number(n_sib)} sibling(s) took {duration(med)}"
        if why == "limit" or med is None:
            what += f" (limit {duration(limits[span.stage])})" if span.stage in limits else ""
        ready = [e.id for e in run.endpoints.values() if e.id != ep.id and e.startup.ready_at is not None]
        if span.end is None and ready:
            what += f"; {number(len(ready))} other endpoint(s) are ready"
        ev: dict[str, Any] = {"stage": span.stage, "seconds": round(took, 1), "open": span.end is None,
                              "sibling_median_s": None if med is None else round(med, 1), "siblings": n_sib,
                              "limit_s": limits.get(span.stage), "compared_with": why}
        if span.progress:
            ev["progress"] = list(span.progress)
        out.append(_finding(rule, what, endpoint=ep.id, first_ts=span.start, last_ts=span.end or now,
                            open=span.end is None, location=_loc(*span.where) if span.where else None,
                            evidence=ev))
    return out
