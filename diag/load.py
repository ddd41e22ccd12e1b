"""Load a run: discover its files, parse logs and side files, build the run model."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from parsers.benchmark import (
    BenchmarkFormatError,
    parse_accuracy,
    parse_benchmark_out,
    read_rollup,
    read_sa_bench_json,
)
from parsers.jobmeta import JobMetaError, read_job_json
from parsers.layout import FileInfo, role_from_content, sniff_kind
from parsers.records import Fault, Lifecycle
from rules.runmodel import Run, build_endpoints

from .prom import capture_logs
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


def load_run(paths: list[str], *, on_bytes: Callable[[int], None] | None = None,
             on_total: Callable[[int], None] | None = None) -> Run:
    """Everything diag knows about the run(s) at ``paths``. Raises InputError on a bad path."""
    files, skipped = discover(paths)
    files = _reclassify(files, skipped)
    if on_total:
        on_total(sum(p.stat().st_size for p, i in files if i.kind in ("worker", "frontend", "orchestrator")))
    orch = [parse_log(p, i, on_bytes=on_bytes) for p, i in files if i.kind == "orchestrator"]
    for src in orch:  # worker lines quoted in FAILURE DETAILS are not the orchestrator's own records
        src.records = [r for r in src.records if r.task is not None or isinstance(r, (Lifecycle, Fault))]
    ref = _run_start(orch)
    workers = [parse_log(p, i, ref=ref, on_bytes=on_bytes) for p, i in files if i.kind in ("worker", "frontend")]
    # Prometheus captures (observability.enabled): stats per endpoint even when logs have none
    prom = [lg for p, i in files if i.kind == "prometheus-capture" for lg in capture_logs(p)]
    sources = orch + workers + prom
    errors = [s.error for s in sources if s.error]
    endpoints, lifecycle, quoted = build_endpoints(sources)
    roots = {Path(a) for a in paths if Path(a).is_dir()}
    run = Run(next(iter(roots)) if len(roots) == 1 else None, sources,
              [(str(s.path), s.reason) for s in skipped], endpoints, lifecycle, quoted)
    run.errors = errors
    _side_files(run, files)
    return run


def _side_files(run: Run, files: list[tuple[Path, FileInfo]]) -> None:
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
    from parsers.recipe import NotARecipe, load_recipes

    try:
        recipes = load_recipes(path)
    except NotARecipe:
        return None
    return recipes[0] if recipes else None


def now() -> datetime:
    return datetime.now(tz=UTC)
