"""Startup stage lines: weights loading, model loaded, torch.compile, KV cache, NIXL, CUDA graphs,
registration, ready.

A 397B model takes 5-20 minutes to load, compile and capture CUDA graphs; while it does, an endpoint
has no stats lines and that is not a fault. The stage vocabulary and the lines that evidence each stage
are data (``catalog/startup.toml``, with sample lines the format tests run); this module turns a
matching line into a :class:`StageMark`. Building an endpoint's timeline from the marks is the run
model's job (:mod:`rules.startup`).
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass
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


def _load() -> tuple[tuple[Stage, ...], list[tuple[str, str, dict[str, Any]]]]:
    """Core's stages and their lines, then each engine's lines (``[[line]]`` with a core ``stage``), in
    registry order, named ``<engine>-stage-<stage>-<j>``."""
    with CATALOG_PATH.open("rb") as fh:
        data = tomllib.load(fh)
    stages, lines = [], []
    for i, entry in enumerate(data["stage"]):
        stages.append(Stage(entry["name"], entry["label"], entry.get("short", entry["label"]), i))
        for j, line in enumerate(entry.get("line", [])):
            lines.append((entry["name"], f"stage-{entry['name']}-{j}", line))
    names = {s.name for s in stages}
    for adapter in engines.adapters():
        catalog = adapter.catalog_file("startup")
        if catalog is None:
            continue
        with catalog.open("rb") as fh:
            own = tomllib.load(fh)
        for j, line in enumerate(own.get("line", [])):
            if line["stage"] not in names:
                raise ValueError(f"{adapter.name} startup catalog: unknown stage {line['stage']!r}")
            lines.append((line["stage"], f"{adapter.name}-stage-{line['stage']}-{j}", {**line, "engine": adapter.name}))
    for _, name, line in lines:
        if line["mark"] not in MARKS:
            raise ValueError(f"{name}: unknown mark {line['mark']!r}")
    return tuple(stages), lines


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


for _stage, _name, _line in _LINES:
    _fmt = declare(_name, "record", _line["pattern"], samples=_line["samples"], emits="stage",
                   triggers=tuple(_line["triggers"]), doc=f"startup stage {_stage}: {_line['mark']}",
                   engine=_line.get("engine"))
    record_parser(_fmt)(_parser(_stage, _line["mark"]))
