"""Faults of lines by the log site that printed them (:mod:`parsers.sites`): what the line parser makes of an error
line, an exception or a level-less line the fault formats leave unclassified."""

from __future__ import annotations

from typing import Any

from . import faults, sites
from .records import Fault


def site_fault(line: int, msg: str, cause: str | None, exc: tuple[str, str] | None, stamp: dict[str, Any],
                only: str | None = None, **fields: Any) -> list[Fault]:
    """The fault of a line the fault parsing left unclassified (``cause`` None or the unclassified exception),
    by the log site that printed it: its class's generic cause, phase and id; none for a benign site; else the
    line's own cause (an unclassified exception stays one). A line of a level-less head (``only``: its engine)
    takes only a site of that engine logging an error. The site tables are read only here."""
    site = None
    if cause is None or cause == faults.UNCLASSIFIED.name:
        text = exc[1] if exc is not None else msg
        scope = {"engines": (only,), "logged": True} if only else {}
        site = sites.match(text, exc[0] if exc is not None else None, **scope) if text else None
    if site is not None:
        if site.cls == "benign":
            return []
        return [Fault(line, cause=faults.SITE_CAUSES[site.cls], message=msg.strip()[:500], site=site.id,
                      phase=site.phase, **fields, **stamp)]
    return [] if cause is None else [Fault(line, cause=cause, message=msg.strip()[:500], **fields, **stamp)]


def bare_fault(line: int, msg: str, stamp: dict[str, Any]) -> list[Fault]:
    """The fault of an exception line standing alone (no traceback open, no level: quoted, printed): only when a
    site raises that very exception with that message (a bare ``SomeError: text`` is no evidence by itself)."""
    bare = faults.exception_line(msg)
    if bare is None or not bare[1]:
        return []
    site = sites.match(bare[1], bare[0])
    if site is None or "raise" not in site.levels or bare[0] not in site.exceptions:
        return []
    return site_fault(line, msg, None, bare, stamp, exception=f"{bare[0]}: {bare[1]}")
