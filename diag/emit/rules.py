"""The rule catalog as ``diag rules`` writes it: a table on a terminal, aligned plain lines when piped, or
one JSON document (schema ``diag-rules-1``). Light: it imports neither polars nor the report."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from diag.rules.catalog import Rule
from diag.rules.params import kind_of
from diag.rules.present import SEVERITY_STYLE

from . import RULES_SCHEMA, envelope


def rules_dict(rules: Sequence[Rule]) -> dict[str, Any]:
    """The ``diag rules --format json`` document (schema ``diag-rules-1``)."""
    return {**envelope(RULES_SCHEMA), "rules": [
        {"code": r.code, "name": r.name, "severity": r.severity, "scope": r.scope, "summary": r.summary,
         "health": r.health, "params": _params(r)} for r in rules]}


def rules_document(rules: Sequence[Rule]) -> str:
    """The ``diag rules --format json`` document as written."""
    return json.dumps(rules_dict(rules), indent=1) + "\n"


def _params(rule: Rule) -> dict[str, dict[str, Any]]:
    """Each settable parameter of ``rule`` (``for``, ``keep_firing_for`` included): default, type, range."""
    defaults = {"for": rule.for_s, "keep_firing_for": rule.keep_firing_for_s, **rule.params}
    out = {}
    for name, default in defaults.items():
        kind = kind_of(rule.code, name)
        if kind is not None and kind.type != "fixed":
            out[name] = {"default": default, **kind.describe()}
    return out

def render_rules(rules: Sequence[Rule], console: Console, *, table: bool) -> None:
    """The catalog, a rule a line: a table on a terminal (``table``), aligned plain lines when piped."""
    if not table:
        w = max((len(r.name) for r in rules), default=10)
        for r in rules:
            console.print(f"{r.code}  {r.name:<{w}}  {r.severity:<7}  {r.scope:<8}  {r.summary}", soft_wrap=True,
                          markup=False)
        return
    t = Table(box=None, pad_edge=False)
    for col in ("code", "name", "severity", "scope", "summary"):
        t.add_column(col, no_wrap=col != "summary")
    for r in rules:
        t.add_row(r.code, r.name, Text(r.severity, style=SEVERITY_STYLE.get(r.severity, "")), r.scope, r.summary)
    console.print(t)
