"""Issue 36's blind measure, set A (tests/data/blind-36a): real excerpts no other corpus holds, labelled from
their threads before diag ran on them (MANIFEST.md says how). Each row gets exactly the check
tests/test_real_corpus.py makes for its own rows; a row diag does not get right yet carries `known_miss` (what
it misses) and runs as a strict expected failure, so work that turns one green shows as an XPASS to record.
The score of the set is tools/score_corpus.py's; tests/README.md keeps it per commit."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT
from test_real_corpus import check, own_param

BLIND = Path(__file__).parent / "data" / "blind-36a"
ROWS = json.loads((BLIND / "expected.json").read_text())


def test_set_is_complete_sourced_and_clean() -> None:
    assert len(ROWS) >= 30
    assert [r["file"] for r in ROWS] == sorted(p.name for p in BLIND.glob("*.log"))
    assert all(r["source"].startswith("https://github.com/") for r in ROWS)
    assert all(r["known_miss"].strip() for r in ROWS if "known_miss" in r)
    assert not any(b"\x1b" in (BLIND / r["file"]).read_bytes() for r in ROWS)
    manifest = (BLIND / "MANIFEST.md").read_text()
    assert all(f"| {r['file']} | {r['source']} |" in manifest for r in ROWS)


@pytest.mark.parametrize("row", [own_param(r) for r in ROWS], ids=[r["file"] for r in ROWS])
def test_blind_excerpt(row: dict) -> None:
    check(BLIND / row["file"], row)


def test_scorer_agrees_with_the_check() -> None:
    """tools/score_corpus.py, run as a user runs it, finds wrong exactly the rows marked `known_miss`."""
    res = subprocess.run([sys.executable, "tools/score_corpus.py", str(BLIND), "--misses"],
                         capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert res.returncode == 0, res.stderr
    *wrong, score = res.stdout.splitlines()
    assert sorted(line.split(":")[0] for line in wrong) == sorted(r["file"] for r in ROWS if "known_miss" in r)
    assert f"files fully right {sum('known_miss' not in r for r in ROWS)}/{len(ROWS)};" in score
