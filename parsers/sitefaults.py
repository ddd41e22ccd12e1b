"""Faults of lines by the log site that printed them (:mod:`parsers.sites`): what the line parser makes of an error
line, an exception or a level-less line the fault formats leave unclassified."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from . import callsites, faults, sites
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


def located(fault: Fault, level: str | None, head: str | None) -> Fault:
    """A traceback fault with no site (cut before its exception line, or its exception unclassified), named by
    the log site at its head's ``file:line`` (``where``) when its message line is gone: that site's class's
    generic cause and its phase (:func:`parsers.sites.at`; the engine of the head when it is one). A location the
    call-site table knows is left to it (:func:`parsers.callsites.name_cut`, by the log's release)."""
    if fault.site is not None or not fault.where or callsites.known(fault.where):
        return fault
    site = sites.at(fault.where, level, (head,) if head in sites.engine_names() else ())
    if site is None or site.cls == "benign":
        return fault
    return replace(fault, cause=faults.SITE_CAUSES[site.cls], site=site.id, phase=site.phase,
                   message=f"{sites.example_line(site.pattern)[:200]} (named by its log site at {fault.where}: "
                           f"{fault.message})")
