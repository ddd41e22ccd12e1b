"""The registry of line formats: each is declared once, with real-looking sample lines.

Like lnav's format files, every declaration carries samples, and ``tests/test_formats.py`` runs
each sample through the whole pipeline and checks it comes out as the declared kind. The
``triggers`` of record and noise formats are plain literals: the bulk path builds its prefilter
from them, so a line without any trigger never reaches per-line Python code.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class LineFormat:
    name: str
    kind: str                      # header | prefix | record | noise
    regex: re.Pattern[str]
    samples: tuple[str, ...]
    emits: str                     # line class (header/noise) or record kind (record)
    triggers: tuple[str, ...] = ()
    parse: Callable[..., Any] | None = field(default=None, compare=False)
    doc: str = ""
    engine: str | None = None      # the engine adapter that declared it (None: Dynamo, srtctl, generic)
    lead: str = ""                 # header formats: the characters such a line can start with ("": any)
    rank: int = 50                 # header formats: dispatch order among those leads (lower first); record
                                   # formats: below 50 tried before the frequent kinds (a specific wording a
                                   # catch-all of another kind would also take)
    guard: str = ""                # header formats: a literal the line's first 120 characters must hold
    levelless: bool = False        # header formats: the head carries no level (a logger without its level
                                   # name): a line is an error when its message is one of its engine's error sites


REGISTRY: dict[str, LineFormat] = {}


def declare(
    name: str,
    kind: str,
    pattern: str,
    *,
    samples: list[str] | tuple[str, ...],
    emits: str,
    triggers: tuple[str, ...] = (),
    flags: int = 0,
    doc: str = "",
    engine: str | None = None,
    lead: str = "",
    rank: int = 50,
    guard: str = "",
    levelless: bool = False,
) -> LineFormat:
    """Register a format. At least two samples are required."""
    if len(samples) < 2:
        raise ValueError(f"format {name!r} needs at least two sample lines")
    if name in REGISTRY:
        raise ValueError(f"format {name!r} declared twice")
    fmt = LineFormat(name, kind, re.compile(pattern, flags), tuple(samples), emits, triggers, None, doc,
                     engine, lead, rank, guard, levelless)
    REGISTRY[name] = fmt
    return fmt


def record_parser(fmt: LineFormat) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Attach the function that turns a match of ``fmt`` into a record (a header format: into a Header,
    or None to let the next head try)."""

    def wrap(fn: Callable[..., Any]) -> Callable[..., Any]:
        object.__setattr__(fmt, "parse", fn)
        return fn

    return wrap


def formats(kind: str | None = None) -> list[LineFormat]:
    """The declared formats of ``kind``, every registered engine's included (loading the engines
    imports their format modules, once)."""
    from . import engines  # the registry imports adapters, which declare through this module

    engines.adapters()
    return [f for f in REGISTRY.values() if kind is None or f.kind == kind]
