"""Issue 36's blind measures, sets A to D and F (tests/data/blind-36a/b/c/d/f), and its development set E
(tests/data/dev-36e, tuned on): real excerpts no other corpus holds, labelled from their threads before diag ran
on them (each MANIFEST.md says how). Each row gets exactly the check
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

SETS = [Path(__file__).parent / "data" / name for name in (
    "blind-36a", "blind-36b", "blind-36c", "blind-36d", "dev-36e", "blind-36f")]
ROWS = {blind: json.loads((blind / "expected.json").read_text()) for blind in SETS}
CASES = [(blind, r) for blind, rows in ROWS.items() for r in rows]


@pytest.mark.parametrize("blind", SETS, ids=[b.name for b in SETS])
def test_set_is_complete_sourced_and_clean(blind: Path) -> None:
    rows = ROWS[blind]
    assert len(rows) >= (30 if blind.name.startswith("blind-") else 25)
    assert [r["file"] for r in rows] == sorted(p.name for p in blind.glob("*.log"))
    assert all(r["source"].startswith("https://github.com/") for r in rows)
    assert all(r["known_miss"].strip() for r in rows if "known_miss" in r)
    assert not any(b"\x1b" in (blind / r["file"]).read_bytes() for r in rows)
    manifest = (blind / "MANIFEST.md").read_text()
    assert all(f"| {r['file']} | {r['source']} |" in manifest for r in rows)


def _case(blind: Path, row: dict) -> object:
    """(set, row), a strict expected failure as :func:`own_param` marks it."""
    param = own_param(row)
    return pytest.param(blind, row, marks=param.marks) if param is not row else (blind, row)


@pytest.mark.parametrize(("blind", "row"), [_case(b, r) for b, r in CASES], ids=[r["file"] for _, r in CASES])
def test_blind_excerpt(blind: Path, row: dict) -> None:
    check(blind / row["file"], row)


@pytest.mark.parametrize("blind", SETS, ids=[b.name for b in SETS])
def test_scorer_agrees_with_the_check(blind: Path) -> None:
    """tools/score_corpus.py, run as a user runs it, finds wrong exactly the rows marked `known_miss`."""
    rows = ROWS[blind]
    res = subprocess.run([sys.executable, "tools/score_corpus.py", str(blind), "--misses"],
                         capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert res.returncode == 0, res.stderr
    *wrong, score = res.stdout.splitlines()
    assert sorted(line.split(":")[0] for line in wrong) == sorted(r["file"] for r in rows if "known_miss" in r)
    assert f"files fully right {sum('known_miss' not in r for r in rows)}/{len(rows)};" in score
