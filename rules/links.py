"""Symptom -> cause: a runtime finding and the config finding (DIAG-C, on what ran) that explains it.

The links are catalog data (``[[rule.caused_by]]`` on runtime rules): a runtime finding names its
cause in ``caused_by`` and the config finding names what it explains in ``explains`` when both fire on
the same role (a run-wide finding matches any role) and, where the link says ``root_cause``, the
runtime finding's evidence names that root cause.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

from .catalog import catalog
from .finding import Finding


def _role(endpoint: str | None, roles: Mapping[str, str]) -> str | None:
    if endpoint is None:
        return None
    return roles.get(endpoint, endpoint.split("-w")[0])


def link(findings: list[Finding], roles: Mapping[str, str]) -> list[Finding]:
    """The findings with ``caused_by`` / ``explains`` filled in (same order). ``roles``: endpoint -> role."""
    rules = catalog()
    config = [(i, f) for i, f in enumerate(findings) if f.code.startswith("DIAG-C")]
    caused: dict[int, list[dict]] = {}
    explains: dict[int, list[dict]] = {}
    for i, f in enumerate(findings):
        rule = rules.get(f.code)
        if rule is None or not rule.caused_by:
            continue
        mine = _role(f.endpoint, roles)
        for link_ in rule.caused_by:
            want = link_.get("root_cause")
            if want is not None and f.evidence.get("root_cause") != want:
                continue
            for j, c in config:
                theirs = _role(c.endpoint, roles)
                if c.code != link_["code"] or (mine is not None and theirs is not None and mine != theirs):
                    continue
                caused.setdefault(i, []).append({"code": c.code, "endpoint": c.endpoint, "note": link_.get("note")})
                explains.setdefault(j, []).append({"code": f.code, "endpoint": f.endpoint})
    out = []
    for i, f in enumerate(findings):
        if i in caused or i in explains:
            f = dataclasses.replace(f, caused_by=tuple(caused.get(i, ())), explains=tuple(explains.get(i, ())))
        out.append(f)
    return out
