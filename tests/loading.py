"""Test helpers: a run directory read the way `diag tail` reads it (one pipeline, default settings)."""

from __future__ import annotations

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


def report_of(paths: list[str] | str | Path, settings: Settings | None = None) -> Report:
    return Pipeline(batch(paths), settings or Settings()).once()


def load_run(paths: list[str] | str | Path) -> Run:
    return report_of(paths).run


def replay(path: str | Path, **kw: Any) -> ReplaySource:
    return ReplaySource.of(batch(path), **kw)
