"""Call sites: what an engine logged at a ``file:line`` when the log lost the message itself.

A traceback logged by ``logger.exception`` carries the logging call's ``[file:line]`` on every line;
when an excerpt or a log keeps only its frames (the head and the exception line cut), that call site
still names the message: ``core.py:1330`` is ``EngineCore failed to start.`` in vLLM 0.26.0 and a
blank line elsewhere. Each engine adapter's ``catalogs["call_sites"]`` table (vLLM's is generated from
the released wheels by ``tools/upstream_vocab.py --call-sites``) is read here, the adapters' tables
merged. A site decides only when the releases agree on it: the log's own release when the table has
it, else every release that logs a traceback there.
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import replace
from functools import cache
from importlib.abc import Traversable

from . import engines, faults
from .records import Fault

# every adapter's call-site table, in registry order; CALL_SITES_PATH: the first (vLLM's)
CALL_SITES_PATHS: tuple[Traversable, ...] = tuple(path for _, path in engines.catalog_files("call_sites"))
CALL_SITES_PATH: Traversable | None = CALL_SITES_PATHS[0] if CALL_SITES_PATHS else None
Release = tuple[int, int, int]
_RELEASE = re.compile(r"^v?(\d+)\.(\d+)(?:\.(\d+))?")


def release(text: str) -> Release | None:
    """``"0.26.0"`` / ``"v0.26.1rc2"`` -> ``(0, 26, 0)`` / ``(0, 26, 1)``; None when it is no version."""
    m = _RELEASE.match(text.strip())
    return (int(m[1]), int(m[2]), int(m[3] or 0)) if m else None


@cache
def _table() -> tuple[frozenset[Release], dict[str, list[tuple[str, frozenset[Release]]]]]:
    known: set[Release] = set()
    sites: dict[str, list[tuple[str, frozenset[Release]]]] = {}
    for path in CALL_SITES_PATHS:
        with path.open("rb") as fh:
            data = tomllib.load(fh)
        known.update(r for v in data["versions"] if (r := release(v)) is not None)
        for s in data.get("site", []):
            sites.setdefault(s["at"], []).append((s["message"], frozenset(r for v in s["versions"]
                                                                          if (r := release(v)) is not None)))
    return frozenset(known), sites


def message_at(where: str, version: Release | None) -> str | None:
    """The message logged with a traceback at ``where`` (``core.py:1330``) in ``version``: that release's
    when the table has it (None for a release it does not have), else the one every release agrees on."""
    known, sites = _table()
    rows = sites.get(where.rsplit("/", 1)[-1], [])  # older releases print the path: v1/engine/core.py:718
    if version is not None:
        if version not in known:
            return None
        rows = [r for r in rows if version in r[1]]
    messages = {m for m, _ in rows}
    return messages.pop() if len(messages) == 1 else None


def known(where: str) -> bool:
    """Whether a release of the table logs a traceback at ``where``: :func:`name_cut` names it then."""
    return bool(_table()[1].get(where.rsplit("/", 1)[-1]))


def name_cut(fault: Fault, version: Release | None) -> Fault:
    """A traceback cut before its exception line, named by its logging call site when that site logs a
    message of the fault taxonomy (``EngineCore failed to start.``); any other fault as it is."""
    if fault.cause != faults.CUT.name or not fault.where:
        return fault
    message = message_at(fault.where, version)
    cause = faults.classify(message) if message else None
    if cause is None:
        return fault
    frame = f"; innermost frame seen: {fault.frames[-1]}" if fault.frames else ""
    return replace(fault, cause=cause, message=f"{message} (named by its call site {fault.where}: the traceback "
                                               f"was cut before its exception line{frame})")
