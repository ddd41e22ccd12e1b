"""Score diag on a labelled corpus of log excerpts: how many of the diagnoses the threads concluded it reaches.

    python tools/score_corpus.py FOLDER [--expected FILE] [--misses]

FOLDER holds the excerpts and (unless ``--expected`` names another file) an ``expected.json`` whose rows
have the shape of tests/data/real-logs/expected.json: ``file``, ``stats`` (the exact number of stats
records), ``expected`` (the warning/error codes a good tool must report), ``forbidden`` and, optionally,
``health`` (endpoint id -> health). Each excerpt is read alone, as tests/test_real_corpus.py reads its
rows, and judged by the same check: the file is not refused, its stats records number ``stats``, its
warning/error codes equal ``expected`` exactly and the endpoints' health matches ``health``.

Printed: one line per file (``ok`` or what is wrong), then the score: diagnoses reached (expected codes
reported / expected codes), files fully right, and files with a false alarm (any warning/error code the
row does not expect). ``--misses`` prints only the rows that are wrong, one per line, as a ``known_miss``
reason a test can carry. Exit 0; a missing or malformed FOLDER/expected file is one line and exit 2.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass
from pathlib import Path

from diag.files import find_runs
from diag.parsers.ingest import parse_bulk
from diag.pipeline import Pipeline
from diag.report import Report
from diag.rules.settings import Settings
from diag.sources import BatchSource

JUDGED = ("warning", "error")   # info findings (log noise) are not part of a diagnosis
LOG_YEAR = 2025                 # year given to year-less timestamps, as tests/test_real_corpus.py does


@dataclass(frozen=True)
class FileScore:
    """What diag made of one excerpt, against its row."""

    file: str
    expected: frozenset[str]
    reported: frozenset[str]
    stats: int
    want_stats: int
    health: dict[str, str]
    want_health: dict[str, str]
    refused: tuple[str, ...]

    @property
    def reached(self) -> int:
        return len(self.expected & self.reported)

    @property
    def false_alarms(self) -> frozenset[str]:
        return self.reported - self.expected

    @property
    def problems(self) -> list[str]:
        """Every way the excerpt's result differs from its row (empty: fully right)."""
        out = [f"refused: {why}" for why in self.refused]
        if missed := sorted(self.expected - self.reported):
            out.append("misses " + ", ".join(missed))
        if self.false_alarms:
            out.append("reports " + ", ".join(sorted(self.false_alarms)))
        if self.stats != self.want_stats:
            out.append(f"{self.stats} stats records, not {self.want_stats}")
        out += [f"{eid} is {self.health.get(eid)}, not {want}"
                for eid, want in self.want_health.items() if self.health.get(eid) != want]
        return out


def score_file(path: Path, row: dict) -> FileScore:
    """One excerpt read alone with default settings (a run of that one file), judged against ``row``."""
    records, _ = parse_bulk([path.read_bytes()], year=LOG_YEAR)
    runs = find_runs([str(path)])
    return judge(row, records, Pipeline(BatchSource(runs[0]), Settings()).once())


def judge(row: dict, records: list, report: Report) -> FileScore:
    """An excerpt's records and report against its ``row`` (tests/test_real_corpus.py judges its cached
    reports with this)."""
    health = {ep.id: ep.health for ep in report.endpoints}
    return FileScore(
        file=row["file"], expected=frozenset(row["expected"]),
        reported=frozenset(f.code for f in report.findings if f.severity in JUDGED),
        stats=sum(1 for r in records if r.kind == "stats"), want_stats=row["stats"],
        health={eid: health[eid] for eid in row.get("health", {}) if eid in health},
        want_health=dict(row.get("health", {})), refused=tuple(why for _, why in report.run.skipped))


def load_rows(folder: Path, expected: Path | None) -> list[dict]:
    """The rows of ``expected`` (default FOLDER/expected.json); every file they name must exist."""
    source = expected or folder / "expected.json"
    try:
        rows = json.loads(source.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise SystemExit(f"error: cannot read {source}: {exc}") from None
    for row in rows:
        if not (folder / row.get("file", "")).is_file():
            raise SystemExit(f"error: {source} names {row.get('file')!r}, which is not a file in {folder}")
    return rows


def summary(scores: list[FileScore]) -> str:
    """The three figures of a corpus: diagnoses reached, files fully right, files with a false alarm."""
    want = sum(len(s.expected) for s in scores)
    reached = sum(s.reached for s in scores)
    right = sum(1 for s in scores if not s.problems)
    alarms = sum(1 for s in scores if s.false_alarms)
    share = f" = {100 * reached / want:.0f} %" if want else ""
    return (f"diagnoses reached {reached}/{want}{share}; files fully right {right}/{len(scores)}; "
            f"false alarms in {alarms} of {len(scores)} files")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("folder", type=Path)
    parser.add_argument("--expected", type=Path, help="the rows (default: FOLDER/expected.json)")
    parser.add_argument("--misses", action="store_true", help="print only the wrong rows' problems")
    args = parser.parse_args(argv)
    try:
        rows = load_rows(args.folder, args.expected)
    except SystemExit as exc:
        print(exc, file=sys.stderr)
        return 2
    scores = [score_file(args.folder / row["file"], row) for row in rows]
    for s in scores:
        if not args.misses:
            print(f"{s.file}: " + ("; ".join(s.problems) or "ok"))
        elif s.problems:
            print(f"{s.file}: " + "; ".join(s.problems))
    print(summary(scores))
    return 0


if __name__ == "__main__":
    sys.exit(main())
