"""The real excerpts (issue-thread pastes): the ones gathered for issue 11 in tests/data/real-logs
(sources in its MANIFEST.md) and every excerpt of ../shared/samples/real-logs (read in place; its
MANIFEST.md says what each shows and the diagnosis its thread reached). For each: the exact number of
stats records, and the set of warning/error codes diag reports equals the expected set (derived from
the thread's diagnosis): an expected code missing or any extra finding fails. tests/README.md shows
the same table."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from conftest import ROOT
from loading import report_of

from diag.parsers.ingest import parse_bulk

DATA = Path(__file__).parent / "data"
OWN = DATA / "real-logs"
OWN_ROWS = json.loads((OWN / "expected.json").read_text())
SHARED_ROWS = json.loads((DATA / "shared-real-logs.json").read_text())
JUDGED = ("warning", "error")   # info findings (log noise) are not part of a diagnosis


def reported(path: Path) -> tuple[int, list[str], list[str]]:
    """(stats records, sorted warning/error codes, skipped reasons) of one excerpt read alone."""
    recs, _ = parse_bulk([path.read_bytes()], year=2025)
    report = report_of([str(path)])
    codes = sorted({f.code for f in report.findings if f.severity in JUDGED})
    return sum(1 for r in recs if r.kind == "stats"), codes, [why for _, why in report.run.skipped]


def check(path: Path, row: dict) -> None:
    stats, codes, skipped = reported(path)
    assert skipped == [], skipped
    assert stats == row["stats"]
    assert codes == sorted(row["expected"]), (codes, row["expected"])
    assert not set(row["forbidden"]) & set(row["expected"])


def test_corpora_are_complete_and_sourced(real_logs: Path) -> None:
    assert len(OWN_ROWS) >= 40
    assert {r["file"] for r in OWN_ROWS} == {p.name for p in OWN.glob("*.log")}
    assert {r["file"] for r in SHARED_ROWS} == {p.name for p in real_logs.glob("*.log")}
    manifest = (real_logs / "MANIFEST.md").read_text()
    for r in (*OWN_ROWS, *SHARED_ROWS):
        assert r["source"], r
    for r in SHARED_ROWS:
        assert f"| {r['file']} | {r['source']} |" in manifest, r["file"]
    assert all(r["source"].startswith("https://github.com/") for r in OWN_ROWS)


@pytest.mark.parametrize("row", OWN_ROWS, ids=[r["file"] for r in OWN_ROWS])
def test_own_excerpt(row: dict) -> None:
    check(OWN / row["file"], row)


@pytest.mark.parametrize("row", SHARED_ROWS, ids=[r["file"] for r in SHARED_ROWS])
def test_shared_excerpt(row: dict, real_logs: Path) -> None:
    check(real_logs / row["file"], row)


def test_readme_table_matches_the_expectations() -> None:
    text = (ROOT / "tests" / "README.md").read_text()
    for r in (*OWN_ROWS, *SHARED_ROWS):
        want = ", ".join(r["expected"]) or "-"
        assert re.search(rf"^\| {re.escape(r['file'])} \| {r['stats']} \| {re.escape(want)} \| {re.escape(want)} \|$",
                         text, re.M), r["file"]
