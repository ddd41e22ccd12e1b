"""Test helpers: a run directory read the way `diag tail` reads it (one pipeline, default settings)."""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from diag.files import find_runs
from diag.pipeline import Pipeline
from diag.report import Report
from diag.rules.runmodel import Run
from diag.rules.settings import Settings
from diag.sources import BatchSource, ReplaySource


def batch(paths: list[str] | str | Path) -> BatchSource:
    runs = find_runs([str(p) for p in paths] if isinstance(paths, list) else [str(paths)])
    assert len(runs) == 1, runs
    return BatchSource(runs[0])


SAMPLES = Path(__file__).resolve().parents[1] / "samples"
RUN_FOLDERS = (SAMPLES / "runs", SAMPLES / "telemetry")   # each directory in them is one sample run


def report_of(paths: list[str] | str | Path, settings: Settings | None = None) -> Report:
    """The batch report; the shipped samples' (read-only files, default settings) once per test process:
    a Report and its Run are immutable."""
    keys = tuple(str(Path(p).resolve()) for p in (paths if isinstance(paths, list) else [paths]))
    if settings is None and all(Path(k).is_relative_to(SAMPLES) for k in keys):
        return _sample_report(keys)
    return Pipeline(batch(paths), settings or Settings()).once()


_ONCE = Pipeline.once   # the pipeline's own, whatever :func:`shared_sample_pipelines` puts in its place


@functools.cache
def _sample_report(paths: tuple[str, ...]) -> Report:
    return _ONCE(Pipeline(batch(list(paths)), Settings()))


@contextlib.contextmanager
def shared_sample_pipelines() -> Iterator[None]:
    """Within: ``Pipeline.once`` over one shipped sample run (a run directory of samples/runs or samples/telemetry, default
    settings, no clock) returns this process's report of it (:func:`report_of`), so ``diag`` commands run
    in-process (``run_diag``: check, index, report over the samples) do not judge the same read-only run
    again. Any other pipeline runs as usual."""
    def once(self: Pipeline) -> Report:
        src = self.source
        if (isinstance(src, BatchSource) and src.on_bytes is None and self.clock is None and src.root is not None
                and self.settings == Settings() and Path(src.root).resolve().parent in RUN_FOLDERS):
            return _sample_report((str(Path(src.root).resolve()),))
        return _ONCE(self)

    Pipeline.once = once  # type: ignore[method-assign]
    try:
        yield
    finally:
        Pipeline.once = _ONCE  # type: ignore[method-assign]


def load_run(paths: list[str] | str | Path) -> Run:
    return report_of(paths).run


def replay(path: str | Path, **kw: Any) -> ReplaySource:
    return ReplaySource(batch(path).files, **kw)


def tail_json(path: str | Path) -> dict[str, Any]:
    """``diag tail PATH --format json`` as a user runs it (its own process), schema-checked."""
    import json
    import subprocess
    import sys

    from schemas import validate

    root = Path(__file__).resolve().parents[1]
    res = subprocess.run([sys.executable, "-m", "diag", "tail", str(path), "--format", "json"],
                         capture_output=True, text=True, cwd=root, timeout=120)
    assert res.returncode in (0, 1), res.stderr
    doc = json.loads(res.stdout)
    validate(doc, "tail")
    return doc
