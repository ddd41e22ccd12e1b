"""An engine's flag table: the flags its pinned releases accept and the ones it removed (DIAG-C014).

Each adapter builds one :class:`FlagTable` from its own lists; :meth:`FlagTable.classify` tells a flag
as written in a recipe (kebab or snake, maybe ``no-``-prefixed) apart as known, removed or unknown, with
the closest known spelling for an unknown one.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from .flags import normalize_flag


@dataclass(frozen=True)
class Removed:
    flag: str
    removed_in: str
    replacement: str | None
    note: str


@dataclass(frozen=True)
class FlagStatus:
    status: str                  # known | removed | unknown
    canonical: str               # snake_case
    negated: bool
    suggestion: str | None = None
    removed: Removed | None = None


class FlagTable:
    """Known flags (any spelling), removed flags and shorthands of one engine."""

    def __init__(self, known: Iterable[str], removed: Iterable[Removed] = (),
                 aliases: Mapping[str, str] | None = None) -> None:
        self.names = frozenset(normalize_flag(n)[0] for n in known)
        self.removed = {normalize_flag(r.flag)[0]: r for r in removed}
        self.aliases = dict(aliases or {})
        self._kebab = tuple(sorted(n.replace("_", "-") for n in self.names))

    def classify(self, name: str) -> FlagStatus:
        """Is ``name`` (as written in a recipe: kebab or snake, maybe ``no-``-prefixed) one of the flags?"""
        raw = name.strip().lstrip("-")
        if raw in self.aliases:
            raw = self.aliases[raw]
        elif raw.replace("_", "-") in self.aliases:
            raw = self.aliases[raw.replace("_", "-")]
        canonical, negated = normalize_flag(raw)
        base = canonical.split(".", 1)[0]
        if base in self.names:
            return FlagStatus("known", canonical, negated)
        if negated and ("no_" + base) in self.names:
            return FlagStatus("known", "no_" + base, False)
        if base in self.removed:
            rem = self.removed[base]
            return FlagStatus("removed", canonical, negated, rem.replacement, rem)
        return FlagStatus("unknown", canonical, negated, self.closest(raw))

    def closest(self, name: str) -> str | None:
        """The known flag spelled most like ``name`` (kebab-case, ``no-`` kept if it was there)."""
        raw = name.strip().lstrip("-").replace("_", "-").lower()
        prefix = ""
        if raw.startswith("no-"):
            prefix, raw = "no-", raw[3:]
        hits = difflib.get_close_matches(raw, self._kebab, n=1, cutoff=0.72)
        return prefix + hits[0] if hits else None
