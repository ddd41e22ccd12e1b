"""Reading an index: :func:`select_runs` (``diag runs``, ``diag report INDEX`` and any other caller) and the
``--where`` filter, a small grammar compiled to a polars expression (never evaluated as Python):

    expr   := cond (("and" | "or") cond)*      and binds tighter than or; parentheses group
    cond   := COLUMN OP VALUE
    OP     := = | != | < | <= | > | >= | ~     (~: the column, as text, matches a regex)
    VALUE  := 'text' | "text" | number | true | false | null

``= null`` / ``!= null`` test for a missing value. An unknown column, a value of the wrong kind, or one
outside the column's closed vocabulary (``verdict = 'prefill_bound'``: the error lists the values) is a
:class:`QueryError` (one line). Every read takes one whole generation of the index (:func:`snapshot`),
whatever a ``diag index`` writing it meanwhile does.
"""

from __future__ import annotations

import difflib
import errno
import re
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from functools import cache
from pathlib import Path
from typing import Any

import polars as pl

from diag.parsers import inputs

from .dataset import MANIFEST, SAVED, manifest_ok
from .store import StoreError, hold

PART = "report_part"   # the runs column diag report reads; not a column for people


class QueryError(ValueError):
    """A bad --where or --sort, or no index where one was named."""


def index_dir(path: str | Path) -> Path:
    """The index a path names: the index itself, or ``ROOT/.diag/index``."""
    p = Path(path)
    for cand in (p, p / SAVED / "index"):
        try:
            found = stat.S_ISREG(inputs.stat(cand / MANIFEST).st_mode)
        except OSError as e:  # a directory on the way that cannot be searched: no index to be read there
            if e.errno not in (errno.ENOENT, errno.ENOTDIR, errno.ELOOP):
                raise QueryError(f"{cand}: cannot look for an index: {e.strerror or e}") from None
            found = False
        if found:
            if not manifest_ok(cand):
                raise QueryError(f"{cand}: an index of another diag version; run diag index again")
            return cand
    raise QueryError(f"{path}: no index here (diag index {path} makes one)")


@contextmanager
def snapshot(index: str | Path) -> Iterator[Path]:
    """The folder of one whole generation of the index ``index`` names, held while the caller reads it (no
    writer deletes it meanwhile). Raises :class:`QueryError`."""
    try:
        with hold(index_dir(index)) as whole:
            yield whole
    except StoreError as e:
        raise QueryError(str(e)) from None


@cache
def _grammar() -> Any:
    import pyparsing as pp

    column = pp.Word(pp.alphas + "_", pp.alphanums + "_")
    op = pp.one_of("= != <= >= < > ~")
    text = pp.QuotedString("'", esc_char="\\") | pp.QuotedString('"', esc_char="\\")
    number = pp.Regex(r"[+-]?(\d+\.\d*|\.\d+|\d+)([eE][+-]?\d+)?").set_parse_action(
        lambda t: float(t[0]) if any(c in t[0] for c in ".eE") else int(t[0]))
    word = (pp.CaselessKeyword("true").set_parse_action(lambda: True)
            | pp.CaselessKeyword("false").set_parse_action(lambda: False)
            | pp.CaselessKeyword("null").set_parse_action(lambda: [None]))
    cond = pp.Group(column + op + (text | number | word).set_name("a value ('text', a number, true, false, null)"))
    return pp.infix_notation(cond, [(pp.CaselessKeyword("and"), 2, pp.OpAssoc.LEFT),
                                    (pp.CaselessKeyword("or"), 2, pp.OpAssoc.LEFT)])


def compile_where(text: str, schema: pl.Schema) -> pl.Expr:
    """``verdict = 'prefill-bound' and tok_s_gpu_working > 900`` -> a polars expression over ``schema``."""
    import pyparsing as pp

    try:
        tree = _grammar().parse_string(text, parse_all=True)[0]
    except pp.ParseException as e:
        raise QueryError(f"--where {text!r}: cannot read it at column {e.col} "
                         "(COLUMN OP VALUE joined by and/or; OP one of = != < <= > >= ~)") from None
    return _expr(tree, schema)


def _expr(node: Any, schema: pl.Schema) -> pl.Expr:
    if len(node) == 3 and isinstance(node[1], str) and node[1] not in ("and", "or") and isinstance(node[0], str):
        return _cond(node[0], node[1], node[2], schema)
    out = _expr(node[0], schema)
    for i in range(1, len(node), 2):
        rhs = _expr(node[i + 1], schema)
        out = out & rhs if node[i].lower() == "and" else out | rhs
    return out


def _cond(name: str, op: str, value: Any, schema: pl.Schema) -> pl.Expr:
    from .rows import vocabulary

    if name not in schema or name == PART:
        raise QueryError(f"--where: unknown column {name!r} (columns: {', '.join(c for c in schema if c != PART)})")
    col, dtype = pl.col(name), schema[name]
    if value is None:
        if op not in ("=", "!="):
            raise QueryError(f"--where: {name} {op} null: only = null and != null")
        return col.is_null() if op == "=" else col.is_not_null()
    if op == "~":
        if not isinstance(value, str):
            raise QueryError(f"--where: {name} ~ needs a quoted regex")
        try:
            pattern = re.compile(value)
        except re.error as e:
            raise QueryError(f"--where: {name} ~ {value!r}: not a regex ({e})") from None
        values = vocabulary().get(name)
        if values is not None and not any(pattern.search(v) for v in values):
            raise QueryError(f"--where: no {name} matches {value!r}; {_values(values)}")
        return col.cast(pl.String).str.contains(value)
    values = vocabulary().get(name)
    if values is not None and str(value) not in values:   # a closed vocabulary: a value outside it matches nothing
        close = difflib.get_close_matches(str(value), values, n=1, cutoff=0.6)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise QueryError(f"--where: no run has {name} {value!r}{hint}; {_values(values)}")
    if dtype.is_numeric() and (isinstance(value, (str, bool))):
        raise QueryError(f"--where: {name} is a number; compare it with a number, not {value!r}")
    if dtype == pl.Boolean and not isinstance(value, bool):
        raise QueryError(f"--where: {name} is true or false, not {value!r}")
    if isinstance(dtype, pl.Datetime):
        if not isinstance(value, str):
            raise QueryError(f"--where: {name} is a time; compare it with a quoted ISO time")
        try:
            t = datetime.fromisoformat(value)
        except ValueError:
            raise QueryError(f"--where: {name} {op} {value!r}: not an ISO time (2026-08-20T09:30:00Z)") from None
        value = t if t.tzinfo else t.replace(tzinfo=UTC)
    elif dtype == pl.String and not isinstance(value, str):
        value = str(value).lower() if isinstance(value, bool) else str(value)
    lit = pl.lit(value)
    return {"=": col == lit, "!=": col != lit, "<": col < lit, "<=": col <= lit, ">": col > lit,
            ">=": col >= lit}[op]


LISTED = 12   # values a --where error lists; a longer vocabulary (the rule codes) is named by its command


def _values(values: tuple[str, ...]) -> str:
    return ("values: " + ", ".join(values) if len(values) <= LISTED
            else f"{len(values)} values (diag rules lists the codes)")


def sort_key(sort: str, schema: pl.Schema) -> tuple[str, bool]:
    """``--sort COL`` (ascending) or ``-COL`` (descending) -> (column, descending)."""
    name = sort.removeprefix("-")
    if name not in schema or name == PART:
        raise QueryError(f"--sort: unknown column {name!r} (columns: {', '.join(c for c in schema if c != PART)})")
    return name, sort.startswith("-")


def select_runs(index: str | Path, where: str | None = None, sort: str | None = None, *,
                with_part: bool = False) -> pl.DataFrame:
    """The ``runs`` rows of an index (the index directory, or a ROOT holding ``.diag/index``) that match
    ``where``, ordered by ``sort`` (``COL`` or ``-COL``; default: the index order). Without ``with_part``
    the internal ``report_part`` column is left out. Raises :class:`QueryError` (one line)."""
    with snapshot(index) as whole:
        lazy = pl.scan_parquet(inputs.scannable(whole / "runs.parquet"))
        schema = lazy.collect_schema()
        if where:
            lazy = lazy.filter(compile_where(where, schema))
        if sort:
            name, desc = sort_key(sort, schema)
            lazy = lazy.sort(name, descending=desc, nulls_last=True, maintain_order=True)
        if not with_part:
            lazy = lazy.drop(PART)
        return lazy.collect()


def report_parts(index: str | Path, where: str | None = None) -> list[Any]:
    """The report parts (:class:`~diag.report_part.RunPart`) of the analysed runs matching ``where``, in
    the index order: what ``diag report INDEX`` builds its document from, without reading a log."""
    import json

    from diag.report_part import RunPart

    with snapshot(index) as whole:
        runs = select_runs(whole, where, with_part=True).filter(pl.col("status") == "ok")
        out = []
        for rid, part in runs.select("run_id", PART).iter_rows():
            frames = {name: pl.read_parquet(f) if (f := whole / name / f"run_id={rid}" / "part-0.parquet").exists()
                      else None for name in ("series", "requests")}
            out.append(RunPart.from_json(json.loads(part), frames["series"], frames["requests"]))
        return out


__all__ = ["PART", "QueryError", "compile_where", "index_dir", "report_parts", "select_runs", "snapshot", "sort_key"]
