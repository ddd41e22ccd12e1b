"""The high-volume record kinds as columns: the clean stats and KV-transfer lines each engine adapter
declares as a :class:`~diag.parsers.engine.ColumnSpec` (vLLM: its V1 stats line and NIXL's metrics line;
TensorRT-LLM: its iteration line)
are extracted in polars (one ``str.extract_groups`` per spec over a block's candidate lines) into typed
column chunks, never into one Python object per line.

A row is taken only when the line is exactly what :class:`parsers.lineparser.LineParser` would turn
into that one record with no other work: a whole physical line of one well-formed record (real CSI
colours allowed), the next line starting a record of its own (so nothing was torn), no other record
trigger on it. Anything else (glued, torn, mangled, prefixed lines) goes to the ``LineParser``, so the
rows equal the records the line parser gives for the same lines (``tests/test_ingest.py`` checks it).
:func:`stats_records` and :func:`kv_records` materialise rows as those records when asked for.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import polars as pl

from . import engines, sites
from .engine import ColumnSpec
from .lineparser import (
    _CSI,
    ANSI_PATTERN,
    MAX_JOIN,
    TRIGGER_PATTERN,
    _rx_escape,
    trigger_literals,
)
from .records import KVTransfer, StatsSample
from .stats_columns import BASE_FIELDS, RECORD_COLUMNS, TS

_TS = TS
# Every StatsSample field, so a row materialises as the record the line parser gives (the one spec).
STATS_COLUMNS = RECORD_COLUMNS
# The KV record's own fields (``body`` is its ``key=value`` text) plus the run model's typed columns.
KV_VALUE_KEYS = {"transfers": ("Num successful transfers", "num_successful_transfers"),
                 "avg_xfer_ms": ("Avg xfer time (ms)",), "p90_xfer_ms": ("P90 xfer time (ms)",),
                 "mb_per_transfer": ("Avg MB per transfer",), "throughput_mbs": ("Throughput (MB/s)",),
                 "failed": ("Num failed transfers",), "expired": ("Num KV expired reqs",)}
KV_COLUMNS: dict[str, Any] = {
    "line": pl.Int64, "ts": _TS, "md": pl.Utf8, "proc": pl.Utf8, "task": pl.Int64, "connector": pl.Utf8,
    "body": pl.Utf8, **dict.fromkeys(KV_VALUE_KEYS, pl.Float64),
}


_EMPTY_STATS = pl.DataFrame(schema=STATS_COLUMNS)   # built once: a frame of 40 typed columns takes ~0.3 ms
_EMPTY_KV = pl.DataFrame(schema=KV_COLUMNS)


def empty_stats() -> pl.DataFrame:
    return _EMPTY_STATS.clear()


def empty_kv() -> pl.DataFrame:
    return _EMPTY_KV.clear()


def _ascii_digits(pattern: str) -> str:
    """``\\d`` as ASCII digits (Python's and Rust's ``\\d`` are Unicode; polars casts ASCII only)."""
    out, in_class, i = [], False, 0
    while i < len(pattern):
        c = pattern[i]
        if c == "\\" and i + 1 < len(pattern):
            pair = pattern[i:i + 2]
            out.append(("0-9" if in_class else "[0-9]") if pair == r"\d" else pair)
            i += 2
            continue
        if c == "[" and not in_class:
            in_class = True
        elif c == "]" and in_class:
            in_class = False
        out.append(c)
        i += 1
    return "".join(out)


CSI_PATTERN = _CSI.pattern
_NUM = r"-?[0-9]+(?:\.[0-9]+)?"
# A line whose head is one the line parser would accept as-is (no peeling, no continuation before it).
HEAD_START_RX = r"^(?:\x1b\[[0-9;]*m)*(?:\(|(?:DEBUG|INFO|WARNING|ERROR|CRITICAL) [0-9]|[0-9]{4}-[0-9]{2}-[0-9]{2}|\[|\{)"
# Every engine's column specs, by record kind, with their patterns anchored in polars' dialect.
SPECS: dict[str, tuple[tuple[ColumnSpec, tuple[str, ...]], ...]] = {
    kind: tuple((s, tuple("^" + _ascii_digits(p) + "$" for p in s.patterns))
                for a in engines.adapters() for s in a.columns if s.kind == kind)
    for kind in ("stats", "kv_transfer")}
LITERALS = [s.literal for specs in SPECS.values() for s, _ in specs]
# A KV line carrying any other trigger (a glued fault, a traceback's exception) takes the general path; the
# phrases a level-less head is read for are no record's (such a line is no KV line).
_OTHER_TRIGGERS = {s.literal: "|".join(_rx_escape(t) for t in trigger_literals() if t != s.literal
                                       and t not in sites.phrases())
                   for s, _ in SPECS["kv_transfer"]}
# Each spec's derived columns (its ``derived``), built once.
DERIVED: dict[str, dict[str, pl.Expr]] = {s.literal: dict(s.derived()) if s.derived else {}
                                          for specs in SPECS.values() for s, _ in specs}
# The literals of the stats lines, the bulk of a busy log (the prefilter's dense-block test counts them).
STATS_LITS = tuple(s.literal for s, _ in SPECS["stats"])
# What the line parser's ``_unsimple`` sends to the general path, as polars patterns.
_UNSIMPLE_RX = (r"pid=|\^\[|\^M|#033\[|\x{FFFD}|\\x1b|\\033|\\e\[|(?:DEBUG|INFO|WARNING|ERROR|CRITICAL) "
                r"[0-9]{2}-[0-9]{2} |[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}|\[[0-9]{1,3}(?:;[0-9]{1,3})*m")


# Fewer candidate lines than this in a block go to the line parser whole: the extraction's fixed cost (~8 ms of
# polars operations on small frames) is that of ~80 lines on the line parser's fast path.
MIN_CANDIDATES = 64


def extract(cand: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame, pl.Series]:
    """Stats rows and KV rows (``ts`` still null: the caller stamps them in line order) from a
    block's candidate lines (columns ``n`` line number, ``line``, ``nxt`` the next line or null when
    unknown), and the mask of candidates they did not take (those go to the line parser)."""
    line, nxt = pl.col("line"), pl.col("nxt")
    if cand.height < MIN_CANDIDATES or not cand["line"].str.contains_any([*LITERALS, "UCX"]).any():
        # nothing to extract or to leave out, or too little to pay for some forty polars operations (an
        # excerpt, most blocks of a followed log): the line parser's fast path takes them, ~0.1 ms a line
        return empty_stats(), empty_kv(), pl.Series("n", [True] * cand.height, pl.Boolean)
    headed = nxt.is_not_null() & ((nxt == "") | nxt.str.contains(HEAD_START_RX))
    short = line.str.len_chars() < MAX_JOIN
    tries = [f"try{i}" for i in range(len(LITERALS))]
    df = cand.with_columns(*((line.str.contains(lit, literal=True) & short).alias(t)
                             for t, lit in zip(tries, LITERALS, strict=True)))
    df = df.filter(pl.any_horizontal(tries)).filter(headed)
    # CSI colours come off only the lines that have an escape
    esc = df["line"].str.contains("\x1b", literal=True)
    df = pl.concat([df.filter(~esc).with_columns(line.alias("text")),
                    df.filter(esc).with_columns(line.str.replace_all(CSI_PATTERN, "").alias("text"))])
    tried = iter(tries)
    stats_rows = _concat([_stats_rows(s, rx, df.filter(pl.col(next(tried)))) for s, rx in SPECS["stats"]],
                         empty_stats)
    kv_rows = _concat([_kv_rows(s, rx, df.filter(pl.col(next(tried)))) for s, rx in SPECS["kv_transfer"]], empty_kv)
    taken = pl.concat([stats_rows["line"], kv_rows["line"]])
    ucx = cand.filter(line.str.contains("UCX", literal=True))
    inert = ucx.filter(_inert(headed))["n"].cast(pl.Int64)
    slow = ~cand["n"].cast(pl.Int64).is_in(pl.concat([taken, inert]).implode())
    return stats_rows.cast(STATS_COLUMNS), kv_rows.cast(KV_COLUMNS), slow  # type: ignore[arg-type]


def _concat(parts: list[pl.DataFrame], empty: Callable[[], pl.DataFrame]) -> pl.DataFrame:
    return parts[0] if len(parts) == 1 else pl.concat(parts).sort("line") if parts else empty()


def _matches(spec: ColumnSpec, patterns: tuple[str, ...], lines: pl.DataFrame) -> pl.DataFrame:
    """The groups of the lines (``n``, ``text``) one of ``patterns`` matches, each tried on the lines the
    earlier left (a match fills the spec's first group)."""
    text, key = pl.col("text"), next(iter(spec.groups))
    parts: list[pl.DataFrame] = []
    for rx in patterns:
        found = lines.select(pl.col("n"), text.str.extract_groups(rx).alias("g")).unnest("g")
        missed = found[key].is_null()
        parts.append(found.filter(~missed).select(parts[0].columns) if parts else found.filter(~missed))
        lines = lines.filter(missed)
        if not lines.height:
            break
    return parts[0] if len(parts) == 1 else pl.concat(parts)


def _columns(spec: ColumnSpec, found: pl.DataFrame, schema: dict[str, Any]) -> list[pl.Expr]:
    """The spec's columns of ``schema`` from its groups, constants and derived expressions (the rest null),
    ``line`` from ``n``, ``ts`` from a full local stamp (UTC as yet: :class:`parsers.ingest._Stamper` moves it
    by the log's clock) when the spec reads one."""
    groups = {c: g for g, c in spec.groups.items()}
    derived = DERIVED[spec.literal]
    return [(pl.col("n") if c == "line" else pl.lit(spec.constants[c]) if c in spec.constants
             else derived[c] if c in derived else pl.col(groups[c]) if c in groups
             else _local_stamp(spec.stamp) if c == "ts" and spec.stamp else pl.lit(None)).cast(dtype).alias(c)
            for c, dtype in schema.items()]


def _local_stamp(fmt: str) -> pl.Expr:
    return pl.col("stamp").str.strptime(pl.Datetime("us"), fmt, strict=False).dt.replace_time_zone("UTC")


def _stats_rows(spec: ColumnSpec, patterns: tuple[str, ...], s_in: pl.DataFrame) -> pl.DataFrame:
    """The stats rows of the lines that may be one clean stats record (``n``, ``text``)."""
    if not s_in.height:
        return empty_stats()
    s_in = s_in.select(pl.col("n"), pl.col("text").str.strip_chars_end("\r"))
    s = _matches(spec, patterns, s_in).sort("n")
    return s.select(_columns(spec, s, STATS_COLUMNS))


def _kv_rows(spec: ColumnSpec, patterns: tuple[str, ...], k_in: pl.DataFrame) -> pl.DataFrame:
    """The KV rows of the lines that may be one clean KV-transfer record (``n``, ``text``)."""
    if not k_in.height:
        return empty_kv()
    text = pl.col("text")
    k_in = k_in.with_columns(text.str.strip_suffix("\r"))
    k_in = k_in.filter(~text.str.contains(_OTHER_TRIGGERS[spec.literal]))
    k = _matches(spec, patterns, k_in)
    k = k.filter(~pl.col("body").str.contains(_UNSIMPLE_RX)).sort("n")
    values = KV_VALUE_KEYS.items()
    return k.select(*_columns(spec, k, {c: t for c, t in KV_COLUMNS.items() if c not in KV_VALUE_KEYS}),
                    *(pl.coalesce([_kv_value(n) for n in names]).alias(col) for col, names in values))


# UCX's own INFO lines (one per endpoint setup, thousands in a NIXL run) hold the "UCX" trigger of
# ``UCX ERROR`` failures. Such a line gives the line parser nothing to do when it is a whole, plain
# UCX-headed line without "ERROR" or any other trigger, and the next line starts a record of its own
# (nothing to join either way): it stays a candidate in the counts but is not parsed.
_UCX_HEAD = r"^\[[0-9]{10}\.[0-9]{1,9}\]\s+\[[^\]]+\]\s+"
_NOT_PLAIN = (r"ERROR|\x1b|\^\[|#033\[|\x{FFFD}|\r|(?:DEBUG|INFO|WARNING|CRITICAL) [0-9]{2}-[0-9]{2}"
              r"|[0-9]{4}-[0-9]{2}-[0-9]{2}[T ]")
_NOT_UCX_TRIGGERS = "|".join(_rx_escape(t) for t in trigger_literals() if t != "UCX")


def _inert(headed: pl.Expr) -> pl.Expr:
    line = pl.col("line")
    return (headed & line.str.contains(_UCX_HEAD) & line.str.contains("UCX", literal=True)
            & ~line.str.contains(_NOT_PLAIN) & ~line.str.contains(_NOT_UCX_TRIGGERS))


# An SGR/CSI sequence of digits and ';' then one final byte is exactly one match of the ANSI pattern.
_CSI_LITERAL = re.compile(rb"\x1b\[[0-9;]*[@-~]")
_COMMON_CSI = (b"\x1b[0m", b"\x1b[2m", b"\x1b[3m", b"\x1b[1m", b"\x1b[32m", b"\x1b[33m", b"\x1b[31m",
               b"\x1b[34m", b"\x1b[35m", b"\x1b[36m", b"\x1b[0;36m", b"\x1b[0;0m", b"\x1b[1;33m", b"\x1b[K")
_LEARN_BYTES = 1 << 16


def _learnt(block: bytes) -> list[str]:
    """The SGR/CSI sequences of the block's head, and the usual ones."""
    return sorted({x.decode() for x in (*_COMMON_CSI, *_CSI_LITERAL.findall(block[:_LEARN_BYTES]))})


def escaped_hits(df: pl.DataFrame, block: bytes) -> pl.Series:
    """Of ``df`` (``i``, ``line``: lines with escape sequences and no trigger in their raw text), the ``i`` of
    those whose text without the sequences holds one. The CSI literals of the block's head come off in one
    Aho-Corasick pass: when every ``ESC`` of a line starts one of them, that is exactly the ANSI pattern's removal;
    a line with any other sequence left has the ANSI pattern itself removed."""
    col, plain = pl.col("line"), pl.col("plain")
    lits = _learnt(block)
    df = df.with_columns(col.str.replace_many(lits, [""] * len(lits)).alias("plain"))
    left = plain.str.contains("\x1b", literal=True)
    return pl.concat([df.filter(~left & plain.str.contains(TRIGGER_PATTERN))["i"],
                      df.filter(left).filter(col.str.replace_all(ANSI_PATTERN, "").str.contains(TRIGGER_PATTERN))["i"]])


def escaped_candidates(df: pl.DataFrame, block: bytes) -> pl.DataFrame:
    """``df`` (``line``, ``cand``) of ``block`` with the lines whose triggers escape sequences split marked as
    candidates too (what :func:`parsers.lineparser.is_candidate` says of one line)."""
    split = df.with_row_index("i").filter(~pl.col("cand") & pl.col("line").str.contains("\x1b", literal=True))
    if split.height:
        hit = escaped_hits(split.select("i", "line"), block)
        if hit.len():
            return df.with_columns(df["cand"].scatter(hit, True))
    return df


def _kv_value(key: str) -> pl.Expr:
    """The value of the first ``key=`` pair of a fast KV body (keys hold no ``,`` or ``=``)."""
    return pl.col("body").str.extract(rf"(?:^|, ){re.escape(key)}=({_NUM})(?:,|$)").cast(pl.Float64)


def stats_records(df: pl.DataFrame) -> list[StatsSample]:
    """The rows as the records the line parser gives for the same lines."""
    fields = [c for c in STATS_COLUMNS if c not in BASE_FIELDS]
    out = []
    for row in df.select(*BASE_FIELDS, *fields).iter_rows():
        line, ts, md, proc, task, *rest = row
        out.append(StatsSample(line, *rest, ts=ts, md=md, proc=proc, task=task))
    return out


def kv_records(df: pl.DataFrame) -> list[KVTransfer]:
    """The rows as the records the line parser gives (``values`` parsed from ``body`` the same way)."""
    out = []
    for line, ts, md, proc, task, connector, body in df.select(
            "line", "ts", "md", "proc", "task", "connector", "body").iter_rows():
        values = tuple((key.strip(), float(val)) for key, _, val in (p.rpartition("=") for p in body.split(", ")))
        out.append(KVTransfer(line, connector=connector, values=values, ts=ts, md=md, proc=proc, task=task))
    return out


__all__ = ["KV_COLUMNS", "STATS_COLUMNS", "empty_kv", "empty_stats", "escaped_candidates", "escaped_hits", "extract", "kv_records", "stats_records"]
