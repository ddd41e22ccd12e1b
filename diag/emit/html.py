"""The ``diag report`` HTML: one self-contained file (plotly.js and the data inlined, nothing fetched),
drawn from the report document of :mod:`diag.report_doc` only.

Sections: the pick (which configuration to run under the latency target, and why), each failed run's
postmortem and every run's timeline (folded unless the run failed), the Pareto (total
tok/s per GPU against output tok/s per user, working/allocated GPUs switchable, every point labelled with
its concurrency, points that miss the target hollow and faded, invalid ones crossed, the frontier over the
points within the target, hover with topology, verdict and goodput; clicking a point opens its evidence),
the verdict table, per-run throughput/TTFT/TPOT against concurrency (ticks at the sweep's concurrencies),
per-run endpoint time series with the findings' windows shaded and the concurrency steps marked, and run vs
run at equal tok/s per user.

plotly.js is the vendored *basic* partial bundle (``diag/assets``: scatter, bar, pie; about 1.2 MB instead of
the 4.8 MB full bundle with maps), inlined once. Colours: runs take :data:`PALETTE` in the order given (the
first, the baseline, is blue); endpoints take :func:`colour_of` their name, the same in every report.
"""

from __future__ import annotations

import html
import json
from datetime import datetime
from importlib.resources import files
from typing import Any

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from diag.rules.present import PALETTE, SEVERITY_FILL, VERDICT_COLOUR, clock, colour_of, number

PLOTLY_BUNDLE = files("diag") / "assets" / "plotly-basic.min.js"
VERDICT_SYMBOL = {"healthy": "circle", "under-loaded": "hexagon", "prefill-bound": "triangle-up",
                  "decode-bound": "square", "transfer-bound": "diamond", "startup-stuck": "cross", "invalid": "x",
                  "unknown": "star"}
MISSED_OPACITY = 0.45
ROLE_WIDTH = {"decode": 2.4, "agg": 2.0}   # decode lines wider than prefill ones (1.3): two colours may meet
LABEL_GAP = 0.08         # findings' windows starting closer than this share of the run's span share one label
LABEL_CODES = 3          # codes named on one label, the rest as "+N" (all of them in its hover)
SET_ASIDE_ROWS = 10      # consequences / noise listed per run, the rest as "N more"
TIMELINE_ROWS = 200      # timeline events listed per run, the rest as "N more" (all of them in the JSON)
CONFIG = {"displaylogo": False, "responsive": True}
CSS = """
*{box-sizing:border-box}
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:24px auto;max-width:1400px;padding:0 16px;
color:#222}
h1{font-size:22px}h2{font-size:18px;margin-top:32px;border-bottom:1px solid #ddd}h3{font-size:15px}
.wide{max-width:100%;overflow-x:auto}
table{border-collapse:collapse;font-size:13px;margin:8px 0}td,th{border:1px solid #ddd;padding:3px 8px;text-align:left}
td{overflow-wrap:break-word}th{background:#f4f4f4}td.num{text-align:right;font-variant-numeric:tabular-nums}
.verdict{font-weight:600}details{margin:0}details[open]{background:#fffbe6}summary{cursor:pointer}
.note{color:#666;font-size:12px}
.owner{font-weight:600;color:#a33}
.pick{font-size:16px;background:#eef6ee;border-left:4px solid #2ca02c;padding:8px 12px}
"""


def _anchor(run: str, concurrency: int) -> str:
    return f"ev-{''.join(ch if ch.isalnum() else '-' for ch in run)}-{concurrency}"


def _e(x: Any) -> str:
    return html.escape("-" if x is None else str(x))


def _colours(doc: dict[str, Any]) -> dict[str, str]:
    """Each run's colour: :data:`PALETTE` in the order the runs were given."""
    return {r["label"]: PALETTE[i % len(PALETTE)] for i, r in enumerate(doc["runs"])}


def _sweep_axis(points: list[dict[str, Any]]) -> dict[str, Any]:
    """A log concurrency axis ticked at the sweep's own concurrencies (not 3 4 5 ... 1000 2)."""
    values = sorted({p["concurrency"] for p in points})
    return {"type": "log", "tickmode": "array", "tickvals": values, "ticktext": [number(c) for c in values]}


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
                text=[f"C={number(p['concurrency'])}" for p in pts], textposition="top center",
                textfont={"size": 10, "color": colours[run["label"]]},
                marker={"size": 11, "symbol": [point_symbol(p) for p in pts],
                        "opacity": [1.0 if p["sla"] is None or p["sla"]["meets"] else MISSED_OPACITY for p in pts],
                        "color": colours[run["label"]], "line": {"width": 1.5, "color": "#333"}},
                customdata=[[p["concurrency"], p["topology"], p["verdict"], p["reason"],
                             _anchor(p["run"], p["concurrency"]), _target_text(p),
                             number((p["sla"] or {}).get("goodput_req_s"), 2)] for p in pts],
                hovertemplate=("<b>concurrency %{customdata[0]:,}</b><br>%{customdata[1]}<br>verdict: "
                               "<b>%{customdata[2]}</b> (%{customdata[3]})<br>latency target: %{customdata[5]}, "
                               "goodput %{customdata[6]} req/s<br>%{x:,.1f} tok/s/user<br>"
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
        xaxis={"title": {"text": "output tok/s per user"}},
        yaxis={"title": {"text": f"total tok/s per {dens[0]} GPU"}, "rangemode": "tozero", "tickformat": "~s"},
        template="plotly_white",
        updatemenus=[{"type": "buttons", "direction": "right", "buttons": buttons, "x": 1.0, "xanchor": "right",
                      "y": 1.12, "yanchor": "top", "showactive": True}],
        legend={"orientation": "h", "y": -0.18}, margin={"t": 90})
    for lim in doc["sla"]["limits"]:
        if lim["metric"] == "tpot" and lim["stat"] == "median":   # x = 1000 / median TPOT
            fig.add_vline(x=1000.0 / lim["ms"], line={"color": "#d62728", "dash": "dot", "width": 1},
                          annotation_text=f"median TPOT {lim['ms']:,g} ms", annotation_position="top right")
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
    fig.update_xaxes(title_text="concurrency", **_sweep_axis(doc["points"]))
    fig.update_yaxes(rangemode="tozero", tickformat="~s")
    fig.update_layout(height=380, template="plotly_white", legend={"orientation": "h", "y": -0.25},
                      title="throughput and latency against concurrency")
    return fig


SERIES_ROWS = (("prompt_tps", "prompt tok/s", 1, "solid"), ("gen_tps", "gen tok/s", 2, "solid"),
               ("running", "running", 3, "solid"), ("waiting", "waiting", 3, "dot"), ("kv_usage", "KV %", 4, "solid"))
# y axes per row: every figure from 0 (a flat series is not zoomed into its noise), tok/s as 150k, KV on 0-100 %
SERIES_AXES = ({"rangemode": "tozero", "tickformat": "~s"}, {"rangemode": "tozero", "tickformat": "~s"},
               {"rangemode": "tozero"}, {"range": [0, 102], "tickmode": "array", "tickvals": [0, 25, 50, 75, 100],
                "ticktext": [f"{v} %" for v in (0, 25, 50, 75, 100)]})


def window_labels(windows: list[dict[str, Any]], span: tuple[str, str] | None) -> list[dict[str, Any]]:
    """One label per group of findings' windows that start within :data:`LABEL_GAP` of the run's span of
    each other (K001 and K002 of one episode share one), alternating two heights so neighbours do not
    collide: ``x`` (the group's first start), ``text`` (its codes), ``hover`` (code, name, message),
    ``level`` (0 or 1)."""
    if not windows:
        return []
    t = [datetime.fromisoformat(w["first_ts"]).timestamp() for w in windows]
    lo, hi = ((datetime.fromisoformat(span[0]).timestamp(), datetime.fromisoformat(span[1]).timestamp())
              if span else (min(t), max(t)))
    gap = LABEL_GAP * max(hi - lo, 1.0)
    groups: list[list[int]] = []
    for i in sorted(range(len(windows)), key=lambda i: t[i]):
        if groups and t[i] - t[groups[-1][0]] <= gap:
            groups[-1].append(i)
        else:
            groups.append([i])
    out = []
    for k, group in enumerate(groups):
        codes = list(dict.fromkeys(windows[i]["code"] for i in group))
        text = " · ".join(codes[:LABEL_CODES]) + (f" +{len(codes) - LABEL_CODES}" if len(codes) > LABEL_CODES else "")
        hover = "<br>".join(html.escape(f"{windows[i]['code']} {windows[i]['name']}"
                                        f"{' [' + windows[i]['endpoint'] + ']' if windows[i]['endpoint'] else ''}: "
                                        f"{windows[i]['message']}") for i in group)
        out.append({"x": windows[group[0]]["first_ts"], "text": text, "hover": hover, "level": k % 2})
    return out


def series_figure(doc: dict[str, Any], run: str) -> go.Figure:
    """One run's endpoints over time: prompt and gen tok/s, running/waiting, KV %; each endpoint in the
    colour of its name; findings' windows shaded and labelled without overlap, each concurrency's measured
    window marked at its start."""
    fig = make_subplots(rows=4, cols=1, shared_xaxes=True, vertical_spacing=0.05,
                        subplot_titles=("prompt tok/s", "generation tok/s", "running (solid) / waiting (dotted)",
                                        "KV cache %"))
    rows = [r for r in doc["series"] if r["run"] == run]
    endpoints = list(dict.fromkeys((r["endpoint"], r["role"]) for r in rows))
    for ep, role in endpoints:
        mine = [r for r in rows if r["endpoint"] == ep]
        colour = colour_of(ep)
        for key, title, row, dash in SERIES_ROWS:
            fig.add_trace(go.Scatter(
                x=[r["ts"] for r in mine], y=[r[key] for r in mine], mode="lines", name=ep, legendgroup=ep,
                showlegend=key == "prompt_tps",
                line={"color": colour, "width": ROLE_WIDTH.get(role, 1.3), "dash": dash},
                hovertemplate=f"{ep} {title}: %{{y:,.1f}}<extra></extra>"), row=row, col=1)
    for row, axis in enumerate(SERIES_AXES, 1):
        fig.update_yaxes(row=row, col=1, **axis)
    windows = [w for w in doc["windows"] if w["run"] == run]
    for w in windows:
        fig.add_shape(type="rect", xref="x", yref="paper", x0=w["first_ts"], x1=w["last_ts"], y0=0, y1=1,
                      fillcolor=SEVERITY_FILL.get(w["severity"], SEVERITY_FILL["info"]), line={"width": 0},
                      layer="below")
    span = (min(r["ts"] for r in rows), max(r["ts"] for r in rows)) if rows else None
    for label in window_labels(windows, span):
        fig.add_annotation(x=label["x"], y=1.0, xref="x", yref="paper", text=label["text"], showarrow=False,
                           xanchor="left", yanchor="bottom", yshift=2 + 14 * label["level"],
                           hovertext=label["hover"], font={"size": 10, "color": "#a33"})
    for s in (s for s in doc["steps"] if s["run"] == run):
        fig.add_shape(type="line", xref="x", yref="paper", x0=s["started"], x1=s["started"], y0=0, y1=1,
                      line={"color": "#555", "width": 1, "dash": "dot"})
        fig.add_annotation(x=s["started"], y=-0.04, xref="x", yref="paper", text=f"C={number(s['concurrency'])}",
                           showarrow=False, xanchor="left", yanchor="top", font={"size": 10})
    days = sorted({ts[:10] for ts in span}) if span else []
    fig.update_xaxes(tickformat="%H:%M" if len(days) == 1 else "%m-%d %H:%M")   # one line: the steps' labels fit
    fig.update_layout(height=760, template="plotly_white",
                      title=f"{run}: endpoints over time (as logged{', ' + ' to '.join(days) if days else ''})",
                      legend={"orientation": "h", "y": -0.08}, margin={"t": 100, "b": 90}, hovermode="x unified")
    return fig


def delta_figure(diff: dict[str, Any]) -> go.Figure:
    """b - a in tok/s per GPU against output tok/s per user (both denominators), hover with both runs'
    figures and the measured point behind each."""
    rows = diff["tps_per_gpu"]
    measured = [", ".join(f"{m['run']} C={number(m['concurrency'])}" for m in r["measured"]) for r in rows]
    fig = go.Figure([go.Scatter(
        x=[r["tok_s_per_user"] for r in rows], y=[r[d]["delta"] for r in rows], mode="lines+markers",
        name=f"per {d} GPU", line={"color": PALETTE[i]},
        customdata=[[r[d]["delta_pct"], r[d]["a"], r[d]["b"], m] for r, m in zip(rows, measured, strict=True)],
        hovertemplate=(f"%{{x:,.1f}} tok/s/user: %{{y:+,.0f}} tok/s per {d} GPU (%{{customdata[0]:+.1f}} %)<br>"
                       f"{html.escape(diff['a'])} %{{customdata[1]:,.0f}}, {html.escape(diff['b'])} "
                       "%{customdata[2]:,.0f}<br>measured: %{customdata[3]}<extra></extra>"))
        for i, d in enumerate(("working", "allocated"))])
    fig.update_layout(height=340, template="plotly_white", xaxis_title="output tok/s per user",
                      yaxis={"title": {"text": "b - a, tok/s per GPU"}, "tickformat": "~s",
                             "zeroline": True, "zerolinecolor": "#888"},
                      title=f"TPS/GPU delta at equal tok/s/user: b = {diff['b']} against a = {diff['a']}")
    return fig


def _points_table(doc: dict[str, Any]) -> str:
    head = ("run", "topology", "C", "verdict", "latency target", "goodput req/s", "tok/s/user", "tok/s/GPU working",
            "tok/s/GPU allocated", "total tok/s", "median TTFT ms", "median TPOT ms", "frontier",
            "why (click for evidence)")
    out = ["<div class=wide><table><tr>" + "".join(f"<th>{h}</th>" for h in head) + "</tr>"]
    for p in doc["points"]:
        front = ", ".join(d for d, on in p["frontier"].items() if on) or "-"
        ev = "".join(f"<li>{_evidence(e)}</li>" for e in p["evidence"]) or "<li>no finding, no stats in window</li>"
        out.append(
            f"<tr><td>{_e(p['run'])}</td><td>{_e(p['topology'])}</td><td class=num>{number(p['concurrency'])}</td>"
            f"<td class=verdict style='color:{VERDICT_COLOUR.get(p['verdict'], '#333')}'>{_e(p['verdict'])}</td>"
            f"<td>{_e(_target_text(p))}</td><td class=num>{_goodput(p)}</td>"
            f"<td class=num>{number(p['tok_s_per_user'], 1)}</td>"
            f"<td class=num>{number(p['tok_s_per_gpu']['working'], 1)}</td>"
            f"<td class=num>{number(p['tok_s_per_gpu']['allocated'], 1)}</td>"
            f"<td class=num>{number(p['total_token_throughput'])}</td><td class=num>{number(p['median_ttft_ms'], 1)}</td>"
            f"<td class=num>{number(p['median_tpot_ms'], 2)}</td><td>{front}</td>"
            f"<td><details id='{_anchor(p['run'], p['concurrency'])}'><summary>{_e(p['reason'])}</summary>"
            f"<div class=note>window {_e(p['started'])} .. {_e(p['ended'])}</div><ul>{ev}</ul></details></td></tr>")
    return "\n".join([*out, "</table></div>"])


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
                + (f": decode at {util * 100:,.0f} % of its capacity" if util is not None else ""))
    return _e(", ".join(f"{k} {v}" for k, v in e.items() if k != "kind"))


def _rows(head: tuple[str, ...], rows: list[tuple[Any, ...]]) -> str:
    body = "".join("<tr>" + "".join(f"<td>{_e(c)}</td>" for c in r) + "</tr>" for r in rows)
    return ("<div class=wide><table><tr>" + "".join(f"<th>{_e(h)}</th>" for h in head)
            + f"</tr>{body}</table></div>")


def _runs_table(doc: dict[str, Any]) -> str:
    rows = []
    for r in doc["runs"]:
        best = r["best"] or {}
        tpg = best.get("tok_s_per_gpu", {})
        rows.append((r["label"], r["topology"], r["header"].get("job"), r["gpus"].get("working_gpus"),
                     r["gpus"].get("allocated_gpus"), number(best.get("concurrency")), number(tpg.get("working")),
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
        f"{_e(p['run'])} C={number(p['concurrency'])} {_e(p['verdict'])}: {_e(p['reason'])}" for p in missing) + "</p>")


def _when(ts: str | None) -> str:
    return clock(datetime.fromisoformat(ts)) if ts else "-"


def _more(shown: int, total: int, what: str) -> str:
    return f"<p class=note>{number(total - shown)} more {what} (diag report --format json lists them all)</p>" \
        if total > shown else ""


def _set_aside_html(items: list[dict[str, Any]], what: str) -> str:
    """Consequences or noise: what was set aside and why, the first :data:`SET_ASIDE_ROWS`."""
    if not items:
        return f"<p class=note>{_e(what)}: none</p>"
    rows = [(_when(s["ts"]), s["endpoint"], s["text"],
             s["reason"], s["at"]) for s in items[:SET_ASIDE_ROWS]]
    return (f"<b>{_e(what)}</b>" + _rows(("time", "endpoint", "set aside", "why", "file:line"), rows)
            + _more(len(rows), len(items), what))


def postmortem_html(run: dict[str, Any]) -> str:
    """A failed run's postmortem: when it failed and what marks it, the root causes with the owner of each
    fix and why, the first error at file:line, the consequences and noise set aside with their reasons."""
    pm = run["postmortem"]
    if pm is None:
        return ""
    mark = next((e for e in pm["marked_by"] if e["ts"] == pm["failed_at"]), None)
    causes = "".join(
        f"<li><b>{_e(r['code'])}</b> {_e(r['text'])}: owner <span class=owner>{_e(r['owner'])}</span>"
        + (f" ({_e(r['build'] or r['engine'])})" if r["engine"] else "")
        + f"<br><span class=note>why: {_e(r['why'])}; at {_e(r['at'])}</span></li>" for r in pm["root_causes"])
    first = pm["first_error"]
    return "\n".join([
        f"<h3 id='postmortem-{_e(run['label'])}'>{_e(run['label'])}: postmortem (owner "
        f"<span class=owner>{_e(pm['owner'])}</span>)</h3>",
        f"<p>Failed at <b>{_when(pm['failed_at'])}</b>"
        + (f": {_e(mark['text'])} <span class=note>({_e(mark['at'])})</span>" if mark else "") + "</p>",
        f"<b>root causes</b><ul>{causes or '<li>none named: owner unknown</li>'}</ul>",
        f"<p>First error: {_when(first['ts'])} {_e(first['text'].removeprefix('first error: '))} "
        f"<span class=note>at {_e(first['at'])}</span></p>" if first else "<p>First error: none in the logs read</p>",
        _set_aside_html(pm["consequences"], "consequences after the failure"),
        _set_aside_html(pm["noise"], "noise the run survived before it")])


def timeline_html(run: dict[str, Any]) -> str:
    """The run's timeline table (time, kind, endpoint, event, file:line); folded under a summary unless the
    run failed."""
    events = run["timeline"]
    if not events:
        return ""
    rows = [(_when(e["ts"]), e["kind"], e["endpoint"], e["text"], e["at"]) for e in events[:TIMELINE_ROWS]]
    table = _rows(("time", "kind", "endpoint", "event", "file:line"), rows) + _more(len(rows), len(events), "events")
    summary = f"{_e(run['label'])}: timeline, {number(len(events))} events"
    return f"<details{' open' if run['postmortem'] else ''}><summary>{summary}</summary>{table}</details>"


def _events_html(doc: dict[str, Any]) -> str:
    """Every run's postmortem (a failed run) and timeline, under one heading (none when no run has either)."""
    body = "".join(postmortem_html(run) + timeline_html(run) for run in doc["runs"])
    return f"<h2 id=postmortem>Postmortem and timeline</h2>\n{body}" if body else ""


def _figure_html(fig: go.Figure, div_id: str) -> str:
    """The figure's div and its newPlot call; plotly.js itself is inlined once in the head."""
    return fig.to_html(full_html=False, include_plotlyjs=False, div_id=div_id, config=CONFIG, include_mathjax=False)


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
             + "</p>", _runs_table(doc), _no_points_html(doc), _events_html(doc), "<h2>Pareto</h2>",
             "<p class=note>Markers: ● healthy ⬢ under-loaded ▲ prefill-bound ■ decode-bound ◆ transfer-bound ✕ invalid; "
             "hollow and "
             "faded: misses the latency target. The frontier holds only valid points within the target. "
             "Click a point for its evidence. Runs take their colours in the order given (the first, the "
             "baseline, blue); endpoints over time one colour per name, the same in every report (decode lines "
             "wider).</p>",
             _figure_html(pareto_figure(doc), "pareto"), _undrawn_html(doc),
             "<h2>Verdict per sweep point</h2>", _points_table(doc),
             "<h2>Per run: throughput and latency against concurrency</h2>",
             _figure_html(curves_figure(doc), "curves"), "<h2>Per endpoint over time</h2>"]
    for i, run in enumerate(doc["runs"]):
        parts.append(_figure_html(series_figure(doc, run["label"]), f"series-{i}"))
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
                  f"<b>tok/s per GPU</b> <span class=note>{_e(diff['delta_basis'])}.</span>",
                  _figure_html(delta_figure(diff), f"delta-{i}")]
    body = "\n".join(parts)
    return (f"<!DOCTYPE html>\n<html lang=en><head><meta charset=utf-8><title>diag report</title>"
            f"<style>{CSS}</style><script>{PLOTLY_BUNDLE.read_text(encoding='utf-8')}</script></head><body>\n"
            f"{body}\n{CLICK_JS}</body></html>\n")
