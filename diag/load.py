"""Load a run: discover its files, parse logs and side files, build the run model."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from diag.parsers.benchmark import (
    BenchmarkFormatError,
    parse_accuracy,
    parse_benchmark_out,
    read_rollup,
    read_sa_bench_json,
)
from diag.parsers.jobmeta import JobMetaError, read_job_json
from diag.parsers.layout import FileInfo, role_from_content, sniff_kind
from diag.parsers.records import Fault, Lifecycle
from diag.rules.runmodel import Run, build_endpoints

from .prom import capture_logs, exposition_log
from .sources import Skipped, discover, parse_log


def _reclassify(files: list[tuple[Path, FileInfo]], skipped: list[Skipped]) -> list[tuple[Path, FileInfo]]:
    """Files whose name says nothing are classified by their content (a worker's role from its args)."""
    found: list[tuple[Path, FileInfo]] = []
    for s in skipped:
        if not s.path.is_file():
            continue
        try:
            with s.path.open("rb") as fh:
                head = fh.read(65536).decode("utf-8", errors="replace")
        except OSError:
            continue
        kind = sniff_kind(head)
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
        role = info.role or "unknown"  # a worker without an index gets the next free one of its role
        taken = used.setdefault(role, set())
        idx = next(i for i in range(len(taken) + 1) if i not in taken)
        taken.add(idx)
        out.append((path, FileInfo(path, "worker", role, idx, None)))
    return files + out


def _run_start(orchestrators: list[Any]) -> datetime | None:
    stamps = [r.ts for src in orchestrators for r in src.records if isinstance(r, Lifecycle) and r.ts]
    return min(stamps) if stamps else None


def run_root(path: Path) -> Path:
    """The run directory a file belongs to: the parent of its ``logs/`` folder, or its own folder."""
    d = path.resolve().parent
    for cand in (d, *d.parents[:3]):
        if cand.name == "logs":
            return cand.parent
        if (cand / "logs").is_dir():
            return cand
    return d


def load_runs(paths: list[str], *, on_bytes: Callable[[int], None] | None = None,
              on_total: Callable[[int], None] | None = None) -> list[Run]:
    """One run per run directory among ``paths`` (files of different runs never share endpoints)."""
    files, skipped = discover(paths)
    files = _reclassify(files, skipped)
    if on_total:
        on_total(sum(p.stat().st_size for p, i in files if i.kind in ("worker", "frontend", "orchestrator")))
    groups: dict[Path, list[tuple[Path, FileInfo]]] = {}
    for p, i in files:
        groups.setdefault(run_root(p), []).append((p, i))
    if not groups:
        return [_build(None, [], skipped, on_bytes)]
    runs = []
    for n, (root, group) in enumerate(groups.items()):
        mine = [s for s in skipped if run_root(s.path) == root or (n == 0 and s.path.is_dir())]
        runs.append(_build(root, group, mine, on_bytes))
    return runs


def load_run(paths: list[str], *, on_bytes: Callable[[int], None] | None = None,
             on_total: Callable[[int], None] | None = None) -> Run:
    """Everything diag knows about the run at ``paths``, as one run. Raises InputError on a bad path."""
    files, skipped = discover(paths)
    files = _reclassify(files, skipped)
    if on_total:
        on_total(sum(p.stat().st_size for p, i in files if i.kind in ("worker", "frontend", "orchestrator")))
    roots = {run_root(p) for p, _ in files}
    return _build(next(iter(roots)) if len(roots) == 1 else None, files, skipped, on_bytes)


def _build(root: Path | None, files: list[tuple[Path, FileInfo]], skipped: list[Skipped],
           on_bytes: Callable[[int], None] | None) -> Run:
    orch = [parse_log(p, i, on_bytes=on_bytes) for p, i in files if i.kind == "orchestrator"]
    for src in orch:  # worker lines quoted in FAILURE DETAILS are not the orchestrator's own records
        src.records = [r for r in src.records if r.task is not None or isinstance(r, (Lifecycle, Fault))]
    ref = _run_start(orch)
    workers = [parse_log(p, i, ref=ref, on_bytes=on_bytes) for p, i in files if i.kind in ("worker", "frontend")]
    # Prometheus captures (observability.enabled): stats per endpoint even when logs have none
    prom = [lg for p, i in files if i.kind == "prometheus-capture" for lg in capture_logs(p)]
    prom += [exposition_log(p) for p, i in files if i.kind == "prometheus-text"]
    sources = orch + workers + prom
    endpoints, lifecycle, quoted = build_endpoints(sources)
    run = Run(root, sources, [(str(s.path), s.reason) for s in skipped], endpoints, lifecycle, quoted)
    run.errors = [s.error for s in sources if s.error]
    read_side_files(run, files)
    return run


def read_side_files(run: Run, files: list[tuple[Path, FileInfo]]) -> None:
    """Job metadata, recipe, benchmark results; a broken side file is an error line, not a crash."""
    results = []
    for path, info in files:
        try:
            if info.kind == "job-json" and run.job is None:
                run.job = read_job_json(path)
            elif info.kind == "benchmark":
                text = path.read_text(encoding="utf-8", errors="replace")
                run.benchmark.extend(parse_benchmark_out(text))
                run.accuracy.extend(parse_accuracy(text))
            elif info.kind == "sa-bench-result":
                results.append(read_sa_bench_json(path))
            elif info.kind == "rollup" and path.suffix == ".json" and not run.benchmark:
                run.benchmark.extend(read_rollup(path).runs)
            elif info.kind == "recipe" and run.recipe is None:
                run.recipe = _recipe(path)
        except (BenchmarkFormatError, JobMetaError, OSError, ValueError) as e:
            run.errors.append(f"{path}: {e}")
    if results:  # the JSON result files are exact; they replace the console blocks
        by_c = {b.concurrency: b for b in run.benchmark}
        for r in results:
            by_c[r.concurrency] = r
        run.benchmark = sorted(by_c.values(), key=lambda b: b.concurrency or 0)
    if run.recipe is not None:
        bench = getattr(run.recipe, "benchmark", None)
        run.concurrencies = list(getattr(bench, "concurrencies", None) or [])
        build = getattr(run.recipe, "build", None)
        run.build = getattr(build, "label", None) or getattr(build, "version", None) or None
    for ep in run.endpoints.values():
        v = ep.facts.get("version")
        if v and not run.build:
            run.build = str(v)


def _recipe(path: Path) -> Any:
    from diag.parsers.recipe import NotARecipe, load_recipes

    try:
        recipes = load_recipes(path)
    except NotARecipe:
        return None
    return recipes[0] if recipes else None


def now() -> datetime:
    return datetime.now(tz=UTC)
