"""Matching by log site (parsers/sites.py) and its generated tables (tools/site_catalog.py): the tables load and
are up to date with their inputs, a line built from every classified site is matched back to its class and
phase (also pasted with a prefix, wrapped or cut), a benign site raises nothing, and the matcher stays off the
hot path."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from loading import batch, report_of

from diag.parsers import faults, sites
from diag.parsers.records import Fault
from diag.pipeline import Pipeline
from diag.rules.settings import Settings

from helpers import load_tool, parse_text

ROOT = Path(__file__).resolve().parent.parent
site_catalog = load_tool("site_catalog")

ROWS = [row for path in sites.table_files() for row in sites.read_table(path)]
MATCHED = [r for r in ROWS if r.anchor is not None]   # the rest are too generic to name a line
FAULTY = [r for r in MATCHED if r.cls != "benign"]
SAMPLE = FAULTY if len(FAULTY) <= 60 else FAULTY[:: len(FAULTY) // 60]
HEAD = "(EngineCore_DP0 pid=9) ERROR 08-06 12:00:00 [site.py:1] "


def _text(row: sites.SiteRow) -> str:
    """What a line shows of a row: its pattern, whitespace collapsed, any hole alike."""
    return " ".join(sites.PATTERN_TOKEN.sub(lambda m: "{}" if m.group(1) else m.group(0), row.pattern).split())


_VERDICTS: dict[str, set[tuple[str, str]]] = {}
for _row in MATCHED:
    _VERDICTS.setdefault(_text(_row), set()).add((_row.cls, _row.phase))
# The same text printed by sites the catalogs judge differently (two engines, two releases): a line cannot tell
# them apart, so such a row is only asked to be found by its text (tools/site_catalog.py lists the conflicts).
AMBIGUOUS = frozenset(t for t, v in _VERDICTS.items() if len(v) > 1)
_TEXT_OF = {i: _text(r) for r in MATCHED for i in r.ids}
_PY_EXC = re.compile(r"[A-Za-z_]\w*(?:Error|Exception|Exit|Interrupt|Timeout)")


def _exception(row: sites.SiteRow) -> str | None:
    """The Python exception type a raise site's line is printed with (None for a log call or a native throw)."""
    return next((e.rsplit(".", 1)[-1] for e in row.exceptions if _PY_EXC.fullmatch(e.rsplit(".", 1)[-1])), None)


def _line(row: sites.SiteRow, message: str | None = None) -> str:
    """An ERROR line the site prints: the message, after its exception type for a raise site."""
    message = sites.example_line(row.pattern) if message is None else message
    exc = _exception(row)
    return HEAD + (f"{exc}: {message}" if exc else message)


def test_the_tables_load_with_known_classes() -> None:
    assert ROWS and FAULTY
    for row in ROWS:
        assert row.cls in sites.SITE_CLASSES and row.phase in ("startup", "serving", "any"), row
        assert row.severity in ("error", "warning", "info") and row.ids and row.releases, row
    assert len({(r.engine, r.pattern) for r in ROWS}) == len(ROWS)   # one row per (engine, pattern)


def test_the_tables_are_up_to_date_with_their_inputs() -> None:
    """Regenerate with ``python tools/site_catalog.py`` (tests/README.md)."""
    texts, _, _ = site_catalog.build()
    stale = [str(p.relative_to(ROOT)) for p, text in texts.items()
             if not p.is_file() or p.read_text(encoding="utf-8") != text]
    assert not stale, f"stale: {stale}; run python tools/site_catalog.py"


def _wrong(rows: list[sites.SiteRow], damage, cut: bool = False) -> list[tuple]:
    """(engine, id, text, what matched) of each row whose damaged message finds no row of its class and phase
    (``cut``: a line cut where another site's whole message ends is that site's as much as the row's)."""
    wrong = []
    for row in rows:
        message = sites.example_line(row.pattern)
        text = damage(row, message)
        got = sites.match(text, _exception(row))
        if got is None or ((got.cls, got.phase) != (row.cls, row.phase) and not (
                _text(row) in AMBIGUOUS and _text(got) == _text(row)) and not _also_prints(got, text)
                and not (cut and sites.pattern_regex(got.pattern.strip()).search(" ".join(text.split())))):
            wrong.append((row.engine, row.id, text, got and (got.cls, got.phase)))
    return wrong


def _also_prints(got: sites.SiteRow, text: str) -> bool:
    """Whether the matched row prints the damaged line whole, its opening hole holding the prefix (a message
    that is the tail of another site's: either site could have printed the line)."""
    return sites.pattern_regex(got.pattern.strip()).fullmatch(" ".join(text.split())) is not None


def _cut(row: sites.SiteRow, message: str) -> str:
    """The message cut halfway between the end of its leading part and its own end."""
    shown = len(sites.example_line(sites.lead(row.pattern)))
    return message[:shown + (len(message) - shown) // 2].rstrip()


def test_every_classified_site_is_matched_back_to_its_class_and_phase() -> None:
    """The message of every row (holes filled), as printed and behind a paste's prefix, finds a row of the same
    class and phase."""
    assert not _wrong(MATCHED, lambda row, message: message)[:20]
    assert not _wrong(MATCHED, lambda row, message: "vllm-1  | [rank0]: " + message)[:20]


def test_a_cut_site_line_is_matched_after_its_leading_part() -> None:
    """A sample's message cut after its leading part (compiling the tolerant form of every row costs minutes)."""
    long = [r for r in SAMPLE if sites.lead(r.pattern) != r.pattern]
    assert long and not _wrong(long, _cut, cut=True)[:20]


# The sources saved file by file (tools/data/logsites/sources/*.tsv: Dynamo's Rust runtime, TRT-LLM's executor
# and disaggregation modules): every row of theirs goes through the line parser, not a sample.
_SAVED = {s.id for p in sorted(site_catalog.OUT.glob("*index*.jsonl")) for s in site_catalog.load(p)}
# (less a row whose whole text is an exception head, 'CppExecutorError: ' before a traceback: its line is that
# exception's, the site's text holds nothing more to match)
SAVED = [r for r in FAULTY if _SAVED & set(r.ids) and not _PY_EXC.fullmatch(r.pattern.strip().rstrip(":"))]


@pytest.mark.parametrize("row", SAMPLE, ids=[f"{r.engine}-{r.id}" for r in SAMPLE])
def test_a_site_line_is_a_fault_of_its_class_and_phase(row: sites.SiteRow) -> None:
    """Through the line parser: the site's line is a fault of its class's generic cause, carrying the site id
    and phase, unless a hand-written cause claims the line first (they keep precedence)."""
    _is_its_fault(row)


def test_every_saved_source_site_line_is_a_fault_of_its_class_and_phase() -> None:
    assert len({r.engine for r in SAVED}) == 2 and len(SAVED) >= 80
    for row in SAVED:
        _is_its_fault(row)


def _is_its_fault(row: sites.SiteRow) -> None:
    got = [r for r in parse_text(_line(row)) if isinstance(r, Fault)]
    if _claimed(row):
        assert got and got[0].site is None
        return
    if _text(row) in AMBIGUOUS:
        assert not got or got[0].site is not None
        return
    # the site the line names: this row's, or one printing the same text (another engine's copy of shared code)
    assert [(f.cause, f.site in row.ids or _TEXT_OF.get(f.site) == _text(row), f.phase) for f in got] == [
        (faults.SITE_CAUSES[row.cls], True, row.phase)], (row.engine, row.id, row.pattern)


def test_a_wrapped_line_is_matched_and_a_short_fragment_is_not() -> None:
    row = next(r for r in FAULTY if sites.lead(r.pattern) != r.pattern and "raise" not in r.levels)
    message = sites.example_line(row.pattern)
    wrapped = parse_text(_line(row, message[: len(message) - 3]) + "\n" + message[-3:])
    want = [(faults.SITE_CAUSES[row.cls], row.phase)]
    assert [(f.cause, f.phase) for f in wrapped if isinstance(f, Fault)] == want
    assert sites.match(message[: sites.MIN_LEAD // 2]) is None


def _claimed(row: sites.SiteRow) -> bool:
    """Whether a hand-written cause takes the row's line first (they keep precedence over a site)."""
    exc, message = _exception(row), sites.example_line(row.pattern)
    return faults.classify(_line(row)) is not None or (
        exc is not None and faults.classify_exception(exc, message) != faults.UNCLASSIFIED.name)


def test_a_benign_site_raises_no_finding(tmp_path: Path) -> None:
    row = next(r for r in MATCHED if r.cls == "benign" and _text(r) not in AMBIGUOUS and not _claimed(r))
    assert sites.match(sites.example_line(row.pattern)) == row
    assert not [r for r in parse_text(_line(row)) if isinstance(r, Fault)]
    log = tmp_path / "engine.log"
    log.write_text(_line(row) + "\n")
    assert not [f for f in report_of([str(log)]).findings if f.severity != "info"]


def test_an_unknown_error_line_stays_silent_and_an_unknown_exception_unclassified() -> None:
    assert not [r for r in parse_text(HEAD + "the frobnicator is quuxed beyond repair") if isinstance(r, Fault)]
    got = [r for r in parse_text(HEAD + "QuuxWidgetError: the widget is quuxed") if isinstance(r, Fault)]
    assert [(f.cause, f.site) for f in got] == [(faults.UNCLASSIFIED.name, None)]


def test_the_matcher_stays_off_the_hot_path() -> None:
    """A healthy run's logs (stats lines, no error line) are read without the site tables ever being loaded."""
    sites.index.cache_clear()
    before = sites.table_loads
    report = Pipeline(batch([str(ROOT / "samples" / "runs" / "healthy")]), Settings()).once()  # not the cached one
    assert report.endpoints and sites.table_loads == before
    sites.match("anything at all")
    assert sites.table_loads == before + 1
