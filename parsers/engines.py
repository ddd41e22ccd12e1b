"""The engine registry: the bundled adapters and any installed under the ``diag.engines`` entry point.

Like harlequin's adapters, the bundled engines register exactly as a third party's would: each is a
package exposing ``ADAPTER`` (an :class:`~diag.parsers.engine.EngineAdapter`). Loading an adapter imports
its format modules, which declare its line formats in :mod:`diag.parsers.formats`. A plug-in that fails
to import is skipped and named by :func:`load_errors`.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from functools import cache
from importlib.abc import Traversable
from importlib.metadata import entry_points
from types import ModuleType

from .engine import EngineAdapter

BUNDLED = ("diag.engines.vllm", "diag.engines.sglang", "diag.engines.trtllm")
GROUP = "diag.engines"
_ERRORS: list[str] = []
_CURRENT: ContextVar[str | None] = ContextVar("diag_engine", default=None)


@cache
def adapters() -> tuple[EngineAdapter, ...]:
    """Every registered engine, bundled first (in BUNDLED order), then installed plug-ins by name."""
    found: dict[str, EngineAdapter] = {}
    targets = [(m, m) for m in BUNDLED]
    try:
        targets += sorted((ep.name, ep.value) for ep in entry_points(group=GROUP))
    except Exception as exc:  # a broken environment: the bundled engines still load
        _ERRORS.append(f"entry points: {exc}")
    for label, target in targets:
        module, _, attr = target.partition(":")
        try:
            adapter = getattr(importlib.import_module(module), attr or "ADAPTER")
        except Exception as exc:
            _ERRORS.append(f"{label}: {type(exc).__name__}: {exc}")
            continue
        if not isinstance(adapter, EngineAdapter):
            _ERRORS.append(f"{label}: not an EngineAdapter")
            continue
        found.setdefault(adapter.name, adapter)
    for adapter in found.values():
        for module in adapter.format_modules:
            importlib.import_module(module)
    return tuple(found.values())


def load_errors() -> tuple[str, ...]:
    """Plug-ins that could not be loaded, one line each."""
    adapters()
    return tuple(_ERRORS)


def get(name: str | None) -> EngineAdapter | None:
    """The adapter called ``name`` (a recipe's backend.type spelling counts), else None."""
    if not name:
        return None
    key = name.lower()
    for a in adapters():
        if a.name == key or key in a.backend_types:
            return a
    return None


def default() -> EngineAdapter:
    """The engine assumed where nothing tells (a run without a recipe or logs that name one): the first
    registered, the bundled vLLM."""
    return adapters()[0]


def names() -> tuple[str, ...]:
    return tuple(a.name for a in adapters())


def by_header(cls: str) -> EngineAdapter | None:
    """The engine whose record heads parse as ``cls`` (a Header.cls value)."""
    for a in adapters():
        if cls in a.header_classes:
            return a
    return None


def engine_of(text: str) -> str | None:
    """The name of the engine a log's head shows (:func:`from_text`), else None."""
    a = from_text(text)
    return a.name if a is not None else None


def by_stats_variant(variant: str) -> EngineAdapter | None:
    """The engine whose stats lines parse as ``variant`` (a StatsSample.variant value)."""
    for a in adapters():
        if variant in a.stats_variants:
            return a
    return None


def from_text(text: str) -> EngineAdapter | None:
    """The engine a log's text shows: the launch module on a command line, else the evidence literals
    only that engine writes; None when no engine or more than one answers."""
    for rung in ("launch_modules", "evidence"):
        hits = [a for a in adapters() if any(s in text for s in getattr(a, rung))]
        if len(hits) == 1:
            return hits[0]
        if hits:
            return None
    return None


def load_checks() -> None:
    """Import every adapter's recipe-check module (each registers its checks with the rules)."""
    for a in adapters():
        if a.checks_module:
            importlib.import_module(a.checks_module)


def catalog_files(kind: str) -> tuple[tuple[EngineAdapter, Traversable], ...]:
    """Every adapter's catalog of ``kind`` (faults, startup, call_sites, sites), in registry order."""
    return tuple((a, f) for a in adapters() if (f := a.catalog_file(kind)) is not None)


def frames(kind: str) -> tuple[str, ...]:
    """Every adapter's traceback markers of ``kind`` (startup, runtime), in registry order."""
    return tuple(m for a in adapters() for m in a.frames.get(kind, ()))


def metrics() -> tuple[tuple[EngineAdapter, ModuleType], ...]:
    """Every adapter's Prometheus vocabulary module (:mod:`diag.parsers.prom_vocab` documents its shape)."""
    return tuple((a, importlib.import_module(a.metrics_module)) for a in adapters() if a.metrics_module)


def current() -> EngineAdapter:
    """The engine whose run (or recipe) is being judged (:func:`using`), else the default engine: the one
    catalog texts spell their knobs for."""
    return get(_CURRENT.get()) or default()


@contextmanager
def using(name: str | None) -> Iterator[EngineAdapter]:
    """Judge as engine ``name`` within the block (catalog and verdict texts name its knobs)."""
    token = _CURRENT.set(name)
    try:
        yield current()
    finally:
        _CURRENT.reset(token)
