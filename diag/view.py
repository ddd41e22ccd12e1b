"""Render a run for people (rich text) and for programs (one JSON document, or JSON lines)."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from rich.console import Console, Group
from rich.table import Table
from rich.text import Text

from diag.rules.finding import Finding
from diag.rules.runmodel import Run

from . import summary as S

SEV_STYLE = {"error": "bold red", "warning": "yellow", "info": "cyan"}
HEALTH_STYLE = {"OK": "green", "WARN": "yellow", "CRIT": "bold red", "DOWN": "bold white on red",
                "STALE": "magenta", "NO STATS": "dim"}


def _num(x: float | int | None, nd: int = 0) -> str:
    if x is None:
        return "-"
    return f"{x:,.{nd}f}"


def _ts(t: datetime | None) -> str:
    return t.strftime("%m-%d %H:%M:%S") if t else "-"


def header_lines(run: Run) -> list[tuple[str, str]]:
    job = run.job
    model = getattr(job, "model_path", None) or getattr(run.recipe, "model_path", None)
    for ep in run.endpoints.values():
        model = model or (ep.facts.get("engine_config") or {}).get("model") or ep.facts.get("model")
    rows = [("job", f"{getattr(job, 'job_id', None) or '-'} {getattr(job, 'job_name', None) or ''}".strip()),
            ("model", model or "-"), ("topology", S.topology(run)), ("vLLM build", run.build or "unknown"),
            ("stage", S.stage(run))]
    if run.start and run.end:
        rows.append(("span", f"{run.start.isoformat(timespec='seconds')} .. {run.end.isoformat(timespec='seconds')}"
                             f" ({(run.end - run.start).total_seconds() / 60:.1f} min)"))
    tpg = S.tokens_per_gpu(run)
    if tpg:
        parts = [f"{_num(tpg['total_token_throughput'])} tok/s total at concurrency {tpg['concurrency']}"]
        if "per_working_gpu" in tpg:
            parts.append(f"{_num(tpg['per_working_gpu'])} tok/s per working GPU ({tpg['working_gpus']})")
        if "per_allocated_gpu" in tpg and tpg.get("allocated_gpus") != tpg.get("working_gpus"):
            parts.append(f"{_num(tpg['per_allocated_gpu'])} per allocated GPU ({tpg['allocated_gpus']})")
        rows.append(("throughput", "; ".join(parts)))
    return rows


def endpoint_table(summaries: list[S.EndpointSummary]) -> Table:
    t = Table(title="endpoints", title_justify="left", expand=False, pad_edge=False)
    for col, just in (("endpoint", "left"), ("nodes", "left"), ("eng", "right"), ("samples", "right"),
                      ("prompt tok/s mean/last", "right"), ("gen tok/s mean/last", "right"), ("run", "right"),
                      ("wait", "right"), ("KV % last/max", "right"), ("preempt", "right"),
                      ("last seen", "left"), ("health", "left")):
        t.add_column(col, justify=just, no_wrap=col in ("endpoint", "health"))
    for s in summaries:
        nodes = (s.nodes[0] + (f"+{len(s.nodes) - 1}" if len(s.nodes) > 1 else "")) if s.nodes else "-"
        t.add_row(s.id, nodes, str(s.engines), str(s.samples),
                  f"{_num(s.prompt_tps_mean)}/{_num(s.prompt_tps_last)}", f"{_num(s.gen_tps_mean)}/{_num(s.gen_tps_last)}",
                  _num(s.running_last), _num(s.waiting_last), f"{_num(s.kv_last, 1)}/{_num(s.kv_max, 1)}",
                  str(s.preemptions), _ts(s.last_ts), Text(s.health, style=HEALTH_STYLE.get(s.health, "")))
    return t


def finding_text(f: Finding) -> Text:
    t = Text()
    t.append(f"{f.code} ", style="bold")
    t.append(f"{f.severity:<7} ", style=SEV_STYLE.get(f.severity, ""))
    t.append(f"{f.name}", style="bold")
    if f.endpoint:
        t.append(f" [{f.endpoint}]")
    t.append(f": {f.message}")
    if f.first_ts:
        t.append(f"\n    window {_ts(f.first_ts)} .. {_ts(f.last_ts)}{' (open)' if f.open else ''}", style="dim")
    if f.location:
        t.append(f"\n    at {f.location}", style="dim")
    return t


def render_text(run: Run, findings: list[Finding], console: Console, *, now: datetime | None = None) -> None:
    summaries = [S.endpoint_summary(ep, findings, now) for ep in run.endpoints.values()]
    head = Table.grid(padding=(0, 2))
    head.add_column(style="bold")
    head.add_column()
    for k, v in header_lines(run):
        head.add_row(k, v)
    console.print(head)
    console.print()
    if summaries:
        console.print(endpoint_table(summaries))
    else:
        console.print("no endpoints found in the logs read", style="yellow")
    rm = S.rate_match(run)
    if rm:
        verdict = "prefill supplies less than decode consumes" if (rm["ratio"] or 0) < 0.9 else (
            "decode consumes less than prefill supplies" if (rm["ratio"] or 0) > 1.1 else "balanced")
        console.print(f"rate match: prefill {rm['prefill_req_s']:.2f} req/s (sum {rm['prefill_prompt_tps']:,.0f} tok/s / "
                      f"ISL {rm['isl']}) vs decode {rm['decode_req_s']:.2f} req/s (sum {rm['decode_gen_tps']:,.0f} tok/s / "
                      f"OSL {rm['osl']}): {verdict}")
    console.print()
    if findings:
        console.print(Text(f"findings ({len(findings)})", style="bold"))
        console.print(Group(*(finding_text(f) for f in findings)))
    else:
        console.print(Text("no findings", style="green"))
    if run.skipped:
        console.print()
        for path, reason in run.skipped:
            console.print(f"skipped {path}: {reason}", style="dim")


def source_dicts(run: Run) -> list[dict[str, Any]]:
    out = [{"path": s.path, "kind": s.kind, "role": getattr(s.info, "role", None),
            "lines": s.counts.lines, "records": len(s.records), "noise_lines": s.counts.noise_lines,
            "ansi_lines": s.counts.ansi_lines, "bytes": s.size, "skipped": None, "error": s.error}
           for s in run.sources]
    out += [{"path": p, "kind": "unknown", "role": None, "lines": 0, "records": 0, "noise_lines": 0,
             "ansi_lines": 0, "bytes": None, "skipped": reason, "error": None} for p, reason in run.skipped]
    return out


def _bench(b: Any) -> dict[str, Any]:
    from dataclasses import asdict, is_dataclass

    d = asdict(b) if is_dataclass(b) else dict(b)
    return {k: v for k, v in d.items() if v is not None and not isinstance(v, (list, tuple))}


def run_dict(run: Run, findings: list[Finding], *, now: datetime | None = None) -> dict[str, Any]:
    summaries = [S.endpoint_summary(ep, findings, now) for ep in run.endpoints.values()]
    counts = {sev: sum(f.severity == sev for f in findings) for sev in ("error", "warning", "info")}
    return {
        "sources": source_dicts(run),
        "endpoints": [s.to_dict() for s in summaries],
        "findings": [f.to_dict() for f in findings],
        "benchmark": {"results": [_bench(b) for b in run.benchmark],
                      "accuracy": [_bench(a) for a in run.accuracy],
                      "tokens_per_gpu": S.tokens_per_gpu(run)},
        "summary": {
            "header": dict(header_lines(run)), "topology": S.topology(run), "stage": S.stage(run),
            "build": run.build, "start": run.start.isoformat() if run.start else None,
            "end": run.end.isoformat() if run.end else None, "rate_match": S.rate_match(run),
            "findings": counts, "errors": run.errors,
        },
    }


def dumps(obj: Any) -> str:
    return json.dumps(obj, default=str, ensure_ascii=False)
