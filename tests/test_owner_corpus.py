"""Who owns the fix, over the real excerpts: every failing excerpt of tests/data/real-logs and of
../shared/samples/real-logs carries `thread_owner` (its source thread's conclusion) and `owner` (what the
excerpt alone settles: the thread's owner, else `unknown`), written before diag ran (tests/README.md,
"Owners"). diag's postmortem owner must equal `owner`, and no root cause may name an owner other than the
thread's. A row with `owner_miss` is a strict expected failure (the cause diag lacks)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from loading import report_of

from diag.rules.catalog import OWNERS

DATA = Path(__file__).parent / "data"
OWN_ROWS = [r for r in json.loads((DATA / "real-logs" / "expected.json").read_text()) if "owner" in r]
SHARED_ROWS = [r for r in json.loads((DATA / "shared-real-logs.json").read_text()) if "owner" in r]


def check(path: Path, row: dict) -> None:
    """The label is well formed, diag states the excerpt's owner and contradicts no thread."""
    assert {row["owner"], row["thread_owner"]} <= set(OWNERS) and row["owner_why"].strip()
    assert row["owner"] in (row["thread_owner"], "unknown")
    pm = report_of([str(path)]).postmortem
    stated = pm.owner if pm is not None else "unknown"
    claimed = {r.owner for r in pm.root_causes} - {"unknown"} if pm is not None else set()
    assert not claimed - {row["thread_owner"]}, (claimed, row["thread_owner"])
    assert stated == row["owner"], (stated, [(r.code, r.cause, r.owner, r.why) for r in pm.root_causes] if pm else None)


def own_param(row: dict) -> object:
    if "owner_miss" not in row:
        return row
    return pytest.param(row, marks=pytest.mark.xfail(reason=row["owner_miss"], raises=AssertionError, strict=True))


def test_every_failing_excerpt_is_labelled() -> None:
    for rows in (json.loads((DATA / "real-logs" / "expected.json").read_text()),
                 json.loads((DATA / "shared-real-logs.json").read_text())):
        failing = {r["file"] for r in rows if any(c.startswith(("DIAG-E", "DIAG-V")) for c in r["expected"])}
        assert failing <= {r["file"] for r in rows if "owner" in r}


@pytest.mark.parametrize("row", [own_param(r) for r in OWN_ROWS], ids=[r["file"] for r in OWN_ROWS])
def test_own_excerpt_owner(row: dict) -> None:
    check(DATA / "real-logs" / row["file"], row)


@pytest.mark.parametrize("row", SHARED_ROWS, ids=[r["file"] for r in SHARED_ROWS])
def test_shared_excerpt_owner(row: dict, real_logs: Path) -> None:
    check(real_logs / row["file"], row)
