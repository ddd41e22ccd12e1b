"""Startup stage lines: weights loading, model loaded, torch.compile, KV cache, NIXL, CUDA graphs,
registration, ready.

A 397B model takes 5-20 minutes to load, compile and capture CUDA graphs; while it does, an endpoint
has no stats lines and that is not a fault. The stage vocabulary and the lines that evidence each stage
are data (``catalog/startup.toml``, with sample lines the format tests run; each engine adapter adds its
lines for the stages in its ``ADAPTER.catalogs["startup"]``); this module turns a matching line into a
:class:`StageMark`. Building an endpoint's timeline from the marks is the run
model's job (:mod:`rules.startup`).
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass
from importlib.abc import Traversable
from pathlib import Path
from typing import Any

from . import engines
from .formats import declare, record_parser
from .records import Header, StageMark

CATALOG_PATH = Path(__file__).with_name("catalog") / "startup.toml"
MARKS = ("start", "progress", "done")
_INTS = ("done", "total", "percent", "tokens")


@dataclass(frozen=True)
class Stage:
    """One startup stage of the catalog, in catalog order (``order``)."""

    name: str
    label: str
    short: str
    order: int


def _read(path: Traversable) -> list[dict[str, Any]]:
    with path.open("rb") as fh:
        return tomllib.load(fh)["stage"]


def _load() -> tuple[tuple[Stage, ...], list[tuple[str, str, dict[str, Any], str | None]]]:
    """Core's stages, each with its lines: core's first, then every adapter's (registry order)."""
    core = _read(CATALOG_PATH)
    stages = tuple(Stage(e["name"], e["label"], e.get("short", e["label"]), i) for i, e in enumerate(core))
    sources: list[tuple[str | None, list[dict[str, Any]]]] = [(None, core)]
    sources += [(a.name, _read(path)) for a, path in engines.catalog_files("startup")]
    unknown = {e["name"] for _, entries in sources for e in entries} - {s.name for s in stages}
    if unknown:
        raise ValueError(f"startup catalogs: unknown stages {sorted(unknown)}")
    lines = []
    for stage in stages:
        for engine, entries in sources:
            prefix = f"{engine}-stage" if engine else "stage"
            for entry in (e for e in entries if e["name"] == stage.name):
                for j, line in enumerate(entry.get("line", [])):
                    if line["mark"] not in MARKS:
                        raise ValueError(f"stage {stage.name!r}: unknown mark {line['mark']!r}")
                    lines.append((stage.name, f"{prefix}-{stage.name}-{j}", line, engine))
    return stages, lines


STAGES, _LINES = _load()
BY_NAME: dict[str, Stage] = {s.name: s for s in STAGES}


def _value(key: str, raw: str) -> Any:
    text = raw.replace(",", "")
    return int(text) if key in _INTS else float(text)


def _parser(stage: str, mark: str):
    def parse(m: re.Match[str], line: int, hdr: Header, **kw: object) -> StageMark:
        if mark == "progress":  # tqdm redraws in place: the last bar of the piece is the latest state
            m = list(m.re.finditer(m.string))[-1]
        fields = tuple((k, v if k == "phase" else _value(k, v)) for k, v in m.groupdict().items() if v is not None)
        return StageMark(line, stage=stage, mark=mark, fields=fields, **kw)  # type: ignore[arg-type]

    return parse


for _stage, _name, _line, _engine in _LINES:
    _fmt = declare(_name, "record", _line["pattern"], samples=_line["samples"], emits="stage",
                   triggers=tuple(_line["triggers"]), doc=f"startup stage {_stage}: {_line['mark']}",
                   engine=_engine)
    record_parser(_fmt)(_parser(_stage, _line["mark"]))
