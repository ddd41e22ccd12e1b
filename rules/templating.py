"""What every coded template shares: its signature and how it builds a finding for its rule.

Kept apart from :mod:`rules.runtime` (which holds the ``TEMPLATES`` registry) so that template
modules such as :mod:`rules.incidents` need not import the registry that imports them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .catalog import Rule
from .finding import Finding, Location
from .runmodel import Run

Template = Callable[[Rule, Run], list[Finding]]


def _finding(rule: Rule, message: str, **kw: Any) -> Finding:
    """A finding of ``rule``; its fix is the catalog's one-line fix unless the rule gives its own."""
    kw.setdefault("fix", rule.fix or None)
    return Finding(rule.code, rule.name, rule.severity, message, **kw)


def _loc(file: str | None, line: int | None) -> Location | None:
    return Location(file, line) if file else None
