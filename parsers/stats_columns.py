"""The one column spec of the engine stats: :class:`parsers.records.StatsSample`'s fields.

Each field carries its unit and description (:func:`parsers.records.column`) and whether it is a
column of the run model's stats frame; its polars dtype follows from its type. Everything that lists
the stats fields is derived here: the extracted rows' columns (:data:`RECORD_COLUMNS`, what
:mod:`parsers.columns` builds), the run model's metric columns (:data:`RUN_METRICS`, and
:data:`RUN_SCHEMA` with the latency quantiles of ``latency``, one column per
:data:`parsers.histogram.COLUMNS`).
"""

from __future__ import annotations

from dataclasses import dataclass, fields

import polars as pl

from .histogram import COLUMNS as LATENCY_COLUMNS
from .records import Record, StatsSample

__all__ = ["BASE_FIELDS", "LATENCY_COLUMNS", "RECORD_COLUMNS", "RUN_METRICS", "RUN_SCHEMA", "STATS_SPEC", "TS",
           "StatsColumn"]

TS = pl.Datetime("us", "UTC")
_DTYPES: dict[str, pl.DataType] = {"int": pl.Int64(), "float": pl.Float64(), "str": pl.Utf8(), "datetime": TS,
                                   "bool": pl.Boolean()}


@dataclass(frozen=True)
class StatsColumn:
    """One stats column: name, polars dtype, unit, description; ``record``: a field of the record
    itself (else a latency quantile of its ``latency``), ``run``: a column of the run model's frame."""

    name: str
    dtype: pl.DataType
    unit: str
    doc: str
    record: bool = True
    run: bool = False


def _dtype(annotation: object) -> pl.DataType:
    """The polars dtype of a field's type (``float | None`` -> Float64)."""
    return _DTYPES[str(annotation).split("|")[0].strip()]


def _spec() -> tuple[StatsColumn, ...]:
    out = []
    for f in fields(StatsSample):
        unit, doc, run = f.metadata["unit"], f.metadata["doc"], f.metadata["run"]
        if f.name == "latency":
            out += [StatsColumn(c, pl.Float64(), unit, f"{doc}: {c}", record=False, run=run) for c in LATENCY_COLUMNS]
        else:
            out.append(StatsColumn(f.name, _dtype(f.type), unit, doc, run=run))
    return tuple(out)


STATS_SPEC = _spec()
BASE_FIELDS = tuple(f.name for f in fields(Record))         # line, ts, md, proc, task: every record's
RECORD_COLUMNS: dict[str, pl.DataType] = {c.name: c.dtype for c in STATS_SPEC if c.record}
RUN_METRICS = tuple(c.name for c in STATS_SPEC if c.record and c.run)       # prompt_tps ... ext_hit
RUN_SCHEMA: dict[str, pl.DataType] = {c.name: c.dtype for c in STATS_SPEC if c.run}  # metrics + latency
