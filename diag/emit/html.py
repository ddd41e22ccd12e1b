"""The ``diag report`` HTML: one self-contained file (plotly's JS and the data inlined, nothing
fetched), drawn from the report document of :mod:`diag.report_doc` only.

Sections: the pick (which configuration to run under the latency target, and why), the Pareto (total
tok/s per GPU against output tok/s per user, working/allocated GPUs switchable, every point labelled with
its concurrency, points that miss the target hollow and faded, invalid ones crossed, the frontier over the
points within the target, hover with topology, verdict and goodput; clicking a point opens its evidence),
the verdict table, per-run throughput/TTFT/TPOT against concurrency, per-run endpoint
time series with the findings' windows shaded and the concurrency steps marked, and run vs run.
"""

from __future__ import annotations

import html
import json
from typing import Any

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from diag.rules.present import number

PALETTE = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf", "#8c564b", "#e377c2", "#7f7f7f",
           "#bcbd22")
VERDICT_SYMBOL = {"healthy": "circle", "under-loaded": "hexagon", "prefill-bound": "triangle-up",
                  "decode-bound": "square", "transfer-bound": "diamond", "startup-stuck": "cross", "invalid": "x",
                  "unknown": "star"}
VERDICT_COLOUR = {"healthy": "#2ca02c", "under-loaded": "#17becf", "prefill-bound": "#ff7f0e",
                  "decode-bound": "#9467bd", "transfer-bound": "#d62728", "startup-stuck": "#8c564b",
                  "invalid": "#7f7f7f", "unknown": "#bbbbbb"}
MISSED_OPACITY = 0.45
SEVERITY_FILL = {"error": "rgba(214,39,40,0.16)", "warning": "rgba(255,127,14,0.14)", "info": "rgba(31,119,180,0.08)"}
CONFIG = {"displaylogo": False, "responsive": True}
CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:24px auto;max-width:1400px;color:#222}
h1{font-size:22px}h2{font-size:18px;margin-top:32px;border-bottom:1px solid #ddd}h3{font-size:15px}
table{border-collapse:collapse;font-size:13px;margin:8px 0}td,th{border:1px solid #ddd;padding:3px 8px;text-align:left}
th{background:#f4f4f4}td.num{text-align:right;font-variant-numeric:tabular-nums}
.verdict{font-weight:600}details{margin:0}details[open]{background:#fffbe6}summary{cursor:pointer}
.note{color:#666;font-size:12px}
.pick{font-size:16px;background:#eef6ee;border-left:4px solid #2ca02c;padding:8px 12px}
"""


def _anchor(run: str, concurrency: int) -> str:
    return f"ev-{''.join(ch if ch.isalnum() else '-' for ch in run)}-{concurrency}"


def _e(x: Any) -> str:
    return html.escape("-" if x is None else str(x))


def _colours(doc: dict[str, Any]) -> dict[str, str]:
    return {r["label"]: PALETTE[i % len(PALETTE)] for i, r in enumerate(doc["runs"])}


def point_symbol(p: dict[str, Any]) -> str:
    """The verdict's marker, hollow when the point misses the latency target (``x`` for invalid)."""
    symbol = VERDICT_SYMBOL.get(p["verdict"], "circle")
    missed = p["sla"] is not None and p["sla"]["meets"] is not True
    return f"{symbol}-open" if missed and p["verdict"] != "invalid" and not symbol.endswith("-open") else symbol


def _target_text(p: dict[str, Any]) -> str:
    return p["sla"]["summary"] if p["sla"] else "not judged"


def pareto_figure(doc: dict[str, Any]) -> go.Figure:
    """One series per run and denominator (working shown, allocated hidden) plus one frontier per
    denominator; the buttons switch the denominator. Each point is labelled with its concurrency; a point
    that misses the target is hollow and faded; the median TPOT limit is the vertical line 1000 / limit."""
    fig = go.Figure()
    colours = _colours(doc)
    dens = list(doc["denominators"])
    for d in dens:
        for run in doc["runs"]:
            pts = [p for p in doc["points"] if p["run"] == run["label"] and p["tok_s_per_user"] is not None
                   and p["tok_s_per_gpu"][d] is not None]
            fig.add_trace(go.Scatter(
                x=[p["tok_s_per_user"] for p in pts], y=[p["tok_s_per_gpu"][d] for p in pts],
                mode="lines+markers+text", name=f"{run['label']} ({run['topology']})", visible=d == dens[0],
                line={"color": colours[run["label"]], "width": 1.5},
                text=[f"C={p['concurrency']}" for p in pts], textposition="top center",
                textfont={"size": 10, "color": colours[run["label"]]},
                marker={"size": 11, "symbol": [point_symbol(p) for p in pts],
                        "opacity": [1.0 if p["sla"] is None or p["sla"]["meets"] else MISSED_OPACITY for p in pts],
                        "color": colours[run["label"]], "line": {"width": 1.5, "color": "#333"}},
                customdata=[[p["concurrency"], p["topology"], p["verdict"], p["reason"],
                             _anchor(p["run"], p["concurrency"]), _target_text(p),
                             number((p["sla"] or {}).get("goodput_req_s"), 2)] for p in pts],
                hovertemplate=("<b>concurrency %{customdata[0]}</b><br>%{customdata[1]}<br>verdict: "
                               "<b>%{customdata[2]}</b> (%{customdata[3]})<br>latency target: %{customdata[5]}, "
                               "goodput %{customdata[6]} req/s<br>%{x:.1f} tok/s/user<br>"
                               f"%{{y:,.0f}} tok/s per {d} GPU<extra>{html.escape(run['label'])}</extra>")))
        front = doc["frontier"][d]
        fig.add_trace(go.Scatter(x=[p["tok_s_per_user"] for p in front], y=[p["tok_s_per_gpu"] for p in front],
                                 mode="lines", name=f"Pareto frontier (per {d} GPU)", visible=d == dens[0],
                                 line={"color": "#111", "dash": "dash", "width": 2}, hoverinfo="skip"))
    per = len(doc["runs"]) + 1
    buttons = [{"label": f"per {d} GPU", "method": "update",
                "args": [{"visible": [k // per == i for k in range(per * len(dens))]},
                         {"yaxis.title.text": f"total tok/s per {d} GPU"}]} for i, d in enumerate(dens)]
    fig.update_layout(
        title="Pareto: total tok/s per GPU vs output tok/s per user (1000 / median TPOT)", height=560,
        xaxis_title="output tok/s per user", yaxis_title=f"total tok/s per {dens[0]} GPU", template="plotly_white",
        updatemenus=[{"type": "buttons", "direction": "right", "buttons": buttons, "x": 1.0, "xanchor": "right",
                      "y": 1.12, "yanchor": "top", "showactive": True}],
        legend={"orientation": "h", "y": -0.18}, margin={"t": 90})
    for lim in doc["sla"]["limits"]:
        if lim["metric"] == "tpot" and lim["stat"] == "median":   # x = 1000 / median TPOT
            fig.add_vline(x=1000.0 / lim["ms"], line={"color": "#d62728", "dash": "dot", "width": 1},
                          annotation_text=f"median TPOT {lim['ms']:g} ms", annotation_position="top right")
    return fig


def curves_figure(doc: dict[str, Any]) -> go.Figure:
    """Per run: total tok/s, median TTFT and median TPOT against concurrency."""
    metrics = (("total_token_throughput", "total tok/s"), ("median_ttft_ms", "median TTFT (ms)"),
               ("median_tpot_ms", "median TPOT (ms)"))
    fig = make_subplots(rows=1, cols=3, subplot_titles=[t for _, t in metrics], horizontal_spacing=0.07)
    colours = _colours(doc)
    for run in doc["runs"]:
        pts = [p for p in doc["points"] if p["run"] == run["label"]]
        for col, (key, title) in enumerate(metrics, 1):
            xs = [p for p in pts if p[key] is not None]
            fig.add_trace(go.Scatter(
                x=[p["concurrency"] for p in xs], y=[p[key] for p in xs], mode="lines+markers",
                name=run["label"], legendgroup=run["label"], showlegend=col == 1,
                line={"color": colours[run["label"]]}, customdata=[[p["verdict"]] for p in xs],
                hovertemplate=f"C=%{{x}}<br>{title}: %{{y:,.1f}}<br>%{{customdata[0]}}"
                              f"<extra>{html.escape(run['label'])}</extra>"), row=1, col=col)
        for col in (1, 2, 3):
            fig.update_xaxes(type="log", title_text="concurrency", row=1, col=col)
    fig.update_layout(height=380, template="plotly_white", legend={"orientation": "h", "y": -0.25},
                      title="throughput and latency against concurrency")
    return fig


SERIES_ROWS = (("prompt_tps", "prompt tok/s", 1, "solid"), ("gen_tps", "gen tok/s", 2, "solid"),
               ("running", "running", 3, "solid"), ("waiting", "waiting", 3, "dot"), ("kv_usage", "KV %", 4, "solid"))


def series_figure(doc: dict[str, Any], run: str) -> go.Figure:
    """One run's endpoints over time: prompt and gen tok/s, running/waiting, KV %; findings' windows
    shaded, each concurrency's measured window marked at its start."""
    fig = make_subplots(rows=4, cols=1, shared_xaxes=True, vertical_spacing=0.05,
                        subplot_titles=("prompt tok/s", "generation tok/s", "running (solid) / waiting (dotted)",
                                        "KV cache %"))
    rows = [r for r in doc["series"] if r["run"] == run]
    endpoints = list(dict.fromkeys(r["endpoint"] for r in rows))
    for i, ep in enumerate(endpoints):
        mine = [r for r in rows if r["endpoint"] == ep]
        colour = PALETTE[i % len(PALETTE)]
        for key, title, row, dash in SERIES_ROWS:
            fig.add_trace(go.Scatter(
                x=[r["ts"] for r in mine], y=[r[key] for r in mine], mode="lines", name=ep, legendgroup=ep,
                showlegend=key == "prompt_tps", line={"color": colour, "width": 1.3, "dash": dash},
                hovertemplate=f"{ep} {title}: %{{y:,.1f}}<extra></extra>"), row=row, col=1)
    for w in (w for w in doc["windows"] if w["run"] == run):
        fig.add_shape(type="rect", xref="x", yref="paper", x0=w["first_ts"], x1=w["last_ts"], y0=0, y1=1,
                      fillcolor=SEVERITY_FILL.get(w["severity"], SEVERITY_FILL["info"]), line={"width": 0},
                      layer="below")
        fig.add_annotation(x=w["first_ts"], y=1.0, xref="x", yref="paper", text=w["code"], showarrow=False,
                           xanchor="left", yanchor="bottom", font={"size": 10, "color": "#a33"})
    for s in (s for s in doc["steps"] if s["run"] == run):
        fig.add_shape(type="line", xref="x", yref="paper", x0=s["started"], x1=s["started"], y0=0, y1=1,
                      line={"color": "#555", "width": 1, "dash": "dot"})
        fig.add_annotation(x=s["started"], y=-0.04, xref="x", yref="paper", text=f"C={s['concurrency']}",
                           showarrow=False, xanchor="left", yanchor="top", font={"size": 10})
    fig.update_layout(height=760, template="plotly_white", title=f"{run}: endpoints over time",
                      legend={"orientation": "h", "y": -0.08}, margin={"b": 90}, hovermode="x unified")
    return fig


def delta_figure(diff: dict[str, Any]) -> go.Figure:
    rows = diff["tps_per_gpu"]
    fig = go.Figure([go.Bar(x=[str(r["concurrency"]) for r in rows], y=[r[d]["delta"] for r in rows],
                            name=f"per {d} GPU", customdata=[[r[d]["delta_pct"]] for r in rows],
                            hovertemplate="C=%{x}: %{y:+,.0f} tok/s/GPU (%{customdata[0]:+.1f} %)<extra></extra>")
                     for d in ("working", "allocated")])
    fig.update_layout(barmode="group", height=320, template="plotly_white", xaxis_title="concurrency",
                      yaxis_title=f"tok/s per GPU: {diff['b']} - {diff['a']}",
                      title=f"TPS/GPU delta: {diff['b']} against {diff['a']}")
    return fig


def _points_table(doc: dict[str, Any]) -> str:
    head = ("run", "topology", "C", "verdict", "latency target", "goodput req/s", "tok/s/user", "tok/s/GPU working",
            "tok/s/GPU allocated", "total tok/s", "median TTFT ms", "median TPOT ms", "frontier",
            "why (click for evidence)")
    out = ["<table><tr>" + "".join(f"<th>{h}</th>" for h in head) + "</tr>"]
    for p in doc["points"]:
        front = ", ".join(d for d, on in p["frontier"].items() if on) or "-"
        ev = "".join(f"<li>{_evidence(e)}</li>" for e in p["evidence"]) or "<li>no finding, no stats in window</li>"
        out.append(
            f"<tr><td>{_e(p['run'])}</td><td>{_e(p['topology'])}</td><td class=num>{p['concurrency']}</td>"
            f"<td class=verdict style='color:{VERDICT_COLOUR.get(p['verdict'], '#333')}'>{_e(p['verdict'])}</td>"
            f"<td>{_e(_target_text(p))}</td><td class=num>{_goodput(p)}</td>"
            f"<td class=num>{number(p['tok_s_per_user'], 1)}</td>"
            f"<td class=num>{number(p['tok_s_per_gpu']['working'], 1)}</td>"
            f"<td class=num>{number(p['tok_s_per_gpu']['allocated'], 1)}</td>"
            f"<td class=num>{number(p['total_token_throughput'])}</td><td class=num>{number(p['median_ttft_ms'], 1)}</td>"
            f"<td class=num>{number(p['median_tpot_ms'], 2)}</td><td>{front}</td>"
            f"<td><details id='{_anchor(p['run'], p['concurrency'])}'><summary>{_e(p['reason'])}</summary>"
            f"<div class=note>window {_e(p['started'])} .. {_e(p['ended'])}</div><ul>{ev}</ul></details></td></tr>")
    return "\n".join([*out, "</table>"])


def _goodput(p: dict[str, Any]) -> str:
    """Goodput and its basis: ``10.90 (quantile)``, ``7.45 (per-request, 700/1,024)``."""
    sla = p["sla"]
    if sla is None or sla["goodput_req_s"] is None:
        return "-"
    counted = (f", {number(sla['good_requests'])}/{number(sla['requests_judged'])}"
               if sla["goodput_basis"] == "per-request" else "")
    return f"{number(sla['goodput_req_s'], 2)} <span class=note>({sla['goodput_basis']}{counted})</span>"


def _evidence(e: dict[str, Any]) -> str:
    if e["kind"] == "finding":
        return (f"<b>{_e(e['code'])}</b> {_e(e['severity'])} {_e(e['name'])}"
                f"{' [' + _e(e['endpoint']) + ']' if e['endpoint'] else ''}: {_e(e['message'])} "
                f"<span class=note>({_e(e['first_ts'])} .. {_e(e['last_ts'])})</span>")
    if e["kind"] == "figures":
        util = e.get("decode_util")
        return (f"figures over the point's steady window ({_e(e.get('window_s'))} s)"
                + (f": decode at {util * 100:.0f} % of its capacity" if util is not None else ""))
    return _e(", ".join(f"{k} {v}" for k, v in e.items() if k != "kind"))


def _rows(head: tuple[str, ...], rows: list[tuple[Any, ...]]) -> str:
    body = "".join("<tr>" + "".join(f"<td>{_e(c)}</td>" for c in r) + "</tr>" for r in rows)
    return "<table><tr>" + "".join(f"<th>{_e(h)}</th>" for h in head) + f"</tr>{body}</table>"


def _runs_table(doc: dict[str, Any]) -> str:
    rows = []
    for r in doc["runs"]:
        best = r["best"] or {}
        tpg = best.get("tok_s_per_gpu", {})
        rows.append((r["label"], r["topology"], r["header"].get("job"), r["gpus"].get("working_gpus"),
                     r["gpus"].get("allocated_gpus"), best.get("concurrency"), number(tpg.get("working")),
                     number(tpg.get("allocated")),
                     (v["class"] + (f" ({v['limiter']})" if v["limiter"] else "") + f": {v['why']}") if (v := r["verdict"]) else "-",
                     ", ".join(f"{n} {k}" for k, n in r["findings"].items() if n) or "none"))
    return _rows(("run", "topology", "job", "working GPUs", "allocated GPUs", "best C within target",
                  "tok/s/GPU working", "tok/s/GPU allocated", "run verdict", "findings"), rows)


def _pick_html(doc: dict[str, Any]) -> str:
    """The pick sentence at the top of the page, with the target and where it came from."""
    sla = doc["sla"]
    return (f"<p class=pick id=pick>{_e(doc['pick']['sentence'])}</p>"
            f"<p class=note>Latency target: <b>{_e(sla['text'])}</b> (from {_e(sla['source'])}). Goodput counts "
            "the requests within every limit: per request where the result file holds one entry per prompt, "
            "else the whole point by its quantiles.</p>")


def _no_points_html(doc: dict[str, Any]) -> str:
    """Runs without benchmark points: the note, their endpoints' health and their findings."""
    out = []
    for r in (r for r in doc["runs"] if r["note"]):
        out += [f"<h3>{_e(r['label'])}: {_e(r['note'])}</h3>",
                _rows(("endpoint", "health"), list(r["health"].items())) if r["health"] else "<p>no endpoints</p>",
                _rows(("code", "name", "severity", "endpoint", "message"),
                      [(f["code"], f["name"], f["severity"], f["endpoint"], f["message"]) for f in r["finding_list"]])
                if r["finding_list"] else "<p>no findings</p>"]
    return "\n".join(out)


def _undrawn_html(doc: dict[str, Any]) -> str:
    """The points the Pareto cannot place (no result to draw), named under it."""
    missing = [p for p in doc["points"] if p["tok_s_per_user"] is None or p["tok_s_per_gpu"]["working"] is None]
    if not missing:
        return ""
    return ("<p class=note>Not drawn (no result to place): " + "; ".join(
        f"{_e(p['run'])} C={p['concurrency']} {_e(p['verdict'])}: {_e(p['reason'])}" for p in missing) + "</p>")


def _figure_html(fig: go.Figure, div_id: str, first: bool) -> str:
    return fig.to_html(full_html=False, include_plotlyjs=first, div_id=div_id, config=CONFIG,
                       include_mathjax=False)


CLICK_JS = """
<script>
(function(){
  var gd = document.getElementById('pareto');
  if (!gd || !gd.on) { return; }
  gd.on('plotly_click', function(ev){
    var p = ev.points && ev.points[0];
    if (!p || !p.customdata) { return; }
    var d = document.getElementById(p.customdata[4]);
    if (d) { d.open = true; d.scrollIntoView({block: 'center'}); }
  });
})();
</script>
"""


def render_html(doc: dict[str, Any]) -> str:
    """The whole page."""
    parts = [f"<h1>diag report: {len(doc['runs'])} run(s)</h1>", _pick_html(doc),
             f"<p class=note>{_e(doc['tool'])} {_e(doc['version'])}; schema {_e(doc['schema'])}. "
             "GPU denominators: " + "; ".join(f"<b>{_e(k)}</b>: {_e(v)}" for k, v in doc["denominators"].items())
             + "</p>", _runs_table(doc), _no_points_html(doc), "<h2>Pareto</h2>",
             "<p class=note>Markers: ● healthy ⬢ under-loaded ▲ prefill-bound ■ decode-bound ◆ transfer-bound ✕ invalid; "
             "hollow and "
             "faded: misses the latency target. The frontier holds only valid points within the target. "
             "Click a point for its evidence.</p>",
             _figure_html(pareto_figure(doc), "pareto", True), _undrawn_html(doc),
             "<h2>Verdict per sweep point</h2>", _points_table(doc),
             "<h2>Per run: throughput and latency against concurrency</h2>",
             _figure_html(curves_figure(doc), "curves", False), "<h2>Per endpoint over time</h2>"]
    for i, run in enumerate(doc["runs"]):
        parts.append(_figure_html(series_figure(doc, run["label"]), f"series-{i}", False))
    if doc["diffs"]:
        parts.append("<h2>Run vs run</h2>")
    for i, diff in enumerate(doc["diffs"]):
        parts += [f"<h3>{_e(diff['a'])} → {_e(diff['b'])}</h3>",
                  "<b>configuration that differs</b> (what ran: launch flags, startup facts, resources)",
                  _rows(("key", diff["a"], diff["b"]),
                        [(c["key"], json.dumps(c["a"]), json.dumps(c["b"])) for c in diff["config"]])
                  if diff["config"] else "<p>none</p>",
                  "<b>findings that differ</b>",
                  _rows(("code", "name", "severity", "endpoint", "only in", "message"),
                        [(f["code"], f["name"], f["severity"], f["endpoint"], f["only_in"], f["message"])
                         for f in diff["findings"]]) if diff["findings"] else "<p>none</p>",
                  _figure_html(delta_figure(diff), f"delta-{i}", False)]
    body = "\n".join(parts)
    return (f"<!DOCTYPE html>\n<html lang=en><head><meta charset=utf-8><title>diag report</title>"
            f"<style>{CSS}</style></head><body>\n{body}\n{CLICK_JS}</body></html>\n")
