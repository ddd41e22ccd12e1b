"""The high-volume record kinds as columns: clean vLLM V1 stats lines and NIXL ``KV Transfer metrics``
lines are extracted in polars (one ``str.extract_groups`` per kind over a block's candidate lines)
into typed column chunks, never into one Python object per line.

A row is taken only when the line is exactly what :class:`parsers.lineparser.LineParser` would turn
into that one record with no other work: a whole physical line of one well-formed record (real CSI
colours allowed), the next line starting a record of its own (so nothing was torn), no other record
trigger on it. Anything else (glued, torn, mangled, prefixed lines) goes to the ``LineParser``, so the
rows equal the records the line parser gives for the same lines (``tests/test_ingest.py`` checks it).
:func:`stats_records` and :func:`kv_records` materialise rows as those records when asked for.
"""

from __future__ import annotations

import re
from typing import Any

import polars as pl

from . import kvtransfer
from .lineparser import (
    _CSI,
    _FAST_STATS,
    _FAST_STATS_ORDERED,
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


def empty_stats() -> pl.DataFrame:
    return pl.DataFrame(schema=STATS_COLUMNS)


def empty_kv() -> pl.DataFrame:
    return pl.DataFrame(schema=KV_COLUMNS)


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
STATS_RX = "^" + _ascii_digits(_FAST_STATS.pattern) + "$"
STATS_ORDERED_RX = "^" + _ascii_digits(_FAST_STATS_ORDERED) + "$"   # tried first: see stats.V1_ORDERED
_NUM = r"-?[0-9]+(?:\.[0-9]+)?"
_KEY = r"[A-Za-z](?:[A-Za-z0-9 ()/_%.-]*[A-Za-z0-9()/_%.-])?"
KV_RX = (r"^(?:\((?P<proc>[^()]+?) pid=(?P<pid>[0-9]+)\) )?(?:DEBUG|INFO|WARNING|ERROR|CRITICAL) "
         r"(?P<md>[0-9]{2}-[0-9]{2} [0-9]{2}:[0-9]{2}:[0-9]{2}) \[[^\]\s]+:[0-9]+\] KV Transfer metrics: "
         rf"(?:KVConnectorType: (?P<ctype>[A-Za-z0-9_]+), )?(?P<body>{_KEY}={_NUM}(?:, {_KEY}={_NUM})*)$")
# A line whose head is one the line parser would accept as-is (no peeling, no continuation before it).
HEAD_START_RX = r"^(?:\x1b\[[0-9;]*m)*(?:\(|(?:DEBUG|INFO|WARNING|ERROR|CRITICAL) [0-9]|[0-9]{4}-[0-9]{2}-[0-9]{2}|\[|\{)"
STATS_LIT = "Avg prompt throughput"
KV_LIT = kvtransfer.KV_METRICS.triggers[0]
# A KV line carrying any other trigger (a glued fault, a traceback's exception) takes the general path.
_OTHER_TRIGGERS = "|".join(_rx_escape(t) for t in trigger_literals() if t != KV_LIT)
# What the line parser's ``_unsimple`` sends to the general path, as polars patterns.
_UNSIMPLE_RX = (r"pid=|\^\[|\^M|#033\[|\x{FFFD}|\\x1b|\\033|\\e\[|(?:DEBUG|INFO|WARNING|ERROR|CRITICAL) "
                r"[0-9]{2}-[0-9]{2} |[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}|\[[0-9]{1,3}(?:;[0-9]{1,3})*m")
_INT_GROUPS = {"engine": "engine", "n_agg": "n_aggregated", "running": "running", "waiting": "waiting",
               "deferred": "deferred", "preempt": "preemptions", "corrupted": "corrupted",
               "kvf_wait": "kv_fetch_waiting", "kvf_run": "kv_fetch_running", "kvf_done": "kv_fetch_done"}
_FLOAT_GROUPS = {"prompt": "prompt_tps", "gen": "gen_tps", "kv": "kv_usage", "prefix": "prefix_hit",
                 "ext": "ext_hit", "mm": "mm_hit"}


def extract(cand: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame, pl.Series]:
    """Stats rows and KV rows (``ts`` still null: the caller stamps them in line order) from a
    block's candidate lines (columns ``n`` line number, ``line``, ``nxt`` the next line or null when
    unknown), and the mask of candidates they did not take (those go to the line parser)."""
    line, nxt = pl.col("line"), pl.col("nxt")
    if not cand.height or not cand["line"].str.contains_any([STATS_LIT, KV_LIT, "UCX"]).any():
        # nothing to extract or to leave out (most small blocks of a followed log): one pass, not forty
        return empty_stats(), empty_kv(), pl.Series("n", [True] * cand.height, pl.Boolean)
    headed = nxt.is_not_null() & ((nxt == "") | nxt.str.contains(HEAD_START_RX))
    short = line.str.len_chars() < MAX_JOIN
    df = cand.with_columns(
        (line.str.contains(STATS_LIT, literal=True) & short).alias("try_s"),
        (line.str.contains(KV_LIT, literal=True) & short).alias("try_k"),
    ).filter(pl.col("try_s") | pl.col("try_k")).filter(headed)
    # CSI colours come off only the lines that have an escape
    esc = df["line"].str.contains("\x1b", literal=True)
    df = pl.concat([df.filter(~esc).with_columns(line.alias("text")),
                    df.filter(esc).with_columns(line.str.replace_all(CSI_PATTERN, "").alias("text"))])
    stats_rows, kv_rows = _stats_rows(df.filter(pl.col("try_s"))), _kv_rows(df.filter(pl.col("try_k")))
    taken = pl.concat([stats_rows["line"], kv_rows["line"]])
    ucx = cand.filter(line.str.contains("UCX", literal=True))
    inert = ucx.filter(_inert(headed))["n"].cast(pl.Int64)
    slow = ~cand["n"].cast(pl.Int64).is_in(pl.concat([taken, inert]).implode())
    return stats_rows.cast(STATS_COLUMNS), kv_rows.cast(KV_COLUMNS), slow  # type: ignore[arg-type]


def _stats_rows(s_in: pl.DataFrame) -> pl.DataFrame:
    """The stats rows of the lines that may be one clean stats record (``n``, ``text``)."""
    if not s_in.height:
        return empty_stats()
    text = pl.col("text")
    s_in = s_in.select(pl.col("n"), text.str.strip_chars_end("\r"))
    s = s_in.select(pl.col("n"), text.str.extract_groups(STATS_ORDERED_RX).alias("g")).unnest("g")
    rest = s_in.filter(pl.Series(s["md"].is_null()))
    if rest.height:   # segments out of the usual order, or unknown ones: the any-order pattern
        s = pl.concat([s.filter(pl.col("md").is_not_null()),
                       rest.select(pl.col("n"), text.str.extract_groups(STATS_RX).alias("g")).unnest("g")
                       .select(s.columns)])
    s = s.filter(pl.col("md").is_not_null()).sort("n")
    groups = {c: g for g, c in (*_INT_GROUPS.items(), *_FLOAT_GROUPS.items())}
    own = {"line": pl.col("n"), "md": pl.col("md"), "proc": pl.col("proc"), "variant": pl.lit("v1")}
    return s.select(*((own[c] if c in own else pl.col(groups[c]) if c in groups else pl.lit(None))
                      .cast(dtype).alias(c) for c, dtype in STATS_COLUMNS.items()))


def _kv_rows(k_in: pl.DataFrame) -> pl.DataFrame:
    """The KV rows of the lines that may be one clean ``KV Transfer metrics`` record (``n``, ``text``)."""
    if not k_in.height:
        return empty_kv()
    text = pl.col("text")
    k_in = k_in.with_columns(text.str.strip_suffix("\r"))
    k_in = k_in.filter(~text.str.contains(_OTHER_TRIGGERS))
    k = k_in.select(pl.col("n"), text.str.extract_groups(KV_RX).alias("g")).unnest("g")
    k = k.filter(pl.col("md").is_not_null() & ~pl.col("body").str.contains(_UNSIMPLE_RX)).sort("n")
    return k.select(
        pl.col("n").cast(pl.Int64).alias("line"), pl.lit(None, _TS).alias("ts"), pl.col("md"), pl.col("proc"),
        pl.lit(None, pl.Int64).alias("task"), pl.col("ctype").alias("connector"), pl.col("body"),
        *(pl.coalesce([_kv_value(n) for n in names]).alias(col) for col, names in KV_VALUE_KEYS.items()),
    )


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


def escaped_candidates(df: pl.DataFrame) -> pl.DataFrame:
    """``df`` (``line``, ``cand``) with the lines whose triggers escape sequences split marked as
    candidates too (what :func:`parsers.lineparser.is_candidate` says of one line)."""
    line = pl.col("line")
    split = df.with_row_index("i").filter(~pl.col("cand") & line.str.contains("\x1b", literal=True))
    if split.height:
        hit = split.filter(line.str.replace_all(ANSI_PATTERN, "").str.contains(TRIGGER_PATTERN))["i"]
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


__all__ = ["KV_COLUMNS", "STATS_COLUMNS", "empty_kv", "empty_stats", "escaped_candidates", "extract", "kv_records", "stats_records"]
