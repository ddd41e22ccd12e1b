"""Emitters of a :class:`diag.report.Report`: rich text for people, one JSON document or JSON lines
for programs. They render; they compute nothing (``diag.pipeline.analyze`` did).

Every JSON document and the first JSONL line carry the same envelope: ``tool``, ``version`` and
``schema`` (the name of the JSON Schema in ``diag/schemas/`` the output validates against).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import datetime
from typing import Any

from rich.console import Console, Group
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from diag import __version__
from diag.parsers.records import Record
from diag.rules.finding import Finding
from diag.rules.present import HEALTH_STYLE, SEVERITY_STYLE, VERDICT_STYLE, clock, duration, number, seconds
from diag.rules.runmodel import Run

from . import report as R

TAIL_SCHEMA = "diag-tail-1"
JSONL_SCHEMA = "diag-tail-jsonl-1"
CHECK_SCHEMA = "diag-check-1"



def envelope(schema: str) -> dict[str, str]:
    return {"tool": "diag", "version": __version__, "schema": schema}


def endpoint_table(summaries: tuple[R.EndpointSummary, ...], limiting: str | None = None) -> Table:
    """One row per endpoint; figures over the run verdict's steady window (named in the title); the rows
    of the limiting side (``prefill``/``decode``) in bold."""
    window = next((s.window for s in summaries if s.window), None)
    title = "endpoints" + (f" (figures over {window['label']} {clock(datetime.fromisoformat(window['start']))} .. "
                           f"{clock(datetime.fromisoformat(window['end']))})" if window else "")
    if any(s.window and window and s.window != window for s in summaries):
        title += "; * over the endpoint's own active window"
    t = Table(title=title, title_justify="left", expand=False, pad_edge=False)
    latency = any(s.latency for s in summaries)  # only runs with Prometheus latency histograms
    for col, just in (("endpoint", "left"), ("nodes", "left"), ("eng", "right"), ("samples", "right"),
                      ("prompt tok/s", "right"), ("gen tok/s", "right"), ("run", "right"),
                      ("wait mean/peak", "right"), ("KV % mean/peak", "right"), ("preempt", "right"),
                      *((("TTFT/ITL p90 s", "right"),) if latency else ()),
                      ("last seen", "left"), ("stage", "left"), ("health", "left")):
        t.add_column(col, justify=just, no_wrap=col in ("endpoint", "health"))
    for s in summaries:
        nodes = (s.nodes[0] + (f"+{len(s.nodes) - 1}" if len(s.nodes) > 1 else "")) if s.nodes else "-"
        p90 = [seconds(s.latency.get(k, {}).get("p90")) for k in ("ttft", "itl")]
        own = "*" if s.window and window and s.window != window else ""
        t.add_row(s.id + own, nodes, str(s.engines), str(s.samples), number(s.prompt_tps_mean), number(s.gen_tps_mean),
                  number(s.running_mean), f"{number(s.waiting_mean)}/{number(s.waiting_peak)}",
                  f"{number(s.kv_mean, 1)}/{number(s.kv_peak, 1)}",
                  str(s.preemptions), *(("/".join(p90),) if latency else ()), clock(s.last_ts), R.stage_text(s.startup),
                  Text(s.health, style=HEALTH_STYLE.get(s.health, "")),
                  style="bold" if limiting is not None and s.role == limiting else None)
    return t




def point_table(report: R.Report) -> Table | None:
    """One row per benchmark point: its verdict and the steady-window figures it rests on."""
    if report.verdicts is None or not report.verdicts.points:
        return None
    bench = {b.concurrency: b for b in report.run.benchmark if b.concurrency}
    t = Table(title="benchmark points (verdict over each point's steady window)", title_justify="left",
              expand=False, pad_edge=False)
    for col in ("C", "verdict", "conf", "tok/s", "TTFT p50 s", "TPOT p50 ms", "prefill wait/eng", "decode KV %",
                "decode run/eng"):
        t.add_column(col, justify="left" if col in ("verdict", "conf") else "right", no_wrap=col == "verdict")
    for v in report.verdicts.points:
        b = bench.get(v.concurrency)
        pre, dec = v.figures.get("prefill") or {}, v.figures.get("decode") or {}
        t.add_row(str(v.concurrency), Text(v.label, style=VERDICT_STYLE.get(v.cls, "")), v.confidence,
                  number(b.total_token_throughput if b else None),
                  seconds(b.median_ttft_ms / 1000 if b and b.median_ttft_ms is not None else None),
                  number(b.median_tpot_ms if b else None, 1),
                  number((pre.get("waiting") or {}).get("mean"), 1), number((dec.get("kv") or {}).get("mean"), 1),
                  number((dec.get("running") or {}).get("mean"), 1))
    return t


def verdict_text(report: R.Report) -> Text | None:
    """The run's verdict: class and confidence, why, the next experiment, what was ruled out."""
    v = report.verdict
    if v is None:
        return None
    t = Text()
    t.append("verdict     ", style="bold")
    t.append(v.label, style=VERDICT_STYLE.get(v.cls, ""))
    t.append(f" ({v.confidence} confidence)" + (f" at concurrency {v.concurrency}" if v.concurrency else ""))
    t.append(f": {v.why}")
    if v.experiments:
        e = v.experiments[0]
        t.append("\nnext        ", style="bold")
        t.append(f"{e['action']}: {e['expect']}")
    if v.ruled_out:
        t.append("\nruled out   ", style="bold")
        t.append("; ".join(r["why"] for r in v.ruled_out), style="dim")
    return t




def startup_table(summaries: tuple[R.EndpointSummary, ...]) -> Table | None:
    """The time each startup stage took per endpoint (open stages as of the report's time, marked ``+``)."""
    seen = [st["stage"] for s in summaries for st in s.startup.get("stages", [])]
    if not seen:
        return None
    cols = [name for name in R.STAGE_SHORT if name in seen]
    t = Table(title="startup (time each stage took)", title_justify="left", expand=False, pad_edge=False)
    t.add_column("endpoint", no_wrap=True)
    for name in cols:
        t.add_column(R.STAGE_SHORT[name], justify="right")
    t.add_column("ready after", justify="right")
    for s in summaries:
        by = {st["stage"]: st for st in s.startup.get("stages", [])}
        cells = []
        for name in cols:
            st = by.get(name)
            cells.append("-" if st is None else duration(st["duration_s"]) + ("+" if st["open"] else ""))
        t.add_row(s.id, *cells, duration(s.startup.get("ready_after_s")))
    return t


def finding_text(f: Finding) -> Text:
    t = Text()
    t.append(f"{f.code} ", style="bold")
    t.append(f"{f.severity:<7} ", style=SEVERITY_STYLE.get(f.severity, ""))
    t.append(f"{f.name}", style="bold")
    if f.endpoint:
        t.append(f" [{f.endpoint}]")
    t.append(f": {f.message}")
    if f.first_ts:
        t.append(f"\n    window {clock(f.first_ts)} .. {clock(f.last_ts)}{' (open)' if f.open else ''}", style="dim")
    if f.location:
        t.append(f"\n    at {f.location}", style="dim")
    for line in R.link_lines(f):
        t.append(f"\n    {line}", style="bold magenta")
    return t


def render_text(report: R.Report, console: Console) -> None:
    """Header, verdict, endpoint table, balance, benchmark points, findings, skipped files."""
    run = report.run
    head = Table.grid(padding=(0, 2))
    head.add_column(style="bold")
    head.add_column()
    for k, v in report.header:
        head.add_row(k, v)
    console.print(head)
    console.print()
    verdict = verdict_text(report)
    if verdict is not None:
        console.print(verdict)
        console.print()
    if report.endpoints:
        limiting = report.balance.get("limiting") if report.balance else None
        console.print(endpoint_table(report.endpoints, limiting))
        startup = startup_table(report.endpoints)
        if startup is not None:
            console.print(startup)
    else:
        console.print("no endpoints found in the logs read", style="yellow")
    if report.balance:
        console.print(f"balance: {R.balance_text(report.balance)}")
    points = point_table(report)
    if points is not None:
        console.print(points)
    console.print()
    if report.findings:
        console.print(Text(f"findings ({len(report.findings)})", style="bold"))
        console.print(Group(*(finding_text(f) for f in report.findings)))
    else:
        console.print(Text("no findings", style="green"))
    if run.skipped:
        console.print()
        shown = run.skipped[:SKIPPED_SHOWN]
        for path, reason in shown:
            console.print(Text(f"skipped {path}: {reason}", style="dim"))
        rest: dict[str, int] = {}
        for _, reason in run.skipped[SKIPPED_SHOWN:]:
            rest[reason] = rest.get(reason, 0) + 1
        for reason, n in rest.items():  # 10,000 empty files are one line, not 10,000 (JSON lists them all)
            console.print(Text(f"skipped {n:,} more: {reason}", style="dim"))


SKIPPED_SHOWN = 20


def finding_event(f: Finding, event: str) -> str:
    """A follow-mode line for a finding that opened (+) or closed (-)."""
    where = escape(f"[{f.endpoint or 'run'}]")
    if event == "open":
        return f"[bold]+ {f.code}[/bold] {f.severity} {f.name} {where}: {escape(f.message)}"
    return f"[dim]- {f.code} closed {where}[/dim]"


def heartbeat_line(s: R.EndpointSummary) -> str:
    kv = "-" if s.kv_mean is None else f"{s.kv_mean:.1f}"
    return (f"{s.id:<12} {s.health:<8} {s.phase:<8} samples={s.samples} run={number(s.running_mean)} "
            f"wait={number(s.waiting_mean)} kv={kv} gen={number(s.gen_tps_mean)}")


def source_dicts(run: Run) -> list[dict[str, Any]]:
    out = [{"path": s.path, "kind": s.kind, "role": getattr(s.info, "role", None),
            "lines": s.counts.lines, "records": s.n_records, "noise_lines": c.noise_lines,
            "ansi_lines": c.ansi_lines, "noise_exact": s.counts.exact, "bytes": s.size, "skipped": None,
            "error": s.error} for s in run.sources for c in [s.counts.estimate()]]
    out += [{"path": p, "kind": "unknown", "role": None, "lines": 0, "records": 0, "noise_lines": 0,
             "ansi_lines": 0, "noise_exact": True, "bytes": None, "skipped": reason, "error": None}
            for p, reason in run.skipped]
    return out


def _bench(b: Any) -> dict[str, Any]:
    from dataclasses import asdict, is_dataclass

    d = asdict(b) if is_dataclass(b) else dict(b)
    return {k: v.isoformat() if isinstance(v, datetime) else v for k, v in d.items()
            if v is not None and not isinstance(v, (list, tuple))}


def report_dict(report: R.Report) -> dict[str, Any]:
    """The ``diag tail --format json`` document of one run (schema ``diag-tail-1``)."""
    run = report.run
    supports = verdict_links(report)
    return {
        **envelope(TAIL_SCHEMA),
        "root": str(run.root) if run.root else None,
        "judged_at": report.now.isoformat() if report.now else None,
        "sources": source_dicts(run),
        "endpoints": [s.to_dict() for s in report.endpoints],
        "findings": [{**f.to_dict(), "verdicts": supports.get((f.code, f.endpoint), [])} for f in report.findings],
        "verdict": report.verdict.to_dict() if report.verdict is not None else None,
        "benchmark": {"results": [_bench(b) for b in run.benchmark],
                      "accuracy": [_bench(a) for a in run.accuracy],
                      "tokens_per_gpu": report.tokens_per_gpu,
                      "points": [v.to_dict() for v in report.verdicts.points] if report.verdicts else []},
        "summary": {
            "header": dict(report.header), "topology": report.topology, "stage": report.stage,
            "build": run.build, "start": run.start.isoformat() if run.start else None,
            "end": run.clock.isoformat() if run.clock else None, "phase": report.phase, "balance": report.balance,
            "findings": report.counts, "errors": list(run.errors),
        },
    }


def verdict_links(report: R.Report) -> dict[tuple[str, str | None], list[str]]:
    """(code, endpoint) of a finding -> the verdicts resting on it (``run``, ``C=2048``)."""
    out: dict[tuple[str, str | None], list[str]] = {}
    if report.verdicts is None:
        return out
    for scope, v in [("run", report.verdicts.run)] + [(f"C={p.concurrency}", p) for p in report.verdicts.points]:
        for key in v.findings:
            out.setdefault(key, []).append(scope)
    return out


def document(reports: list[R.Report]) -> dict[str, Any]:
    """One run's document, or ``{tool, version, schema, runs: [...]}`` for several."""
    if len(reports) == 1:
        return report_dict(reports[0])
    return {**envelope(TAIL_SCHEMA), "runs": [report_dict(r) for r in reports]}


def record_dict(path: str, r: Record) -> dict[str, Any]:
    """A JSONL ``record`` line."""
    from dataclasses import asdict

    d = {k: v for k, v in asdict(r).items() if v is not None}
    return {"type": "record", "kind": r.kind, "path": path, **d}


def jsonl_lines(report: R.Report, *, records: bool = True) -> Iterator[dict[str, Any]]:
    """The batch JSONL stream of one run: records, endpoints, findings, then the summary."""
    if records:
        for src in report.run.sources:
            for r in src.all_records():  # extracted stats/KV rows materialise here, one source at a time
                yield record_dict(src.path, r)
    for ep in report.endpoints:
        yield {"type": "endpoint", **ep.to_dict()}
    for f in report.findings:
        yield {"type": "finding", **f.to_dict()}
    yield summary_line(report)


def summary_line(report: R.Report) -> dict[str, Any]:
    doc = report_dict(report)
    return {"type": "summary", **{k: v for k, v in doc.items() if k not in ("sources", "tool", "version", "schema")}}


def dumps(obj: Any) -> str:
    return json.dumps(obj, default=str, ensure_ascii=False)
