"""``diag index``: every run under some roots analysed once (the one pipeline, in worker processes) into a
Parquet dataset, incrementally.

A run is re-analysed only when its **input fingerprint** changed: the list of its files (any depth, dot
folders aside) with their sizes and mtimes, a hash of the last :data:`TAIL_BYTES` of every log, the
digest of the settings that judge it (:meth:`~diag.rules.settings.Settings.digest`), the dataset schema
and the diag version. An unchanged run's rows are taken from the index as it was, or from the result
``diag tail RUN --save`` left in ``RUN/.diag/`` when its fingerprint matches. A run that fails (nothing
readable, an exception) gets a ``runs`` row with ``status = failed`` and its one-line reason; the others
go on. Failed runs are retried on the next index.

The index is written as a new generation beside the current one and swapped in whole, under the writers'
lock (:mod:`.store`): each run's partitions as it is done, the tables and ``index.json`` at the end.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import sys
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import polars as pl

from diag import __version__
from diag.emit import envelope
from diag.files import LOG_KINDS, InputError, RunFiles, find_runs
from diag.parsers import inputs
from diag.refusal import refusal

from .dataset import DATASET_SCHEMA, MANIFEST, SAVED, manifest_ok
from .rows import PARTITIONED, TABLES, failed_rows, report_rows, run_id_of
from .store import clean, generation, publish, staging, writing

if TYPE_CHECKING:
    from diag.rules.settings import Settings

TAIL_BYTES = 64 << 10
Rows = dict[str, pl.DataFrame]


def fingerprint(rf: RunFiles, settings: Settings) -> str:
    """The run's input fingerprint, judged with ``settings`` (see the module docstring)."""
    assert rf.root is not None
    h = hashlib.sha256(f"{DATASET_SCHEMA} {__version__} {settings.digest()}\n".encode())
    for dirpath, dirnames, filenames in inputs.walk(rf.root):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
        for name in sorted(filenames):
            path = Path(dirpath) / name
            try:
                st = inputs.stat(path)
                h.update(f"{path.relative_to(rf.root)}\0{st.st_size}\0{st.st_mtime_ns}\n".encode())
            except OSError as e:
                h.update(f"{path.relative_to(rf.root)}\0{e.errno}\n".encode())
    for path, _ in sorted(rf.of(*LOG_KINDS)):
        try:
            with inputs.open_input(path) as fh:
                fh.seek(max(0, inputs.stat(path).st_size - TAIL_BYTES))
                h.update(hashlib.sha256(fh.read()).digest())
        except OSError:
            h.update(b"unreadable")
    return h.hexdigest()[:32]


def analyze_run(rf: RunFiles, input_hash: str | None, settings: Settings) -> tuple[Rows, dict[str, Any] | None]:
    """One run through the pipeline: its index rows and its ``tail --format json`` document; a run that
    cannot be analysed gives its failed row (and no document). Runs in a worker process."""
    assert rf.root is not None
    try:
        from diag.emit.jsondoc import report_dict
        from diag.pipeline import Pipeline
        from diag.report_part import RunPart
        from diag.sources import BatchSource

        report = Pipeline(BatchSource(rf), settings).once()
        if report.read_nothing:
            reason = report.run.errors[0] if report.run.errors else "no logs diag understands"
            return failed_rows(rf.root, reason, input_hash), None
        return report_rows(report, RunPart.of(report, rf.results), input_hash), report_dict(report)
    except Exception as e:  # one run's failure is recorded; the index goes on
        text = " ".join(str(e).split()) or "no message"
        return failed_rows(rf.root, f"{type(e).__name__}: {text}"[:300], input_hash), None


# ------------------------------------------------------------------ a run's rows on disk
def write_rows(rows: Rows, out: Path) -> None:
    """One run's rows as ``<table>.parquet`` files in ``out`` (``RUN/.diag/``)."""
    out.mkdir(parents=True, exist_ok=True)
    for name, df in rows.items():
        if df.height:
            df.write_parquet(out / f"{name}.parquet")


def saved_rows(root: Path, input_hash: str) -> Rows | None:
    """The rows ``diag tail --save`` left in ``RUN/.diag/`` when their fingerprint is ``input_hash``, keyed
    to this path (the run may have been analysed under another mount point)."""
    d = root / SAVED
    try:
        runs = pl.read_parquet(d / "runs.parquet")
        if runs.height != 1 or runs["input_hash"][0] != input_hash or runs["status"][0] != "ok":
            return None
        rows = {"runs": runs}
        for name in (*TABLES, *PARTITIONED):
            if name != "runs" and (d / f"{name}.parquet").exists():
                rows[name] = pl.read_parquet(d / f"{name}.parquet")
    except (OSError, pl.exceptions.PolarsError):
        return None
    rid, path = run_id_of(root), str(root.absolute())
    rows = {k: df.with_columns(pl.lit(rid).alias("run_id")) for k, df in rows.items()}
    rows["runs"] = rows["runs"].with_columns(pl.lit(path).alias("path"), pl.lit(root.name).alias("name"))
    return rows


def save_run(rf: RunFiles, report: Any, input_hash: str) -> Path:
    """``diag tail RUN --save``: the tail document and the run's index rows in ``RUN/.diag/``."""
    from diag.emit import dumps
    from diag.emit.jsondoc import report_dict
    from diag.report_part import RunPart

    assert rf.root is not None
    out = rf.root / SAVED
    write_rows(report_rows(report, RunPart.of(report, rf.results), input_hash), out)
    (out / "result.json").write_text(dumps(report_dict(report), indent=1) + "\n", encoding="utf-8")
    return out


# ------------------------------------------------------------------ the index
@dataclass
class Outcome:
    """What one ``diag index`` did."""

    into: Path
    runs: int = 0
    parsed: int = 0
    reused: int = 0
    failed: list[tuple[str, str]] = field(default_factory=list)   # (path, reason)

    def to_dict(self) -> dict[str, Any]:
        return {**envelope("diag-index-1"), "runs": self.runs, "parsed": self.parsed, "reused": self.reused,
                "failed": len(self.failed), "into": str(self.into)}


def default_into(roots: Sequence[str]) -> Path:
    return Path(roots[0]) / SAVED / "index"


def _old_hashes(prev: Path | None) -> dict[str, str]:
    if prev is None or not manifest_ok(prev):
        return {}
    try:
        old = pl.read_parquet(prev / "runs.parquet", columns=["run_id", "status", "input_hash"])
    except (OSError, pl.exceptions.PolarsError):
        return {}
    return {r: h for r, s, h in old.iter_rows() if s == "ok" and h}


def build_index(roots: Sequence[str], into: Path | None = None, jobs: int = 1, settings: Settings | None = None,
                wait: float = 0, on_wait: Callable[[str], None] | None = None,
                on_run: Callable[[int], None] | None = None, on_total: Callable[[int], None] | None = None) -> Outcome:
    """Index the runs under ``roots`` into ``into`` (default ``ROOT/.diag/index``), judged with ``settings``
    (default: those of the current directory). Waits up to ``wait`` seconds for another writer of ``into``
    (``on_wait`` hears that it does); ``on_total`` hears how many runs are analysed, ``on_run`` each one
    done. Raises InputError on a missing root or roots that hold no run, StoreError when ``into`` cannot be
    locked."""
    if settings is None:
        from diag.rules.settings import resolve

        settings = resolve(Path.cwd())
    into = into or default_into(roots)
    runs = [rf for rf in find_runs(list(roots)) if rf.root is not None and not _inside(rf.root, into)]
    if not runs:   # nothing under the roots is a run: refused like every command, before writing anything
        raise InputError(refusal("logs", roots))
    with writing(into, wait, on_wait):
        clean(into)
        prev = generation(into)
        hashes = [fingerprint(rf, settings) for rf in runs]
        ids = [run_id_of(rf.root) for rf in runs if rf.root is not None]
        old = _old_hashes(prev)
        keep = [rid for rid, h in zip(ids, hashes, strict=True) if old.get(rid) == h]
        done, todo = _saved_or_todo(runs, ids, hashes, keep)
        outcome = Outcome(into, runs=len(runs), reused=len(keep) + len(done))
        if not todo and not done and old and list(old) == ids:  # nothing new, changed or gone: the index stays
            return outcome
        with staging(into) as staged:
            _link_partitions(prev, staged, keep)
            done = {rid: _put_partitions(staged, rid, rows) for rid, rows in done.items()}
            if on_total:
                on_total(len(todo))
            for rid, rows in _analyze_all([(rf, h) for rf, _, h in todo], [rid for _, rid, _ in todo], jobs,
                                          settings):
                done[rid] = _put_partitions(staged, rid, rows)
                if on_run:
                    on_run(1)
            for rows in done.values():
                if rows["runs"]["status"][0] == "failed":
                    outcome.failed.append((rows["runs"]["path"][0], rows["runs"]["error"][0]))
            outcome.parsed = len(todo) - len(outcome.failed)
            _write_tables(prev, staged, ids, keep, done)
            publish(into, staged, {**envelope(DATASET_SCHEMA), "tables": [*TABLES, *PARTITIONED]})
        clean(into)
    return outcome


def _saved_or_todo(runs: list[RunFiles], ids: list[str], hashes: list[str],
                   keep: list[str]) -> tuple[dict[str, Rows], list[tuple[RunFiles, str, str]]]:
    """The runs not kept from the index: those ``diag tail --save`` left a matching result for (their rows),
    and those to analyse (run, run_id, fingerprint)."""
    done: dict[str, Rows] = {}
    todo = []
    for rf, rid, h in zip(runs, ids, hashes, strict=True):
        if rid in keep:
            continue
        assert rf.root is not None
        saved = saved_rows(rf.root, h)
        if saved is not None:
            done[rid] = saved
        else:
            todo.append((rf, rid, h))
    return done, todo


def _inside(path: Path, into: Path) -> bool:
    return path.absolute().is_relative_to(into.absolute())


def usable_cpus() -> int:
    """The CPUs this process may run on (its affinity mask, a cgroup's cpuset under SLURM)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - no affinity call on this platform
        return os.cpu_count() or 1


def _analyze_all(items: list[tuple[RunFiles, str]], ids: list[str], jobs: int,
                 settings: Settings) -> Iterator[tuple[str, Rows]]:
    """(run_id, rows) as each run finishes; ``jobs`` worker processes (spawned: polars' threads and fork do
    not mix), in this process when one."""
    if jobs <= 1 or len(items) <= 1:
        for (rf, h), rid in zip(items, ids, strict=True):
            yield rid, analyze_run(rf, h, settings)[0]
        return
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor, as_completed
    from concurrent.futures.process import BrokenProcessPool

    order = sorted(range(len(items)), key=lambda k: -items[k][0].log_bytes)  # the largest first
    workers = min(jobs, len(items), usable_cpus())   # more processes than CPUs only add start-ups and memory
    with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn")) as pool:
        futures = {pool.submit(analyze_run, items[k][0], items[k][1], settings): k for k in order}
        for fut in as_completed(futures):
            k = futures[fut]
            rf, h = items[k]
            assert rf.root is not None
            try:
                rows = fut.result()[0]
            except BrokenProcessPool as e:  # the worker died (out of memory, a signal)
                rows = failed_rows(rf.root, f"the worker process died ({e})"[:300], h)
            yield ids[k], rows


# ------------------------------------------------------------------ the generation being written
def _partition(gen: Path, name: str, rid: str) -> Path:
    return gen / name / f"run_id={rid}"


def _link_partitions(prev: Path | None, staged: Path, keep: list[str]) -> None:
    """The kept runs' partitions in the new generation: hard links to the previous one's files (never
    written again once in a generation), copies where the filesystem has no hard links."""
    for name in PARTITIONED:
        (staged / name).mkdir()
        for rid in keep if prev is not None else ():
            assert prev is not None
            src = _partition(prev, name, rid)
            if not src.is_dir():
                continue
            dst = _partition(staged, name, rid)
            dst.mkdir()
            for file in src.iterdir():
                try:
                    os.link(file, dst / file.name)
                except OSError:
                    shutil.copy2(file, dst / file.name)


def _put_partitions(staged: Path, rid: str, rows: Rows) -> Rows:
    """A run's partitions written into the new generation; its rows of the other tables returned."""
    for name in PARTITIONED:
        df = rows.get(name)
        if df is not None and df.height:
            _partition(staged, name, rid).mkdir()
            df.drop("run_id").write_parquet(_partition(staged, name, rid) / "part-0.parquet")
    return {name: df for name, df in rows.items() if name in TABLES}


def _write_tables(prev: Path | None, staged: Path, ids: list[str], keep: list[str], done: dict[str, Rows]) -> None:
    """The tables in the order of ``ids``: the kept runs' rows from the previous generation, the others
    from ``done``."""
    order = pl.DataFrame({"run_id": ids, "_order": range(len(ids))}, schema={"run_id": pl.String, "_order": pl.Int64})
    for name, schema in TABLES.items():
        frames = [pl.read_parquet(prev / f"{name}.parquet").filter(pl.col("run_id").is_in(keep))] \
            if keep and prev is not None else []
        frames += [rows[name] for rows in done.values() if name in rows]
        df = pl.concat([f.cast(schema) for f in frames], how="vertical") if frames else \
            pl.DataFrame(schema=schema)
        df = df.join(order, on="run_id", how="left", maintain_order="left").sort("_order", maintain_order=True)
        df.drop("_order").write_parquet(staged / f"{name}.parquet")


def progress(enabled: bool) -> Any:
    """A rich progress bar over runs on stderr (a terminal only), or None."""
    if not enabled or not sys.stderr.isatty():
        return None
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn, TimeRemainingColumn

    return Progress("[progress.description]{task.description}", BarColumn(), MofNCompleteColumn(),
                    TimeElapsedColumn(), TimeRemainingColumn(), console=Console(file=sys.stderr), transient=True)


__all__ = ["DATASET_SCHEMA", "MANIFEST", "Outcome", "analyze_run", "build_index", "default_into", "fingerprint",
           "manifest_ok", "progress", "save_run", "saved_rows", "write_rows"]
