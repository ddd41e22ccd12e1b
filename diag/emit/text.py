"""The text emitters: ``diag tail`` (a run's verdict, endpoints, benchmark points and findings) and ``diag
check`` (recipe findings grouped by file, worst first), sized to the terminal.

Tables choose their columns by priority for the console's width, as the TUI does: a column that does not fit
is left out whole, a cell is never cut, and an endpoint's row stays on one line at 80 columns and up.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from rich.console import Console, Group
from rich.markup import escape
from rich.padding import Padding
from rich.table import Table
from rich.text import Text

from diag.report import STAGE_SHORT, EndpointSummary, Report, balance_text, link_lines, stage_text
from diag.rules.engine import sort_findings
from diag.rules.finding import Finding
from diag.rules.present import (
    HEALTH_STYLE,
    SEVERITY_STYLE,
    VERDICT_FIGURES,
    VERDICT_STYLE,
    clock,
    duration,
    informative,
    number,
    seconds,
)

from .findings import summarize, where

GAP = 2            # columns between two cells
SKIPPED_SHOWN = 20


# ------------------------------------------------------------------ width-fitted tables
@dataclass(frozen=True)
class Column:
    """A table column: its header (may wrap at spaces), justification and priority (0 = always shown);
    ``figure``: the endpoint figure it shows, as VERDICT_FIGURES names them; ``evidence``: the verdict rests
    on it (it counts as informative whatever its values)."""

    header: str
    priority: int
    cell: Callable[[Any], str | Text]
    justify: str = "right"
    figure: str = ""
    evidence: bool = False


def _plain(cell: str | Text) -> str:
    return cell.plain if isinstance(cell, Text) else cell


def _width(cell: str | Text) -> int:
    return cell.cell_len if isinstance(cell, Text) else len(cell)


def chosen_columns(columns: Sequence[Column], cells: Sequence[Sequence[str | Text]], width: int) -> list[int]:
    """The columns that fit ``width`` (their indices, in table order), taken by priority (ties keep table
    order); a column whose cells are all empty or zero (and that is not the verdict's evidence) yields to
    every column that carries information, and shows only when they all do."""
    need = [max([_width(row[i]) for row in cells] + [max(len(w) for w in c.header.split())])
            for i, c in enumerate(columns)]
    carries = [columns[i].priority == 0 or columns[i].evidence or informative(_plain(row[i]) for row in cells)
               for i in range(len(columns))]
    chosen: set[int] = set()
    used = -GAP
    for i in sorted(range(len(columns)), key=lambda i: (not carries[i], columns[i].priority)):
        if not carries[i] and not all(carries[j] <= (j in chosen) for j in range(len(columns))):
            break  # an informative column was left out: no room goes to one without information
        if columns[i].priority == 0 or used + GAP + need[i] <= width:
            chosen.add(i)
            used += GAP + need[i]
    return sorted(chosen)


def fitted_table(title: str, columns: Sequence[Column], items: Sequence[Any], width: int,
                 styles: Sequence[str | None] = ()) -> Group:
    """The title line and the columns that fit ``width`` (:func:`chosen_columns`); each column exactly as
    wide as its widest cell or the longest word of its header (headers wrap, cells never do)."""
    cells = [[c.cell(it) for c in columns] for it in items]
    need = [max([_width(row[i]) for row in cells] + [max(len(w) for w in c.header.split())])
            for i, c in enumerate(columns)]
    keep = chosen_columns(columns, cells, width)
    hidden = len(columns) - len(keep)
    head = Text(title, style="bold")
    if hidden:
        head.append(f" ({number(hidden)} more column{'s' if hidden > 1 else ''} on a wider terminal)", style="dim")
    t = Table(box=None, padding=(0, GAP, 0, 0), pad_edge=False, expand=False, show_edge=False,
              header_style="bold")
    for i in keep:
        t.add_column(columns[i].header, justify=columns[i].justify, width=need[i])  # type: ignore[arg-type]
    for n, row in enumerate(cells):
        t.add_row(*(row[i] for i in keep), style=styles[n] if n < len(styles) else None)
    return Group(head, t)


def _nodes(s: EndpointSummary) -> str:
    if not s.nodes:
        return "-"
    return s.nodes[0] if len(s.nodes) == 1 else f"{s.nodes[0]} and {number(len(s.nodes) - 1)} more"


def _p90(s: EndpointSummary) -> str:
    return "/".join(seconds(s.latency.get(k, {}).get("p90")) for k in ("ttft", "itl"))


def endpoint_columns(summaries: Sequence[EndpointSummary], own: Callable[[EndpointSummary], bool],
                     verdict: str | None = None) -> list[Column]:
    """The endpoint table's columns; those showing the figures ``verdict`` rests on (VERDICT_FIGURES) take
    the first priority after the endpoint and its health, and count as informative whatever their values."""
    cols = [
        Column("endpoint", 0, lambda s: s.id + ("*" if own(s) else ""), "left"),
        Column("health", 0, lambda s: Text(s.health, style=HEALTH_STYLE.get(s.health, "")), "left"),
        Column("wait mean/peak", 1, lambda s: f"{number(s.waiting_mean)}/{number(s.waiting_peak)}", figure="waiting"),
        Column("KV % mean/peak", 1, lambda s: f"{number(s.kv_mean, 1)}/{number(s.kv_peak, 1)}", figure="kv"),
        Column("prompt tok/s", 2, lambda s: number(s.prompt_tps_mean), figure="prompt_tps"),
        Column("gen tok/s", 2, lambda s: number(s.gen_tps_mean), figure="gen_tps"),
        Column("running", 3, lambda s: number(s.running_mean), figure="running"),
        Column("engines", 4, lambda s: str(s.engines)),
        Column("preempt", 5, lambda s: number(s.preemptions), figure="preemptions"),
    ]
    if any(s.latency for s in summaries):  # only runs with Prometheus latency histograms
        cols.append(Column("TTFT/ITL p90 s", 5, _p90))
    cols += [Column("stage", 6, lambda s: "log empty" if s.log == "empty" else stage_text(s.startup), "left",
                    figure="stage"),
             Column("samples", 7, lambda s: number(s.window_samples), figure="samples"),
             Column("last seen", 8, lambda s: clock(s.last_ts), "left", figure="last_seen"),
             Column("nodes", 9, _nodes, "left")]
    evidence = VERDICT_FIGURES.get(verdict or "", ())
    cols = [replace(c, priority=1, evidence=True) if c.figure and c.figure in evidence
            else replace(c, priority=c.priority + 1) if c.priority else c for c in cols]
    order = ("endpoint", "nodes", "engines", "samples", "prompt tok/s", "gen tok/s", "running", "wait mean/peak",
             "KV % mean/peak", "preempt", "TTFT/ITL p90 s", "last seen", "stage", "health")
    return sorted(cols, key=lambda c: order.index(c.header))


def endpoint_table(summaries: Sequence[EndpointSummary], width: int, verdict: str | None = None) -> Group:
    """One row per endpoint; figures over the run verdict's steady window (named in the title); the rows
    on the side the verdict names as the limit in bold; the columns by their relevance to ``verdict``, the
    run's verdict class (:func:`endpoint_columns`, :func:`chosen_columns`)."""
    window = next((s.window for s in summaries if s.window), None)
    title = "endpoints" + (f", figures over {window['label']} {clock(datetime.fromisoformat(window['start']))} .. "
                           f"{clock(datetime.fromisoformat(window['end']))}" if window else "")

    def own(s: EndpointSummary) -> bool:
        return bool(s.window and window and s.window != window)

    if any(own(s) for s in summaries):
        title += "; * over the endpoint's own active window"
    styles = ["bold" if s.limiting else None for s in summaries]
    return fitted_table(title, endpoint_columns(summaries, own, verdict), summaries, width, styles)


def point_table(report: Report, width: int) -> Group | None:
    """One row per benchmark point: its verdict and the steady-window figures it rests on."""
    if report.verdicts is None or not report.verdicts.points:
        return None
    bench = {b.concurrency: b for b in report.run.benchmark if b.concurrency}

    def fig(v: Any, role: str, key: str) -> float | None:
        return ((v.figures.get(role) or {}).get(key) or {}).get("mean")

    def ttft(v: Any) -> str:
        b = bench.get(v.concurrency)
        return seconds(b.median_ttft_ms / 1000 if b and b.median_ttft_ms is not None else None)

    cols = [
        Column("C", 0, lambda v: number(v.concurrency)),
        Column("verdict", 0, lambda v: Text(v.label, style=VERDICT_STYLE.get(v.cls, "")), "left"),
        Column("tok/s", 1, lambda v: number(b.total_token_throughput if (b := bench.get(v.concurrency)) else None)),
        Column("prefill wait/eng", 2, lambda v: number(fig(v, "prefill", "waiting"), 1)),
        Column("decode KV %", 2, lambda v: number(fig(v, "decode", "kv"), 1)),
        Column("decode run/eng", 3, lambda v: number(fig(v, "decode", "running"), 1)),
        Column("TTFT p50 s", 4, ttft),
        Column("TPOT p50 ms", 4, lambda v: number(b.median_tpot_ms if (b := bench.get(v.concurrency)) else None, 1)),
        Column("conf", 5, lambda v: v.confidence, "left"),
    ]
    order = ("C", "verdict", "conf", "tok/s", "TTFT p50 s", "TPOT p50 ms", "prefill wait/eng", "decode KV %",
             "decode run/eng")
    cols.sort(key=lambda c: order.index(c.header))
    return fitted_table("benchmark points, verdict over each point's steady window", cols,
                        report.verdicts.points, width)


def startup_table(summaries: Sequence[EndpointSummary], width: int) -> Group | None:
    """The time each startup stage took per endpoint (open stages as of the report's time, marked ``+``)."""
    seen = [st["stage"] for s in summaries for st in s.startup.get("stages", [])]
    if not seen:
        return None

    def stage(name: str) -> Callable[[EndpointSummary], str]:
        def cell(s: EndpointSummary) -> str:
            st = next((st for st in s.startup.get("stages", []) if st["stage"] == name), None)
            return "-" if st is None else duration(st["duration_s"]) + ("+" if st["open"] else "")
        return cell

    cols = [Column("endpoint", 0, lambda s: s.id, "left"),
            *(Column(short, 2, stage(name)) for name, short in STAGE_SHORT.items() if name in seen),
            Column("ready after", 1, lambda s: duration(s.startup.get("ready_after_s")))]
    return fitted_table("startup, time each stage took", cols, summaries, width)


# ------------------------------------------------------------------ tail
def labelled(rows: Sequence[tuple[str, str | Text]]) -> Table:
    """Label / text rows; a long text wraps under itself (a hanging indent), not under the label, and a word
    longer than the line (a path) folds whole onto the next lines instead of being cut."""
    grid = Table.grid(padding=(0, 2))
    grid.add_column(style="bold", no_wrap=True, min_width=10)
    grid.add_column(overflow="fold")
    for k, v in rows:
        grid.add_row(k, v)
    return grid


def verdict_rows(report: Report) -> list[tuple[str, str | Text]]:
    """The run's verdict: class and confidence, why, the next experiment (and what its class would change
    that is in place already), what was ruled out."""
    v = report.verdict
    if v is None:
        return []
    reasons = f": {'; '.join(v.confidence_reasons)}" if v.confidence_reasons else ""
    head = Text.assemble((v.label, VERDICT_STYLE.get(v.cls, "")), f" ({v.confidence} confidence{reasons})"
                         + (f" at concurrency {number(v.concurrency)}" if v.concurrency else "") + f": {v.why}")
    rows: list[tuple[str, str | Text]] = [("verdict", head)]
    if v.experiments:
        e = v.experiments[0]
        rows.append(("next", f"{e['action']}: {e['expect']}"))
    if v.in_place:
        rows.append(("in place", "; ".join(v.in_place)))
    if v.ruled_out:
        rows.append(("ruled out", Text("; ".join(r["why"] for r in v.ruled_out), style="dim")))
    return rows


TIMELINE_SHOWN = ("ready", "benchmark", "error", "death", "failure", "teardown")  # kinds the short timeline shows


def postmortem_rows(report: Report) -> list[tuple[str, str | Text]]:
    """A failed run's postmortem in a few rows: when it failed, the root causes with their owners, the first
    error, what was set aside, and a short timeline (the first event of each kind); none for a run that did
    not fail."""
    pm = report.postmortem
    if pm is None:
        return []
    mark = next((e for e in pm.marked_by if e.ts == pm.failed_at), None)
    rows: list[tuple[str, str | Text]] = [
        ("failed at", f"{clock(pm.failed_at)}" + (f": {mark.text} ({mark.at})" if mark else ""))]
    for r in pm.root_causes:
        rows.append(("root cause", Text.assemble(f"{r.text} — owner ", (r.owner, "bold"), f": {r.why}")))
    if pm.first_error is not None:
        rows.append(("first error", f"{clock(pm.first_error.ts)} {pm.first_error.text.removeprefix('first error: ')}"
                     f" ({pm.first_error.at})"))
    if pm.consequences or pm.noise:
        rows.append(("set aside", Text(f"{number(len(pm.consequences))} consequence(s) after the failure, "
                                       f"{number(len(pm.noise))} warning(s) the run survived before it", style="dim")))
    seen: set[str] = set()
    picked = [e for e in report.timeline if e.ts is not None and e.kind in TIMELINE_SHOWN
              and not (e.kind in seen or seen.add(e.kind))]
    if picked:
        rows.append(("timeline", "; ".join(f"{clock(e.ts)} {e.endpoint + ' ' if e.endpoint else ''}{e.text}"
                                           for e in picked)))
    return rows


def finding_text(f: Finding) -> Group:
    """A runtime finding: code, severity, name and endpoint on one line; under it, indented, the message,
    its window, location, links, and the fix (or where to read about it)."""
    head = Text.assemble((f"{f.code} ", "bold"), (f"{f.severity:<7} ", SEVERITY_STYLE.get(f.severity, "")),
                         (f.name, "bold"), f" [{f.endpoint}]" if f.endpoint else "")
    body = Text(f.message)
    if f.first_ts:
        body.append(f"\nwindow {clock(f.first_ts)} .. {clock(f.last_ts)}{' (open)' if f.open else ''}", style="dim")
    if f.location:
        body.append(f"\nat {f.location}", style="dim")
    for line in link_lines(f):
        body.append(f"\n{line}", style="bold magenta")
    if f.fix:
        body.append_text(Text.assemble("\n", ("fix: ", "green"), f.fix))
    else:
        body.append(f"\n→ diag explain {f.code}", style="dim")
    return Group(head, Padding(body, (0, 0, 0, 4)))


def render_tail(report: Report, console: Console) -> None:
    """Header, verdict, endpoint table, balance, benchmark points, findings, skipped files."""
    run = report.run
    width = console.width
    console.print(labelled(report.header))
    console.print()
    verdict = verdict_rows(report) + postmortem_rows(report)
    if verdict:
        console.print(labelled(verdict))
        console.print()
    if report.endpoints:
        console.print(endpoint_table(report.endpoints, width, report.verdict.cls if report.verdict else None))
        startup = startup_table(report.endpoints, width)
        if startup is not None:
            console.print()
            console.print(startup)
    else:
        console.print("no endpoints found in the logs read", style="yellow")
    if report.balance:
        console.print(labelled([("balance", balance_text(report.balance))]))
    points = point_table(report, width)
    if points is not None:
        console.print()
        console.print(points)
    console.print()
    if report.findings:
        console.print(Text(f"findings ({number(len(report.findings))})", style="bold"))
        console.print(Group(*(finding_text(f) for f in report.findings)))
    else:
        console.print(Text("no findings", style="green"))
    if run.skipped:
        console.print()
        for path, reason in run.skipped[:SKIPPED_SHOWN]:
            console.print(Text(f"skipped {path}: {reason}", style="dim"))
        rest: dict[str, int] = {}
        for _, reason in run.skipped[SKIPPED_SHOWN:]:
            rest[reason] = rest.get(reason, 0) + 1
        for reason, n in rest.items():  # 10,000 empty files are one line, not 10,000 (JSON lists them all)
            console.print(Text(f"skipped {number(n)} more: {reason}", style="dim"))


def finding_event(f: Finding, event: str) -> str:
    """A follow-mode line for a finding that opened (+) or closed (-)."""
    at = escape(f"[{f.endpoint or 'run'}]")
    if event == "open":
        return f"[bold]+ {f.code}[/bold] {f.severity} {f.name} {at}: {escape(f.message)}"
    return f"[dim]- {f.code} closed {at}[/dim]"


def heartbeat_line(s: EndpointSummary) -> str:
    return (f"{s.id:<12} {s.health:<8} {s.phase:<8} samples={number(s.samples)} run={number(s.running_mean)} "
            f"wait={number(s.waiting_mean)} kv={number(s.kv_mean, 1)} gen={number(s.gen_tps_mean)}")


# ------------------------------------------------------------------ check
def _plural(n: int, word: str) -> str:
    return f"{number(n)} {word}{'' if n == 1 else 's'}"


def render_check(findings: Sequence[Finding], console: Console, *, files: int | None = None,
                 suppressed: int = 0) -> None:
    """Findings under their file's name (the file with the worst finding first), worst first within a file:
    ``  line:col  CODE severity message`` and its fix; then one summary line."""
    def path_of(f: Finding) -> str:
        return f.location.path if f.location else (f.endpoint or "-")

    ordered = sort_findings(findings)
    rank = {path: i for i, path in enumerate(dict.fromkeys(map(path_of, ordered)))}   # worst file first
    current: str | None = None
    for f in sorted(ordered, key=lambda f: rank[path_of(f)]):
        path = path_of(f)
        if path != current:
            if current is not None:
                console.print()
            console.print(Text(path, style="bold underline"), soft_wrap=True)
            current = path
        at = where(f).removeprefix(path).lstrip(":") if f.location else ""
        line = Text.assemble(f"  {at:<7} ", (f.code, "bold"), " ",
                             (f"{f.severity:<7}", SEVERITY_STYLE.get(f.severity, "")), " ", f.message)
        console.print(line, soft_wrap=True)    # one finding, one line: greppable when piped
        if f.fix:
            console.print(Text.assemble("          ", ("fix: ", "green"), f.fix), soft_wrap=True)
    s = summarize(findings, files, suppressed)
    scope = f" in {_plural(files, 'file')}" if files is not None else ""
    hidden = f" ({number(suppressed)} suppressed)" if suppressed else ""
    if findings:
        console.print()
    if s.total == 0:
        console.print(Text(f"All checks passed{scope}.{hidden}", style="green"))
    else:
        parts = ", ".join(_plural(n, sev) for sev, n in s.by_severity.items() if n)
        console.print(Text(f"Found {_plural(s.total, 'finding')} ({parts}){scope}.{hidden}", style="bold"))

