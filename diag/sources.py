"""Input discovery and reading: paths -> classified files -> parsed sources.

This is the only place that touches the file system for logs: it expands run directories and
globs, classifies each file by its srt-slurm name, reads worker and orchestrator logs through the
bulk path (in blocks, with a progress callback) and keeps every file it does not understand in
the ``skipped`` list with a reason.
"""

from __future__ import annotations

import glob
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from diag.parsers.ingest import ParsedLog, infer_tz_offset, infer_year, parse_bulk
from diag.parsers.layout import FileInfo, classify_path

BLOCK = 16 << 20
LOG_KINDS = ("worker", "frontend", "orchestrator")
DATA_KINDS = ("benchmark", "sa-bench-result", "rollup", "job-json", "recipe", "prometheus-capture")


class InputError(Exception):
    """A bad input the user must fix (missing path, unreadable file); the CLI exits 2."""


@dataclass
class Skipped:
    path: Path
    reason: str


def _is_binary(head: bytes) -> bool:
    if not head:
        return False
    if b"\x00" in head:
        return True
    text_like = sum(32 <= b < 127 or b in (9, 10, 13, 27) or b >= 128 for b in head)
    return text_like / len(head) < 0.85


def _walk(root: Path) -> Iterator[Path]:
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
        for name in sorted(filenames):
            yield Path(dirpath) / name


def discover(paths: list[str]) -> tuple[list[tuple[Path, FileInfo]], list[Skipped]]:
    """Expand directories and globs into classified files; unknown files are skipped with a reason."""
    files: list[tuple[Path, FileInfo]] = []
    skipped: list[Skipped] = []
    seen: set[Path] = set()
    for arg in paths:
        matches = [Path(p) for p in sorted(glob.glob(arg))] if any(c in arg for c in "*?[") else [Path(arg)]
        if not matches or not matches[0].exists():
            raise InputError(f"{arg}: no such file or directory")
        for p in matches:
            candidates = list(_walk(p)) if p.is_dir() else [p]
            found = 0
            for f in candidates:
                rp = f.resolve()
                if rp in seen:
                    continue
                seen.add(rp)
                info = classify_path(f)
                if info.kind == "unknown":
                    if not p.is_dir():
                        skipped.append(Skipped(f, "not a file diag understands"))
                    elif f.suffix in (".out", ".log", ".err"):
                        skipped.append(Skipped(f, "log of an unknown kind"))
                    continue
                files.append((f, info))
                found += 1
            if p.is_dir() and found == 0:
                skipped.append(Skipped(p, "no run logs in this directory"))
    return files, skipped


def read_blocks(path: Path, on_bytes: Callable[[int], None] | None = None) -> Iterator[bytes]:
    """The file's content in newline-aligned blocks (an unterminated last line is its own block)."""
    with path.open("rb") as fh:
        rest = b""
        while True:
            chunk = fh.read(BLOCK)
            if on_bytes and chunk:
                on_bytes(len(chunk))
            if not chunk:
                if rest:
                    yield rest
                return
            buf = rest + chunk
            cut = buf.rfind(b"\n")
            if cut < 0:
                rest = buf
                continue
            yield buf[: cut + 1]
            rest = buf[cut + 1:]


def year_of(path: Path, head: str, ref: datetime | None) -> int | None:
    """A log's year: from its own first full date, the run's start (``ref``) or its mtime."""
    if ref is None:
        ref = datetime.fromtimestamp(path.stat().st_mtime, tz=UTC)
    return infer_year(head, ref)


def parse_log(path: Path, info: FileInfo, *, ref: datetime | None = None,
              on_bytes: Callable[[int], None] | None = None) -> ParsedLog:
    """Parse one log file through the bulk path."""
    src = ParsedLog(str(path), info)
    try:
        src.size = path.stat().st_size
        with path.open("rb") as fh:
            head_b = fh.read(64 << 10)
    except OSError as e:
        src.error = f"{path}: cannot read: {e.strerror or e}"
        return src
    if _is_binary(head_b[:8192]):
        src.error = f"{path}: binary file, not a log"
        return src
    head = head_b.decode("utf-8", errors="replace")
    src.year = year_of(path, head, ref)
    try:
        src.records, src.counts = parse_bulk(read_blocks(path, on_bytes), year=src.year,
                                             tz_offset_s=infer_tz_offset(head))
    except OSError as e:
        src.error = f"{path}: cannot read: {e.strerror or e}"
    return src
