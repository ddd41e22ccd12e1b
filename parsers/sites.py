"""Log sites: the lines the engines' sources print (``tools/logsites.py``), each classified by a person
(``tools/site_catalog.py`` joins the two into the generated runtime tables), and a line matched back to its site.

The pattern language is the extractor's: literal text with typed holes ``{int}`` ``{float}`` ``{hex}``
``{str}`` ``{any}`` (``{{``/``}}`` literal braces). :func:`pattern_regex` and :func:`example_line` are the one
implementation both the extractor and the matcher use.

Matching is lazy and off the hot path: the line parser asks only for a line the fault parsing left
unclassified (an exception line ending a traceback that no cause names, an ERROR/CRITICAL line no fault format
took). The tables are read on the first such question (:data:`LOADS` counts reads); each row is indexed by one
rare literal word of its leading part (its anchor), and only the rows whose anchor the line holds have their
regexes compiled and tried: the exact pattern on the message first, then the same pattern tolerant to a paste's
damage (text before the message, a line wrapped or cut after a long enough leading part, whitespace collapsed).
"""

from __future__ import annotations

import json
import re
from collections import Counter
from dataclasses import dataclass
from functools import cache
from importlib.abc import Traversable
from pathlib import Path

from . import engines

HOLE_RE = {"int": r"-?\d+", "float": r"-?(?:\d+\.?\d*(?:[eE][-+]?\d+)?|inf|nan)", "hex": r"(?:0[xX])?[0-9a-fA-F]+",
           "str": r".*?", "any": r".*?"}
HOLE_SAMPLE = {"int": "42", "float": "3.14", "hex": "7f3a", "str": "name", "any": "value x"}
PATTERN_TOKEN = re.compile(r"\{\{|\}\}|\{(" + "|".join(HOLE_RE) + r")\}")
TABLE = "sites.generated.jsonl"   # core's under parsers/catalog/, each engine's under its adapter's catalog
CORE_TABLE = Path(__file__).with_name("catalog") / TABLE
LEVEL_WORDS = ("ERROR", "CRITICAL")  # the heads of the lines the matcher is asked about (record triggers too)
MIN_LITERAL = 12   # a pattern with fewer literal characters is too generic to name a line: never matched
MIN_LEAD = 24      # literal characters of the leading part a wrapped or cut line must still show
_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]{3,}")
_PIECE = re.compile(r"\{\{|\}\}|\{(?:" + "|".join(HOLE_RE) + r")\}|\s+|[^\s{}]+|[{}]")
_SPACE = re.compile(r"\s+")
_TAIL = r"\s*(?:\.\.\.|…)?\s*$"   # where a cut line ends: nothing, or an ellipsis

# The classes a reader gives a site (a fault class of parsers/catalog/faults.toml each, but benign).
SITE_CLASSES = ("oom", "kv_capacity", "config", "cuda", "collective", "transport", "kv_connector", "grammar", "timeout",
                "death", "infra", "teardown", "weights", "request", "internal", "benign")
LOADS = 0   # how many times the tables were read (the hot-path test asserts it stays 0)


def holes_of(pattern: str) -> list[str]:
    """The hole types of a pattern, in order."""
    return [m.group(1) for m in PATTERN_TOKEN.finditer(pattern) if m.group(1)]


def _loose(literal: str) -> str:
    return r"\s+".join(re.escape(part) for part in re.split(r"\s+", literal)) if literal.strip() else (
        r"\s*" if literal else "")


def pattern_regex(pattern: str) -> re.Pattern[str]:
    """A regex matching a whole message printed by the site of ``pattern`` (holes as typed groups, runs of
    whitespace loose); search it in a log line, or ``fullmatch`` the message part."""
    out, pos = [], 0
    for m in PATTERN_TOKEN.finditer(pattern):
        out.append(_loose(pattern[pos:m.start()]))
        out.append(re.escape(m.group(0)[0]) if not m.group(1) else f"({HOLE_RE[m.group(1)]})")
        pos = m.end()
    out.append(_loose(pattern[pos:]))
    return re.compile("".join(out), re.DOTALL)


def example_line(pattern: str) -> str:
    """The message the site prints with every hole filled by a sample value of its type."""
    return PATTERN_TOKEN.sub(lambda m: HOLE_SAMPLE[m.group(1)] if m.group(1) else m.group(0)[0], pattern)


def literal_text(pattern: str) -> str:
    """The pattern's literal characters (holes left out, braces unescaped)."""
    return PATTERN_TOKEN.sub(lambda m: "" if m.group(1) else m.group(0)[0], pattern)


# ------------------------------------------------------------------------------------------------ the table

@dataclass(frozen=True)
class SiteRow:
    """One distinct line pattern of an engine with its classification (a row of a generated table)."""

    engine: str
    pattern: str
    cls: str                       # a site class of the schema (benign: never a finding)
    phase: str                     # startup | serving | any
    severity: str                  # error | warning | info
    levels: tuple[str, ...]        # error | warning | exception | critical | raise
    exceptions: tuple[str, ...]    # the raised types (raise sites)
    ids: tuple[str, ...]           # the site ids (tools/data/logsites) this row stands for
    releases: tuple[str, ...]

    @property
    def id(self) -> str:
        return self.ids[0]

    def to_json(self) -> str:
        row = {"engine": self.engine, "pattern": self.pattern, "class": self.cls, "phase": self.phase,
               "severity": self.severity, "levels": list(self.levels), "exceptions": list(self.exceptions),
               "ids": list(self.ids), "releases": list(self.releases)}
        return json.dumps(row, ensure_ascii=False, separators=(",", ":"))

    @classmethod
    def from_json(cls, line: str) -> SiteRow:
        r = json.loads(line)
        return cls(r["engine"], r["pattern"], r["class"], r["phase"], r["severity"], tuple(r["levels"]),
                   tuple(r["exceptions"]), tuple(r["ids"]), tuple(r["releases"]))


def read_table(path: Path | Traversable) -> list[SiteRow]:
    """The rows of one generated table (its first line is a header)."""
    with path.open("r", encoding="utf-8") as fh:
        lines = fh.read().splitlines()
    return [SiteRow.from_json(line) for line in lines[1:] if line.strip()]


def table_files() -> list[Path | Traversable]:
    """Core's generated table and every adapter's (``ADAPTER.catalogs["sites"]``)."""
    return [CORE_TABLE, *(path for _, path in engines.catalog_files("sites"))]


# ------------------------------------------------------------------------------------------------ matching

def _pieces(pattern: str) -> list[tuple[str, str]]:
    """The pattern as (kind, regex) pieces: ``lit`` words, ``hole``s and ``sep`` whitespace."""
    out = []
    for m in _PIECE.finditer(pattern):
        tok = m.group(0)
        if tok.isspace():
            out.append(("sep", r"\s+"))
        elif tok in ("{{", "}}"):
            out.append(("lit", re.escape(tok[0])))
        elif (hole := PATTERN_TOKEN.fullmatch(tok)) and hole.group(1):
            out.append(("hole", f"(?:{HOLE_RE[hole.group(1)]})"))
        else:
            out.append(("lit", re.escape(tok)))
    return out


def _lead_size(pattern: str) -> int:
    """How many pieces the leading part a damaged line must show holds (all of them for a short pattern)."""
    count, pieces = 0, list(_PIECE.finditer(pattern))
    for i, m in enumerate(pieces):
        tok = m.group(0)
        if not tok.isspace() and not PATTERN_TOKEN.fullmatch(tok):
            count += len(tok)
        if count >= MIN_LEAD:
            return i + 1
    return len(pieces)


def _partial(literal: str) -> str:
    """A regex of any non-empty proper prefix of a literal word (where a cut line ends inside it)."""
    chars = [re.escape(c) for c in literal[:-1]]
    out = ""
    for c in reversed(chars[1:]):
        out = f"(?:{c}{out})?"
    return chars[0] + out if chars else "(?!)"


def tolerant_regex(pattern: str) -> re.Pattern[str] | None:
    """The pattern's leading part (at least :data:`MIN_LEAD` literal characters) followed by as much of the rest
    as the line still shows, the line ending there (cut, or wrapped onto the next line); None when the pattern
    is too short to have a leading part of its own."""
    pieces = [(m.group(0), kind, rx) for m, (kind, rx) in zip(_PIECE.finditer(pattern), _pieces(pattern),
                                                                strict=True)]
    lead = _lead_size(pattern)
    if lead >= len(pieces):
        return None
    tail = ""
    for tok, kind, rx in reversed(pieces[lead:]):
        cut = f"|{_partial(tok)}" if kind == "lit" and len(tok) > 1 else ""
        tail = f"(?:{rx}{tail}{cut})?"
    return re.compile("".join(rx for _, _, rx in pieces[:lead]) + tail + _TAIL, re.DOTALL)


def lead(pattern: str) -> str:
    """The pattern's leading part: what a wrapped or cut line must still show (the whole of a short one)."""
    return "".join(m.group(0) for m in list(_PIECE.finditer(pattern))[:_lead_size(pattern)])


def anchor(pattern: str, frequency: Counter[str]) -> str | None:
    """The rarest literal word (4+ characters) of the pattern's leading part, the longest of equals."""
    words = _WORD.findall(literal_text(lead(pattern)))
    return min(words, key=lambda w: (frequency[w], -len(w), w)) if words else None


@dataclass
class _Entry:
    row: SiteRow
    exact: re.Pattern[str] | None = None
    tolerant: re.Pattern[str] | None = None
    compiled: bool = False

    def regexes(self) -> tuple[re.Pattern[str], re.Pattern[str] | None]:
        if not self.compiled:
            self.exact, self.tolerant, self.compiled = pattern_regex(self.row.pattern), tolerant_regex(
                self.row.pattern), True
        assert self.exact is not None
        return self.exact, self.tolerant


class SiteIndex:
    """Rows indexed by their anchor word; regexes compiled on first use."""

    def __init__(self, rows: list[SiteRow]) -> None:
        usable = [r for r in rows if len(literal_text(r.pattern).strip()) >= MIN_LITERAL]
        frequency: Counter[str] = Counter(w for r in usable for w in set(_WORD.findall(literal_text(r.pattern))))
        self.by_anchor: dict[str, list[_Entry]] = {}
        for row in usable:
            if (word := anchor(row.pattern, frequency)) is not None:
                self.by_anchor.setdefault(word, []).append(_Entry(row))
        self.rows = len(usable)

    def candidates(self, text: str) -> list[_Entry]:
        words = set(_WORD.findall(text))
        return [e for w in words & self.by_anchor.keys() for e in self.by_anchor[w]]

    def match(self, text: str, exception: str | None = None) -> SiteRow | None:
        """The site of a message (``text``: the message after its head, or a whole damaged line): the exact
        pattern first, then the tolerant one; among several, the row whose level fits (a raise site of the
        same exception type for an exception line, a log call for a log line), then the longest pattern."""
        found = self.candidates(text)
        if not found:
            return None
        message = _SPACE.sub(" ", text).strip()
        exact = [e for e in found if e.regexes()[0].fullmatch(message)]
        if not exact:
            exact = [e for e in found if e.regexes()[0].search(message)]
        hits = exact or [e for e in found if (t := e.regexes()[1]) is not None and t.search(message)]
        if not hits:
            return None

        def fit(e: _Entry) -> tuple[bool, int]:
            raised = "raise" in e.row.levels
            fits = (exception is not None and raised and exception.rsplit(".", 1)[-1] in e.row.exceptions) or (
                exception is None and not raised)
            return fits, len(literal_text(e.row.pattern))

        return max(hits, key=fit).row


@cache
def index() -> SiteIndex:
    """Every generated table's rows, indexed (read once, on the first line that needs it)."""
    global LOADS
    LOADS += 1
    rows: list[SiteRow] = []
    for path in table_files():
        if path.is_file():
            rows += read_table(path)
    return SiteIndex(rows)


def match(text: str, exception: str | None = None) -> SiteRow | None:
    """The classified site that printed ``text`` (a log message, or an exception line's message), or None."""
    return index().match(text, exception)
