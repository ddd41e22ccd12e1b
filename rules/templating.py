"""What every coded template shares: its signature and how it builds a finding for its rule.

Kept apart from :mod:`rules.runtime` (which holds the ``TEMPLATES`` registry) so that template
modules such as :mod:`rules.incidents` need not import the registry that imports them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .catalog import Rule
from .finding import Finding, Location
from .runmodel import Endpoint, Run

Template = Callable[[Rule, Run], list[Finding]]


def _finding(rule: Rule, message: str, **kw: Any) -> Finding:
    """A finding of ``rule``; its fix is the catalog's one-line fix unless the rule gives its own."""
    kw.setdefault("fix", rule.fix or None)
    return Finding(rule.code, rule.name, rule.severity, message, **kw)


def _loc(file: str | None, line: int | None) -> Location | None:
    return Location(file, line) if file else None


def empty_logs(run: Run, ep: Endpoint) -> tuple[str, ...]:
    """The endpoint's log files that are empty (0 bytes read without error, not a line nor a record in them):
    its worker wrote nothing there."""
    return tuple(s.path for s in run.sources if s.path in ep.files and s.kind != "prometheus" and not s.error
                 and s.size == 0 and s.counts.lines == 0 and not s.records and not s.stats.height)


def log_empty(run: Run, ep: Endpoint) -> bool:
    """Every log file of the endpoint is empty (it is known from its file names alone)."""
    logged = {s.path for s in run.sources if s.kind != "prometheus"}.intersection(ep.files)
    return bool(logged) and logged <= set(empty_logs(run, ep))
