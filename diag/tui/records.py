"""One-line descriptions of parsed records for the TUI's record pane (plain text; no Textual)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from diag.parsers.records import (
    Fault,
    KVExpiry,
    KVLoadFailure,
    KVTransfer,
    Lifecycle,
    NixlFailure,
    Preemption,
    Record,
    SpecDecode,
    StageMark,
    StartupFact,
    StatsSample,
)
from diag.rules.present import number

from ..report import STAGE_SHORT

MAX_TEXT = 240


@dataclass(frozen=True)
class RecordLine:
    ts: datetime | None
    endpoint: str
    file: str
    line: int
    kind: str
    text: str
    tone: str  # fault | warn | info | stats


def _short(v: Any, n: int = 120) -> str:
    s = str(v).replace("\n", " ")
    return s if len(s) <= n else s[: n - 1] + "…"


def describe(r: Record) -> tuple[str, str]:
    """(text, tone) of a record; tone is fault, warn, info or stats."""
    if isinstance(r, StatsSample):
        eng = f"engine {r.engine}: " if r.engine is not None else ""
        return (f"{eng}prompt {number(r.prompt_tps, 1)} gen {number(r.gen_tps, 1)} tok/s, run {number(r.running)} "
                f"wait {number(r.waiting)}, KV {number(r.kv_usage, 1)} %", "stats")
    if isinstance(r, Fault):
        exc = f" ({_short(r.exception, 100)})" if r.exception else ""
        return f"{r.cause}: {_short(r.message)}{exc}", "fault"
    if isinstance(r, NixlFailure):
        req = f" req {r.request_id}" if r.request_id else ""
        return f"NIXL {r.ftype}{req}{': ' + _short(r.detail) if r.detail else ''}", "warn"
    if isinstance(r, KVExpiry):
        req = f" req {r.request_id}" if r.request_id else ""
        return f"KV lease {r.event}{req}", "warn"
    if isinstance(r, KVLoadFailure):
        return (f"KV load failed: {number(r.n_requests)} requests, {r.tokens:,} tokens "
                f"({'recovered' if r.recovered else 'not recovered'})", "warn")
    if isinstance(r, Preemption):
        return f"preemption ({r.mode}){'' if r.cumulative is None else f', {number(r.cumulative)} so far'}", "warn"
    if isinstance(r, StageMark):
        fields = ", ".join(f"{k}={_short(v, 40)}" for k, v in r.fields[:4])
        return f"stage {STAGE_SHORT.get(r.stage, r.stage)}: {r.mark}{', ' + fields if fields else ''}", "info"
    if isinstance(r, StartupFact):
        return f"{r.key} = {_short(r.value)}", "info"
    if isinstance(r, Lifecycle):
        fields = ", ".join(f"{k}={_short(v, 40)}" for k, v in r.fields[:4])
        return f"{r.event}{' ' + fields if fields else ''}", "info"
    if isinstance(r, KVTransfer):
        vals = ", ".join(f"{k} {v:,g}" for k, v in r.values[:4])
        return f"KV transfer: {vals}", "stats"
    if isinstance(r, SpecDecode):
        return f"spec decode: acceptance {number(r.acceptance_rate, 2)}, mean len {number(r.mean_acceptance_len, 2)}", "stats"
    return r.kind, "info"


def record_line(endpoint: str, file: str, r: Record) -> RecordLine:
    text, tone = describe(r)
    return RecordLine(r.ts, endpoint, file, r.line, r.kind, text[:MAX_TEXT], tone)


def stats_line(endpoint: str, row: dict[str, Any]) -> RecordLine:
    """A stats line from a row of the endpoint's stats frame."""
    text = (f"engine {row['engine']}: prompt {number(row['prompt_tps'], 1)} gen {number(row['gen_tps'], 1)} tok/s, "
            f"run {number(row['running'])} wait {number(row['waiting'])}, KV {number(row['kv_usage'], 1)} %")
    return RecordLine(row["ts"], endpoint, row["file"] or "", row["line"] or 0, "stats", text, "stats")
