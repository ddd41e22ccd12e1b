"""The first step of the one pipeline: parsed logs and side facts -> the :class:`Run`.

``diag.pipeline`` assembles every source's logs here, and the catalog's examples
(:mod:`rules.examples`) go through the same function: one way to build a Run.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING

from diag.parsers import engines
from diag.parsers.ingest import ParsedLog
from diag.parsers.records import AccuracyResult, BenchResult, Fault

from .endpoints import FrameCache, build_endpoints
from .runmodel import Run

if TYPE_CHECKING:
    from diag.parsers.jobmeta import JobMeta
    from diag.parsers.recipe import Recipe


@dataclass(frozen=True)
class Side:
    """What a run knows besides its logs: job metadata, recipe, benchmark and accuracy results, and
    the side files that could not be read (one line each)."""

    job: JobMeta | None = None
    benchmark: tuple[BenchResult, ...] = ()
    accuracy: tuple[AccuracyResult, ...] = ()
    errors: tuple[str, ...] = ()
    jobs: tuple[Recipe, ...] = ()            # every job of the recipe file (override variants, sweep points)
    concurrencies: tuple[int, ...] = ()      # the benchmark's, when known without a recipe (else the recipe's)

    @property
    def recipe(self) -> Recipe | None:
        return self.jobs[0] if self.jobs else None


def assemble(logs: Sequence[ParsedLog], side: Side, *, root: Path | None = None,
             skipped: Sequence[tuple[str, str]] = (), errors: Sequence[str] = (),
             cache: FrameCache | None = None) -> Run:
    """The run model of parsed logs plus side facts, read-only all the way down: the logs are frozen
    copies (:meth:`ParsedLog.frozen`; the source goes on appending to its own). ``cache`` keeps
    per-file frames between calls for a growing run (the result is the same as without it)."""
    logs = tuple(lg.frozen() for lg in logs)
    recipe = side.recipe
    engine, engine_by = engine_of_run(logs, recipe)
    endpoints, lifecycle, quoted = build_endpoints(logs, cache, own_batches(engine, recipe))
    build = recipe.build.label if recipe is not None and recipe.build.kind != "unknown" else None
    build = build or next((str(v) for ep in endpoints.values() if (v := ep.facts.get("version"))), None)
    build = build or (recipe.build.label if recipe is not None else None)
    concurrencies = side.concurrencies or (tuple(recipe.benchmark.concurrencies) if recipe is not None else ())
    return Run(root, logs, tuple(skipped), MappingProxyType(endpoints), tuple(lifecycle), tuple(quoted),
               job=side.job, benchmark=side.benchmark, accuracy=side.accuracy, concurrencies=concurrencies,
               build=build, errors=(*side.errors, *(lg.error for lg in logs if lg.error), *errors),
               jobs=side.jobs, engine_name=engine, engine_by=engine_by)


def own_batches(engine: str | None, recipe: Recipe | None) -> frozenset[str]:
    """The recipe's roles whose workers' ranks each schedule their own batch, as the engine's adapter reads them."""
    adapter = engines.get(engine)
    if recipe is None or adapter is None or adapter.own_batches is None:
        return frozenset()
    return frozenset(name for name, role in recipe.roles.items() if adapter.own_batches(role))


def engine_of_run(logs: Sequence[ParsedLog], recipe: Recipe | None) -> tuple[str | None, str]:
    """Which serving engine a run used, and what told: the recipe's ``backend.type`` when it writes one,
    else what most of its logs show (launch module, lines only that engine writes), else the package most of
    its tracebacks ran in (``frames``: :mod:`diag.parsers.frames`), else srtctl's default for a recipe that
    names none (SGLang); an engine no adapter knows is kept by name."""
    if recipe is not None and recipe.backend_declared:
        return recipe.backend, "recipe"
    seen = Counter(lg.engine for lg in logs if lg.engine)
    if seen:
        return seen.most_common(1)[0][0], "logs"
    framed = Counter(r.engine for lg in logs for r in lg.records if isinstance(r, Fault) and r.engine)
    if framed:
        return framed.most_common(1)[0][0], "frames"
    if recipe is not None:
        return recipe.backend, "recipe default"
    return None, ""


__all__ = ["Side", "assemble", "engine_of_run"]
