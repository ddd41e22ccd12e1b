"""Log sites: the lines the engines' sources print (``tools/logsites.py``), each classified by a person
(``tools/site_catalog.py`` joins the two into the generated runtime tables), and a line matched back to its site.

The pattern language is the extractor's: literal text with typed holes ``{int}`` ``{float}`` ``{hex}``
``{str}`` ``{any}`` (``{{``/``}}`` literal braces). :func:`pattern_regex` and :func:`example_line` are the one
implementation both the extractor and the matcher use.

Matching is lazy and off the hot path: the line parser asks only for a line the fault parsing left
unclassified (an exception line ending a traceback that no cause names, an ERROR/CRITICAL line no fault format
took, glog's E and F lines included; a line of a level-less head, SGLang's, read for one of its engine's error
sites' phrases; an exception line quoted alone, which only a site raising that type names). The tables are read
on the first such question (:data:`table_loads` counts reads); each row is indexed by one rare literal word of
its leading part (its anchor, chosen by the tool), and only the rows whose anchor
and leading words the line holds have their regexes compiled and tried: the exact pattern on the message
first, then the same pattern tolerant to a paste's damage (text before the message, a line wrapped or cut after
a long enough leading part, whitespace collapsed).
"""

from __future__ import annotations

import json
import re
import string
from collections import Counter
from dataclasses import dataclass, replace
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
LOGGED_ERROR = frozenset({"error", "critical", "exception"})  # the levels of a site that logs an error
MIN_LITERAL = 12   # a pattern with fewer literal characters is too generic to name a line: never matched
MIN_LEAD = 24      # literal characters of the leading part a wrapped or cut line must still show
_WORD = re.compile(r"(?<![\w\x00])[A-Za-z_]\w{3,}(?![\w\x00])")   # a whole word (not glued to a hole: \x00)
_PIECE = re.compile(r"\{\{|\}\}|\{(?:" + "|".join(HOLE_RE) + r")\}|\s+|[^\s{}]+|[{}]")
_SPACE = re.compile(r"\s+")
_OPEN_CLOSE_HOLES = re.compile(r"^(?:\{(?:any|str)\})+|(?:\{(?:any|str)\})+$")
_TAIL = r"\s*(?:\.\.\.|…)?\s*$"   # where a cut line ends: nothing, or an ellipsis

# The classes a reader gives a site (a fault class of parsers/catalog/faults.toml each, but benign).
SITE_CLASSES = ("oom", "kv_capacity", "config", "cuda", "collective", "transport", "kv_connector", "grammar",
                "timeout", "death", "infra", "teardown", "weights", "request", "internal", "benign")
# A log head's level and the levels of the sites that can have written it (a traceback's lines: its logging call).
LOCATION_LEVELS = {"ERROR": frozenset({"error", "exception"}), "CRITICAL": frozenset({"critical"})}
NEAR_LINES = 8     # how far a release may have moved a log call within its file (vLLM 0.6.6 240 vs 0.9.2 239)
table_loads = 0   # how many times the tables were read (the hot-path test asserts it stays 0)


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
    anchor: str | None = None      # the rare word a line must hold to be tried (None: too generic, never tried)
    words: tuple[str, ...] = ()    # the words of its leading part: a line must hold them all
    at: tuple[str, ...] = ()       # its sources' locations, ``basename:line`` (each release's; a log head's file:line)

    @property
    def id(self) -> str:
        return self.ids[0]

    def to_json(self) -> str:
        row = {"engine": self.engine, "pattern": self.pattern, "class": self.cls, "phase": self.phase,
               "severity": self.severity, "levels": list(self.levels), "exceptions": list(self.exceptions),
               "ids": list(self.ids), "releases": list(self.releases), "anchor": self.anchor,
               "words": list(self.words), "at": list(self.at)}
        return json.dumps(row, ensure_ascii=False, separators=(",", ":"))

    @classmethod
    def from_json(cls, line: str) -> SiteRow:
        r = json.loads(line)
        return cls(r["engine"], r["pattern"], r["class"], r["phase"], r["severity"], tuple(r["levels"]),
                   tuple(r["exceptions"]), tuple(r["ids"]), tuple(r["releases"]), r["anchor"], tuple(r["words"]),
                   tuple(r.get("at", ())))


def read_table(path: Path | Traversable) -> list[SiteRow]:
    """The rows of one generated table (its first line is a header)."""
    with path.open("r", encoding="utf-8") as fh:
        lines = fh.read().splitlines()
    return [SiteRow.from_json(line) for line in lines[1:] if line.strip()]


def table_files() -> list[Path | Traversable]:
    """Core's generated table and every adapter's (``ADAPTER.catalogs["sites"]``)."""
    return [CORE_TABLE, *(path for _, path in engines.catalog_files("sites"))]


# ------------------------------------------------------------------------------------------- trigger phrases
# A line whose head carries no level (SGLang's logger) is read only when it holds the phrase of one of its
# engine's error sites: each such row's first literal run of MIN_PHRASE characters or more (not broken by a hole,
# a newline or a run of spaces) holding a whole word inside it. The generator writes a table's phrases into its
# header line, so the line prefilter knows them without reading the tables.
MIN_PHRASE = 16
_RUN_BREAK = re.compile(r"\x00|\n|\s{2,}")
_INNER_WORD = re.compile(r"(?<=\W)\w{3,}(?=\W)")   # a word with its neighbours inside the phrase
_SPLIT = str.maketrans(dict.fromkeys(string.punctuation, " "))   # a line's words: split at spaces and punctuation
_KEY_WORD = re.compile(r"(?<=[\s" + re.escape(string.punctuation) + r"])\w{3,}(?=[\s" + re.escape(string.punctuation)
                       + r"])")   # a word a line holding the phrase shows as one of its words


def levelless_engines() -> tuple[str, ...]:
    """The engines one of whose heads carries no level (``levelless`` header formats)."""
    from .formats import formats

    return tuple(sorted({f.engine for f in formats("header") if f.levelless and f.engine}))


def phrase(pattern: str) -> str | None:
    """The literal phrase a line printed by ``pattern`` holds (its first long enough run), or None."""
    for run in _RUN_BREAK.split(_holed(pattern)):
        run = run.strip()
        if len(run) >= MIN_PHRASE and _INNER_WORD.search(run):
            return run
    return None


def trigger_phrases(rows: list[SiteRow], engines: tuple[str, ...]) -> list[str]:
    """The phrases of the rows of ``engines`` that log an error of a fault class (a line of a level-less head is
    read for them)."""
    return sorted({p for r in rows if r.engine in engines and r.cls != "benign" and LOGGED_ERROR & set(r.levels)
                   and (p := phrase(r.pattern))})


@cache
def phrases() -> tuple[str, ...]:
    """Every generated table's trigger phrases (its header line only: the rows are not read)."""
    out: set[str] = set()
    for path in table_files():
        if path.is_file():
            with path.open("r", encoding="utf-8") as fh:
                out.update(json.loads(fh.readline()).get("phrases", ()))
    return tuple(sorted(out))


@cache
def _phrases_by_word() -> tuple[dict[str, tuple[str, ...]], tuple[str, ...]]:
    """The phrases by a word each holds between spaces or punctuation (its longest), and those without one."""
    by: dict[str, list[str]] = {}
    bare: list[str] = []
    for p in phrases():
        if keys := _KEY_WORD.findall(p):
            by.setdefault(max(keys, key=len), []).append(p)
        else:
            bare.append(p)
    return {w: tuple(ps) for w, ps in by.items()}, tuple(bare)


def holds_phrase(text: str) -> bool:
    """Whether ``text`` holds a trigger phrase (as a substring: the native scans' test), trying only the phrases
    keyed by one of the line's words (split at spaces and punctuation: one C pass, no regex)."""
    by, bare = _phrases_by_word()
    return any(p in text for w in set(text.translate(_SPLIT).split()) & by.keys() for p in by[w]) or \
        any(p in text for p in bare)


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


def _lead_size(pieces: list[str]) -> int:
    """How many pieces the leading part a damaged line must show holds (all of them for a short pattern)."""
    count = 0
    for i, tok in enumerate(pieces):
        if not tok.isspace() and not PATTERN_TOKEN.fullmatch(tok):
            count += len(tok)
        if count >= MIN_LEAD:
            return i + 1
    return len(pieces)


def tolerant_regex(pattern: str) -> re.Pattern[str] | None:
    """The pattern's leading part (at least :data:`MIN_LEAD` literal characters) followed by as much of the rest
    as the line still shows, the line ending there (cut, or wrapped onto the next line); None when the pattern
    is too short to have a leading part of its own."""
    pieces = [(m.group(0), kind, rx) for m, (kind, rx) in zip(_PIECE.finditer(pattern), _pieces(pattern),
                                                                strict=True)]
    lead = _lead_size([tok for tok, _, _ in pieces])
    if lead >= len(pieces):
        return None
    tail = ""
    for tok, kind, rx in reversed(pieces[lead:]):
        cut = f"|{re.escape(tok[0])}\\S*" if kind == "lit" and len(tok) > 1 else ""   # cut inside the word
        tail = f"(?:{rx}{tail}{cut})?"
    return re.compile("".join(rx for _, _, rx in pieces[:lead]) + tail + _TAIL, re.DOTALL)


def lead(pattern: str) -> str:
    """The pattern's leading part: what a wrapped or cut line must still show (the whole of a short one)."""
    pieces = _PIECE.findall(pattern)
    return "".join(pieces[:_lead_size(pieces)])


def _holed(pattern: str) -> str:
    """The pattern's text with each hole one NUL (so no word runs into a hole)."""
    return PATTERN_TOKEN.sub(lambda m: "\x00" if m.group(1) else m.group(0)[0], pattern)


def words(pattern: str) -> list[str]:
    """The pattern's literal words of 4+ characters that a line printing it holds whole (none glued to a hole)."""
    return _WORD.findall(_holed(pattern))


def anchored(rows: list[SiteRow]) -> list[SiteRow]:
    """The rows with their anchor (the rarest word of the leading part among all the rows', the longest of
    equals; any word of a leading part of glued words only) and the words of their leading part; a row with
    fewer than :data:`MIN_LITERAL` literal characters gets none (too generic to name a line)."""
    shown = []
    for row in rows:
        # the leading part's words: those of the whole pattern ending inside it (a word glued to the hole
        # after the leading part is no whole word)
        end = len(_holed(lead(row.pattern)))
        spans = list(_WORD.finditer(_holed(row.pattern)))
        shown.append((row, [m.group(0) for m in spans], [m.group(0) for m in spans if m.end() <= end]))
    frequency: Counter[str] = Counter(w for _, every, _ in shown for w in set(every))
    out = []
    for row, every, leading in shown:
        pool = leading or every
        if not pool or len(literal_text(row.pattern).strip()) < MIN_LITERAL:
            out.append(replace(row, anchor=None, words=()))
            continue
        out.append(replace(row, anchor=min(pool, key=lambda w: (frequency[w], -len(w), w)),
                           words=tuple(dict.fromkeys(leading))))
    return out


class _Literal:
    """A pattern without holes, searched as its text (whitespace collapsed, as the messages are): no regex."""

    def __init__(self, pattern: str) -> None:
        text = example_line(pattern)
        self.text = " ".join(text.split())
        # whitespace where a dropped opening or closing hole was: the text must have a neighbour there
        self.text = (" " if text[:1].isspace() else "") + self.text + (" " if text[-1:].isspace() else "")

    def search(self, message: str) -> bool:
        return self.text in message


class _Entry:
    """A row with the words its leading part shows and its regexes, compiled on first use."""

    def __init__(self, row: SiteRow) -> None:
        self.row = row
        self.words = frozenset(row.words)
        self.shown = len(literal_text(row.pattern))               # the literal text a whole match shows
        self.lead_shown = len(literal_text(lead(row.pattern)))    # what a cut or wrapped line still shows
        self._exact: re.Pattern[str] | _Literal | None = None
        self._tolerant: re.Pattern[str] | bool | None = False   # False: not compiled yet

    def exact(self) -> re.Pattern[str] | _Literal:
        if self._exact is None:
            # searched, not anchored: an opening or closing hole that takes any text adds nothing but backtracking
            # (the whitespace beside it stays: the text must still be preceded or followed by some)
            pattern = _OPEN_CLOSE_HOLES.sub("", self.row.pattern.strip())
            self._exact = pattern_regex(pattern) if holes_of(pattern) else _Literal(pattern)
        return self._exact

    def tolerant(self) -> re.Pattern[str] | None:
        if self._tolerant is False:
            self._tolerant = tolerant_regex(self.row.pattern.strip())
        assert self._tolerant is not True
        return self._tolerant


class SiteIndex:
    """Rows indexed by their anchor word; a row is a candidate for a line holding every word of its leading
    part."""

    def __init__(self, rows: list[SiteRow]) -> None:
        """``rows`` as :func:`anchored` gives them (the generated tables are)."""
        self.by_anchor: dict[str, list[_Entry]] = {}
        self.every = rows
        self._by_file: dict[str, list[tuple[int, SiteRow]]] | None = None   # built on the first location asked
        for row in rows:
            if row.anchor is not None:
                self.by_anchor.setdefault(row.anchor, []).append(_Entry(row))
        self.rows = sum(map(len, self.by_anchor.values()))

    def candidates(self, text: str) -> list[_Entry]:
        seen = set(_WORD.findall(text))
        return [e for w in seen & self.by_anchor.keys() for e in self.by_anchor[w] if e.words <= seen]

    def match(self, text: str, exception: str | None = None, *, engines: tuple[str, ...] = (),
              logged: bool = False) -> SiteRow | None:
        """The site of a message (``text``: the message after its head, or a whole damaged line), among the rows of
        ``engines`` (all when empty) and, when ``logged``, those logging an error (a line whose head tells no
        level is an error only by its site's own level): the exact
        pattern (anywhere in the text) first, then the tolerant one; among several, the most literal text (the most specific), then the
        row whose level fits (a raise site of the same exception type for an exception line, a log call for a
        log line)."""
        found = self.candidates(text)
        if engines:
            found = [e for e in found if e.row.engine in engines]
        if logged:
            found = [e for e in found if LOGGED_ERROR & set(e.row.levels)]
        if not found:
            return None
        message = _SPACE.sub(" ", text).strip()
        # exact (as the whole message or behind a prefix) and tolerant (cut or wrapped) hits ranked together by
        # the literal text they show: a pattern that opens with a hole takes any prefix whole, and a short pattern
        # found whole inside a cut line shows less than the long one whose leading part it holds
        hits = [(e, e.shown, True) for e in found if e.exact().search(message)]
        best = max((shown for _, shown, _ in hits), default=0)
        # a tolerant form only where it could show more than the best whole match (it shows its leading part)
        hits += [(e, e.lead_shown, False) for e in found if e.lead_shown > best
                 and (t := e.tolerant()) is not None and not e.exact().search(message) and t.search(message)]
        if not hits:
            return None

        def fit(hit: tuple[_Entry, int, bool]) -> tuple[int, bool, bool, bool]:
            e, shown, exact = hit
            raised = "raise" in e.row.levels
            fits = (exception is not None and raised and exception.rsplit(".", 1)[-1] in e.row.exceptions) or (
                exception is None and not raised)
            # equal text: a whole match, then the level, then a row opening with its own words over one whose
            # opening hole took the prefix
            return shown, exact, fits, not PATTERN_TOKEN.match(e.row.pattern.strip())

        return max(hits, key=fit)[0].row


    def at(self, where: str, level: str | None, engines: tuple[str, ...] = ()) -> SiteRow | None:
        """The site that logged at ``where`` (a log head's ``file:line``, its path dropped) at ``level`` (ERROR:
        an error or exception site; CRITICAL: a critical one), among the rows of ``engines`` (all when empty):
        a site at that very line in a catalogued release, else the nearest within :data:`NEAR_LINES` (releases
        shift a file's lines by a few); None when the sites there disagree on their class, or none is there."""
        levels = LOCATION_LEVELS.get(level or "")
        file, _, line = where.rsplit("/", 1)[-1].rpartition(":")
        if levels is None or not file or not line.isdigit():
            return None
        if self._by_file is None:
            self._by_file = {}
            for row in self.every:
                for loc in row.at:
                    name, _, n = loc.rpartition(":")
                    self._by_file.setdefault(name, []).append((int(n), row))
        near = [(abs(n - int(line)), row) for n, row in self._by_file.get(file, ())
                if abs(n - int(line)) <= NEAR_LINES and levels & set(row.levels)
                and (not engines or row.engine in engines)]
        exact = [row for d, row in near if d == 0]
        found = exact or [row for _, row in sorted(near, key=lambda t: t[0])]
        return found[0] if found and len({r.cls for r in found}) == 1 else None


@cache
def index() -> SiteIndex:
    """Every generated table's rows, indexed (read once, on the first line that needs it)."""
    global table_loads
    table_loads += 1
    rows: list[SiteRow] = []
    for path in table_files():
        if path.is_file():
            rows += read_table(path)
    return SiteIndex(rows)


@cache
def engine_names() -> frozenset[str]:
    """The engines the tables hold sites of."""
    return frozenset(row.engine for row in index().every)


def at(where: str, level: str | None, engines: tuple[str, ...] = ()) -> SiteRow | None:
    """The classified site that logged at ``where`` (:meth:`SiteIndex.at`)."""
    return index().at(where, level, engines)


def match(text: str, exception: str | None = None, *, engines: tuple[str, ...] = (),
          logged: bool = False) -> SiteRow | None:
    """The classified site that printed ``text`` (a log message, or an exception line's message), or None
    (:meth:`SiteIndex.match`)."""
    return index().match(text, exception, engines=engines, logged=logged)
