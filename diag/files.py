"""Files of a run: paths -> classified files -> parsed logs and side facts.

This is the only place that touches the file system for a run: it expands run directories and
globs, classifies each file by its srt-slurm name (or, for uninformative names, its content),
groups files into runs (one per run directory), reads worker and orchestrator logs through the bulk
path (in blocks, with a progress callback), reads the side files (job metadata, recipe, benchmark
results) into a typed :class:`Side`, and keeps every file it does not understand in the ``skipped``
list with a reason.
"""

from __future__ import annotations

import errno
import gzip
import os
import re
import stat
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path

from diag.parsers import inputs
from diag.parsers.benchmark import (
    BenchmarkFormatError,
    parse_accuracy,
    parse_benchmark_out,
    read_rollup,
    read_sa_bench_json,
)
from diag.parsers.engines import engine_of
from diag.parsers.ingest import LineCap, ParsedLog, parse_blocks, settle_clock
from diag.parsers.jobmeta import JobMeta, JobMetaError, read_job_json
from diag.parsers.layout import (
    VOCABULARY,
    FileInfo,
    classify_path,
    holds_vocabulary,
    role_from_content,
    sniff_kind,
)
from diag.parsers.recipe import Recipe
from diag.parsers.records import AccuracyResult, BenchResult
from diag.parsers.timestamps import infer_year
from diag.rules.assemble import Side

BLOCK = 4 << 20   # per block, polars holds several times its size: this bounds the peak
LOG_KINDS = ("worker", "frontend", "orchestrator")
SIDE_KINDS = ("job-json", "benchmark", "sa-bench-result", "rollup", "recipe")
Files = list[tuple[Path, FileInfo]]


class InputError(Exception):
    """A bad input the user must fix (missing path, unreadable file); the CLI exits 2."""


@dataclass
class Skipped:
    path: Path
    reason: str


def is_binary(head: bytes) -> bool:
    if not head:
        return False
    if b"\x00" in head:
        return True
    text_like = sum(32 <= b < 127 or b in (9, 10, 13, 27) or b >= 128 for b in head)
    return text_like / len(head) < 0.85


def _walk(root: Path, skipped: list[Skipped]) -> Iterator[Path]:
    """Files under ``root`` (symlinked directories are not followed: no loops); a directory named
    like a log is listed as skipped."""
    for dirpath, dirnames, filenames in inputs.walk(root):
        for d in dirnames:
            if classify_path(d).kind in LOG_KINDS:
                skipped.append(Skipped(Path(dirpath) / d, "a directory named like a log"))
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
        for name in sorted(filenames):
            yield Path(dirpath) / name


_ROTATED = re.compile(r"^(?P<base>.+\.(?:out|err|log))(?:\.\d{1,3}|[.-]\d{8}(?:-\d+)?|\.old)$")
_FILE_TYPES = ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"), (stat.S_ISCHR, "a character device"),
               (stat.S_ISBLK, "a block device"), (stat.S_ISDIR, "a directory"))


def not_readable(path: Path) -> str | None:
    """Why ``path`` must not be opened (never open a FIFO, socket or device: open() blocks on a FIFO
    without a writer), or None for a regular file."""
    try:
        st = inputs.stat(path)
    except OSError as e:
        if e.errno == errno.ELOOP:
            return "a symlink loop"
        if e.errno == errno.ENOENT and is_symlink(path):
            return "a broken symlink"
        return f"cannot read: {e.strerror or e}"
    for test, what in _FILE_TYPES:
        if test(st.st_mode):
            return f"{what}, not a regular file (not opened)"
    return None


NO_SUCH_PATH = "no such file or directory"
NO_RUN_LOGS = "no run logs in this directory"
NOT_DIAGS = f"not a file diag understands: no line of its vocabulary ({VOCABULARY})"


def is_archive(arg: str) -> bool:
    """A path named on the command line that is an archive, read as the folder it packs (it does not grow)."""
    return not any(c in arg for c in "*?[") and inputs.tree(Path(arg)) != Path(arg)


def not_there_yet(arg: str) -> bool:
    """A command-line path that does not exist (yet), or a glob that matches nothing (yet):
    ``diag tail -f`` waits for it like ``tail -F``; everything else fails at once."""
    if any(c in arg for c in "*?["):
        return not inputs.glob_paths(arg)
    return path_problem(Path(arg)) == NO_SUCH_PATH


def path_problem(path: Path) -> str | None:
    """Why a path named on the command line cannot be looked at, in words, or None (it exists, or it
    is a symlink that loops or leads nowhere: listed as skipped later). Never raises: a directory on
    the way without the x bit is "permission denied", not a traceback."""
    try:
        inputs.stat(path)
        return None
    except OSError as e:
        err = e
    try:
        inputs.lstat(path)
        return None
    except OSError:
        pass
    if err.errno == errno.EACCES:
        return "permission denied (a directory on its path cannot be searched: its x bit is off)"
    if err.errno == errno.ENOENT:
        return NO_SUCH_PATH
    if err.errno == errno.ENOTDIR:
        return "a part of its path is not a directory"
    return err.strerror or str(err)


def output_problem(path: Path, *, directory: bool = False) -> str | None:
    """Why ``path`` cannot be written (a file, or with ``directory`` a directory made if missing), or
    None; checked before any work, so a bad ``-o`` is one line, not a traceback after the run is read."""
    exists = path_problem(path) is None
    if exists and is_dir(path) != directory:
        return "is a directory (give a file name)" if not directory else "is a file (give a directory)"
    if exists:
        return None if os.access(path, os.W_OK) else "permission denied"
    parent = path.absolute().parent
    while directory and path_problem(parent) == NO_SUCH_PATH and parent != parent.parent:
        parent = parent.parent  # --export makes the directories it needs
    why = path_problem(parent)
    if why is not None:
        return f"cannot write into {parent}: {why}"
    if not is_dir(parent):
        return f"cannot write into {parent}: not a directory"
    if not os.access(parent, os.W_OK | os.X_OK):
        return f"cannot write into {parent}: permission denied"
    return None


def is_dir(path: Path) -> bool:
    """``path`` is a directory (False when it cannot be looked at, or lies outside what may be read:
    ``run_root`` probes the folders above a file; instead of raising)."""
    try:
        return stat.S_ISDIR(inputs.stat(path).st_mode)
    except (OSError, inputs.Refused):
        return False


def is_symlink(path: Path) -> bool:
    try:
        return stat.S_ISLNK(inputs.lstat(path).st_mode)
    except OSError:
        return False


def classify(path: Path) -> FileInfo:
    """A file's kind by its name; a compressed log (``x_decode_w0.out.gz``) is the log it holds."""
    if path.name.endswith(".gz"):
        inner = classify_path(path.with_name(path.name[:-3]))
        if inner.kind in LOG_KINDS:
            return replace(inner, path=path)
        return FileInfo(path, "unknown")
    return classify_path(path)


def rotated_of(path: Path) -> str | None:
    """The log a rotated copy (``x.out.1``, ``x.log-20260806``) was rotated from, by name."""
    m = _ROTATED.match(path.name)
    return m["base"] if m and classify_path(m["base"]).kind in LOG_KINDS else None


def discover(paths: list[str]) -> tuple[list[tuple[Path, FileInfo]], list[Skipped]]:
    """Expand directories and globs into classified files; unknown files are skipped with a reason.
    Nothing is opened here: FIFOs, devices, symlink loops and rotated copies are listed as skipped."""
    files: list[tuple[Path, FileInfo]] = []
    skipped: list[Skipped] = []
    seen: set[Path] = set()
    for arg in paths:
        matches = [Path(p) for p in sorted(inputs.glob_paths(arg))] if any(c in arg for c in "*?[") else [Path(arg)]
        if not matches:
            raise InputError(f"{arg}: {NO_SUCH_PATH}")
        for p in matches:
            why = path_problem(p)
            if why is not None:
                raise InputError(f"{p}: {why}")
            p, named = inputs.tree(p), p   # an archive is read as the folder it packs
            why = path_problem(p)
            if why is not None:
                raise InputError(f"{named}: {why}")
            candidates = list(_walk(p, skipped)) if is_dir(p) else [p]
            found = 0
            for f in candidates:
                why = not_readable(f)
                if why is not None:
                    if not is_dir(p) or classify(f).kind != "unknown" or rotated_of(f) or is_symlink(f) \
                            or f.suffix in (".out", ".log", ".err") or f.name.endswith("!"):   # an archive refused
                        skipped.append(Skipped(f, why))
                    continue
                rp = inputs.resolve(f)
                if rp in seen:
                    continue
                seen.add(rp)
                info = classify(f)
                if info.kind == "unknown":
                    base = rotated_of(f)
                    if base is not None:
                        skipped.append(Skipped(f, f"a rotated copy of {base} (older lines; not read)"))
                    elif not is_dir(p):
                        skipped.append(Skipped(f, NOT_DIAGS))
                    elif f.suffix in (".out", ".log", ".err"):
                        skipped.append(Skipped(f, "log of an unknown kind"))
                    continue
                files.append((f, info))
                found += 1
            if is_dir(p) and found == 0:
                skipped.append(Skipped(p, NO_RUN_LOGS))
    return files, skipped


def open_log(path: Path):
    """A log's bytes: gzip is inflated as it is read (by magic, whatever the name)."""
    fh = inputs.open_input(path)
    if fh.read(2) == b"\x1f\x8b":
        fh.seek(0)
        return gzip.GzipFile(fileobj=fh, mode="rb")
    fh.seek(0)
    return fh


def read_blocks(path: Path, on_bytes: Callable[[int], None] | None = None) -> Iterator[bytes]:
    """The file's content in newline-aligned blocks (an unterminated last line is its own block);
    every line cut to its first :data:`~diag.parsers.ingest.MAX_LINE` bytes."""
    cap = LineCap()
    with open_log(path) as fh:
        rest = b""
        while True:
            chunk = fh.read(BLOCK)
            if on_bytes and chunk:
                on_bytes(len(chunk))
            if not chunk:
                if rest:
                    yield rest
                return
            buf = rest + cap(chunk)
            cut = buf.rfind(b"\n")
            if cut < 0:
                rest = buf
                continue
            yield buf[: cut + 1]
            rest = buf[cut + 1:]


def vocabulary_in(path: Path) -> bool:
    """Whether any line of the file is one diag reads (every block scanned, not only the head)."""
    try:
        return any(holds_vocabulary(block) for block in read_blocks(path))
    except (OSError, EOFError):
        return False


def clock_of(path: Path, head: str) -> tuple[int | None, str | None]:
    """The log's offset from UTC and its note (:func:`~diag.parsers.ingest.settle_clock`), read further on
    where its head cannot place its local stamps."""
    def further(n: int) -> str:
        with open_log(path) as fh:
            return fh.read(n).decode("utf-8", errors="replace")
    return settle_clock(head, further)


def year_of(path: Path, head: str, ref: datetime | None) -> int | None:
    """A log's year: from its own first full date, the run's start (``ref``) or its mtime."""
    if ref is None:
        ref = datetime.fromtimestamp(inputs.stat(path).st_mtime, tz=UTC)
        return infer_year(head, ref, not_after=ref)  # nothing in a file was written after its mtime
    return infer_year(head, ref)


def parse_log(path: Path, info: FileInfo, *, ref: datetime | None = None,
              on_bytes: Callable[[int], None] | None = None) -> ParsedLog:
    """Parse one log file through the bulk path."""
    src = ParsedLog(str(path), info)
    try:
        src.size = inputs.stat(path).st_size
        with open_log(path) as fh:
            head_b = fh.read(64 << 10)
    except (OSError, EOFError) as e:
        src.error = f"{path}: cannot read: {_reason(e)}"
        return src
    if is_binary(head_b[:8192]) and not vocabulary_in(path):
        src.error = f"{path}: binary file, not a log (no line of diag's vocabulary: {VOCABULARY})"
        return src
    head = head_b.decode("utf-8", errors="replace")
    src.year = year_of(path, head, ref)
    src.engine = engine_of(head)
    tz, src.clock_note = clock_of(path, head)
    src.clock_placed = tz is not None
    try:
        parsed = parse_blocks(read_blocks(path, on_bytes), year=src.year, tz_offset_s=tz or 0)
        src.records, src.stats, src.kv, src.counts = parsed.records, parsed.stats, parsed.kv, parsed.counts
    except (OSError, EOFError) as e:
        src.error = f"{path}: cannot read: {_reason(e)}"
    return src


def _reason(e: Exception) -> str:
    if isinstance(e, gzip.BadGzipFile | EOFError):
        return f"broken gzip data ({e})"
    return str(e.strerror if isinstance(e, OSError) and e.strerror else e)


PARALLEL_MIN_BYTES = 64 << 20   # below this, one thread does it


def parse_logs(files: list[tuple[Path, FileInfo]], *, ref: datetime | None = None,
               on_bytes: Callable[[int], None] | None = None, workers: int | None = None) -> list[ParsedLog]:
    """Parse logs, in input order. Large inputs are read by one thread per CPU: the per-line work
    runs in polars, which releases the GIL, so files overlap on both cores."""
    sizes = [file_size(p) for p, _ in files]
    n = workers if workers is not None else min(os.cpu_count() or 1, len(files))
    if n < 2 or sum(sizes) < PARALLEL_MIN_BYTES:
        return [parse_log(p, i, ref=ref, on_bytes=on_bytes) for p, i in files]
    from concurrent.futures import ThreadPoolExecutor

    order = sorted(range(len(files)), key=lambda k: -sizes[k])  # the largest first: the threads end together
    with ThreadPoolExecutor(n) as pool:
        futures = {k: pool.submit(inputs.in_context(parse_log), files[k][0], files[k][1], ref=ref, on_bytes=on_bytes) for k in order}
        return [futures[k].result() for k in range(len(files))]


def file_size(path: Path) -> int:
    try:
        return inputs.stat(path).st_size
    except OSError:
        return 0


def check_paths(paths: list[str]) -> None:
    """Every non-glob path exists (InputError otherwise)."""
    for p in paths:
        why = None if any(c in p for c in "*?[") else path_problem(Path(p))
        if why is not None:
            raise InputError(f"{p}: {why}")


def reclassify(files: Files, skipped: list[Skipped]) -> Files:
    """Files whose name says nothing are classified by their content (a worker's role from its args);
    they leave ``skipped`` (in place). A worker without an index gets the next free one of its role."""
    found: Files = []
    for s in skipped:
        if not_readable(s.path) is not None or rotated_of(s.path):
            continue
        if file_size(s.path) == 0:
            s.reason = "empty file"
            continue
        try:
            with open_log(s.path) as fh:
                head = fh.read(65536).decode("utf-8", errors="replace")
        except (OSError, EOFError):
            continue
        kind = sniff_kind(head)
        if kind == "unknown" and vocabulary_in(s.path):   # the head says nothing; a later line may
            kind = "worker"
        if kind == "unknown":
            s.reason = NOT_DIAGS
        if kind == "worker":
            found.append((s.path, FileInfo(s.path, "worker", role_from_content(head))))
        elif kind in ("orchestrator", "prometheus-text"):
            found.append((s.path, FileInfo(s.path, kind)))
    got = {p for p, _ in found}
    skipped[:] = [s for s in skipped if s.path not in got]
    used: dict[str, set[int]] = {}
    for _, info in files:
        if info.kind == "worker" and info.role and info.index is not None:
            used.setdefault(info.role, set()).add(info.index)
    out = []
    for path, info in found:
        if info.kind != "worker":
            out.append((path, info))
            continue
        role = info.role or "unknown"
        taken = used.setdefault(role, set())
        idx = next(i for i in range(len(taken) + 1) if i not in taken)
        taken.add(idx)
        out.append((path, FileInfo(path, "worker", role, idx, None)))
    return files + out


def run_root(path: Path) -> Path:
    """The run directory a file belongs to: the parent of its ``logs/`` folder, or its own folder."""
    try:
        d = inputs.resolve(path).parent
    except (OSError, RuntimeError):  # a symlink loop: its own folder
        d = path.absolute().parent
    for cand in (d, *d.parents[:3]):
        if cand.name == "logs":
            return cand.parent
        if is_dir(cand / "logs"):
            return cand
    return d


@dataclass(frozen=True)
class RunFiles:
    """The classified files of one run (one run directory, or loose files of no directory)."""

    root: Path | None
    files: tuple[tuple[Path, FileInfo], ...]
    skipped: tuple[Skipped, ...]

    def of(self, *kinds: str) -> list[tuple[Path, FileInfo]]:
        return [(p, i) for p, i in self.files if i.kind in kinds]

    @property
    def log_bytes(self) -> int:
        return sum(inputs.stat(p).st_size for p, _ in self.of(*LOG_KINDS))

    @property
    def results(self) -> dict[int, Path]:
        """Concurrency -> its sa-bench result JSON (the per-request latencies goodput is counted from)."""
        return {info.concurrency: path for path, info in self.of("sa-bench-result") if info.concurrency}


def find_runs(paths: list[str]) -> list[RunFiles]:
    """One run per run directory among ``paths`` (files of different runs never share endpoints).
    Raises InputError on a path that does not exist."""
    files, skipped = discover(paths)
    files = reclassify(files, skipped)
    groups: dict[Path, list[tuple[Path, FileInfo]]] = {}
    for p, i in files:
        groups.setdefault(run_root(p), []).append((p, i))
    if not groups:
        return [RunFiles(None, (), tuple(skipped))]
    runs = []
    where = [(s, run_root(s.path)) for s in skipped]
    for n, (root, group) in enumerate(groups.items()):   # the first run also carries what no run holds
        mine = [s for s, r in where if r == root or (n == 0 and (is_dir(s.path) or r not in groups))]
        runs.append(RunFiles(root, tuple(group), tuple(mine)))
    return runs


def read_side(files: list[tuple[Path, FileInfo]], upto: Mapping[Path, int] | None = None) -> Side:
    """Job metadata, recipe, benchmark results; a broken side file is an error line, not a crash.
    sa-bench result JSONs are exact and replace the console blocks of the same concurrency. ``upto``:
    the bytes of a benchmark console there are so far (a replay's view of it), by path."""
    job: JobMeta | None = None
    jobs: list[Recipe] = []
    bench: list[BenchResult] = []
    accuracy: list[AccuracyResult] = []
    exact: list[BenchResult] = []
    rollup: list[BenchResult] = []
    errors: list[str] = []
    for path, info in files:
        try:
            if info.kind == "job-json" and job is None:
                job = read_job_json(path)
            elif info.kind == "benchmark":
                text = inputs.read_text(path) if upto is None or path not in upto else _head_text(path, upto[path])
                bench.extend(parse_benchmark_out(text))
                accuracy.extend(parse_accuracy(text))
            elif info.kind == "sa-bench-result":
                exact.append(read_sa_bench_json(path))
            elif info.kind == "rollup" and path.suffix == ".json":
                rollup.extend(read_rollup(path).runs)
            elif info.kind == "recipe" and not jobs:
                jobs = _recipes(path)
        except (BenchmarkFormatError, JobMetaError, OSError, ValueError) as e:
            errors.append(f"{path}: {e}")
    if not bench:
        bench = rollup
    if exact:
        by_c = {b.concurrency: b for b in bench}
        for r in exact:   # the console's `date` lines carry their zone: their window wins
            console = by_c.get(r.concurrency)
            if console is not None and console.started and console.ended:
                r = replace(r, started=console.started, ended=console.ended)
            by_c[r.concurrency] = r
        bench = sorted(by_c.values(), key=lambda b: b.concurrency or 0)
    return Side(job, tuple(bench), tuple(accuracy), tuple(errors), tuple(jobs))


def _head_text(path: Path, size: int) -> str:
    with inputs.open_input(path) as fh:
        return fh.read(size).decode("utf-8", errors="replace")


def _recipes(path: Path) -> list[Recipe]:
    from diag.parsers.recipe import NotARecipe, load_recipes

    try:
        return load_recipes(path)
    except NotARecipe:
        return []
