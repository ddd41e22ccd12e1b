"""``diag report --format text``: a compact rich summary of the report document (the pick under the
latency target, best point per run, the frontier, the verdict of every point, what differs between runs)."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from diag.rules.present import VERDICT_STYLE, number, shown


def _run_verdict(v: dict[str, Any] | None) -> Text:
    """The run's verdict: class (limiter) and confidence, with what lowered it."""
    if v is None:
        return Text("-")
    label = v["class"] + (f" ({v['limiter']})" if v.get("limiter") else "")
    reasons = v.get("confidence_reasons") or []
    return Text(f"{label}, {v['confidence']}" + (f" ({'; '.join(reasons)})" if reasons else ""),
                style=VERDICT_STYLE.get(v["class"], ""))


def _postmortem(label: str, pm: dict[str, Any], console: Console) -> None:
    """A failed run's postmortem in a few lines: when, each root cause with its owner, the first error."""
    when = pm["failed_at"][11:19] if pm.get("failed_at") else "an unknown time"
    console.print(Text(f"{label}: failed at {when}", style="bold red"))
    for r in pm["root_causes"]:
        console.print(Text.assemble("  root cause: ", r["text"], " — owner ", (r["owner"], "bold"),
                                    f" ({r['why']})" + (f" at {r['at']}" if r.get("at") else "")))
    if first := pm.get("first_error"):
        console.print(escape(f"  {first['text']}" + (f" at {first['at']}" if first.get("at") else "")))
    if pm["consequences"] or pm["noise"]:
        console.print(Text(f"  set aside: {number(len(pm['consequences']))} consequence(s) after the failure, "
                           f"{number(len(pm['noise']))} warning(s) the run survived before it", style="dim"))


def render_report(doc: dict[str, Any], console: Console) -> None:
    console.print(Text(doc["pick"]["sentence"], style="bold"))
    console.print(escape(f"latency target: {doc['sla']['text']} (from {doc['sla']['source']})"))
    runs = Table(title="runs", title_justify="left", pad_edge=False)
    for col in ("run", "topology", "GPUs working/allocated", "best C within target", "tok/s/GPU working/allocated",
                "run verdict"):
        runs.add_column(col)
    for r in doc["runs"]:
        b = r["best"] or {}
        tpg = b.get("tok_s_per_gpu", {})
        runs.add_row(r["label"], r["topology"], f"{number(r['gpus'].get('working_gpus'))}/"
                     f"{number(r['gpus'].get('allocated_gpus'))}", number(b.get("concurrency")),
                     f"{number(tpg.get('working'))}/{number(tpg.get('allocated'))}",
                     _run_verdict(r.get("verdict")))
    console.print(runs)
    for r in (r for r in doc["runs"] if r["note"]):
        console.print(escape(f"{r['label']}: {r['note']}"))
        console.print(escape("  health: " + (", ".join(f"{ep} {h}" for ep, h in r["health"].items()) or "no endpoints")))
        for f in r["finding_list"]:
            console.print(escape(f"  {f['code']} {f['severity']} {f['name']}"
                                 f"{' [' + f['endpoint'] + ']' if f['endpoint'] else ''}: {f['message']}"))
    for r in (r for r in doc["runs"] if r.get("postmortem")):
        _postmortem(r["label"], r["postmortem"], console)
    if not doc["points"]:
        return
    points = Table(title="sweep points (* on the frontier per working GPU, + per allocated GPU)",
                   title_justify="left", pad_edge=False)
    for col, just in (("run", "left"), ("C", "right"), ("tok/s/user", "right"), ("tok/s/GPU w", "right"),
                      ("tok/s/GPU a", "right"), ("front", "left"), ("latency target", "left"),
                      ("goodput req/s", "right"), ("verdict", "left"), ("why", "left")):
        points.add_column(col, justify=just, no_wrap=col == "verdict")
    for p in doc["points"]:
        mark = ("*" if p["frontier"].get("working") else "") + ("+" if p["frontier"].get("allocated") else "")
        sla = p["sla"] or {}
        goodput = "-" if sla.get("goodput_req_s") is None else f"{number(sla['goodput_req_s'], 2)} ({sla['goodput_basis']})"
        points.add_row(p["run"], number(p["concurrency"]), number(p["tok_s_per_user"], 1),
                       number(p["tok_s_per_gpu"]["working"]), number(p["tok_s_per_gpu"]["allocated"]), mark,
                       Text(sla.get("summary", "not judged"), style="" if sla.get("meets") else "red"), goodput,
                       Text(p["verdict"], style=VERDICT_STYLE.get(p["verdict"], "")), p["reason"])
    console.print(points)
    for d, front in doc["frontier"].items():
        console.print(escape(f"frontier per {d} GPU: " + (" -> ".join(
            f"{f['run']}@{number(f['concurrency'])} ({number(f['tok_s_per_user'], 1)} tok/s/user, "
            f"{number(f['tok_s_per_gpu'])} tok/s/GPU)" for f in front) or "none")))
    for diff in doc["diffs"]:
        console.print()
        console.print(Text(f"{diff['a']} -> {diff['b']}", style="bold"))
        for c in diff["config"]:
            console.print(escape(f"  {c['key']}: {shown(c['a'])} -> {shown(c['b'])}"))
        for f in diff["findings"]:
            console.print(escape(f"  {f['code']} {f['name']}{' [' + f['endpoint'] + ']' if f['endpoint'] else ''}: "
                                 f"only in {f['only_in']}"))
        console.print("  TPS/GPU delta at equal tok/s/user: " + (", ".join(
            f"{number(r['tok_s_per_user'], 1)}: {number(r['working']['delta'], 0)} ({number(r['working']['delta_pct'], 1)} %)"
            for r in diff["tps_per_gpu"]) or "no common tok/s/user range"))
