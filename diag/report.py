"""The report of a run: findings, verdicts, per-endpoint summaries and health, topology, balance, throughput
(:mod:`diag.throughput`) and the header facts, computed once by ``diag.pipeline.analyze``.

Every emitter (text, JSON, JSONL, the TUI) renders a :class:`Report`; none computes its own.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import polars as pl

from diag.parsers.engine import EngineAdapter
from diag.parsers.histogram import KEYS, QUANTILES, column
from diag.parsers.records import Preemption
from diag.parsers.stages import STAGES
from diag.rules.catalog import HEALTH_STATES, catalog, health_of
from diag.rules.engine import fold_cascades
from diag.rules.engine import key as finding_key
from diag.rules.finding import Finding
from diag.rules.outcome import fails, worst_severity
from diag.rules.postmortem import Event, Postmortem
from diag.rules.present import duration, number
from diag.rules.runmodel import Endpoint, Run
from diag.rules.templating import log_empty
from diag.rules.verdict import Verdict, Verdicts, limiting_endpoints
from diag.rules.verdict_catalog import verdict_catalog
from diag.rules.verdict_figures import active_window, default_interval_s, in_window, known_sum
from diag.rules.windows import per_engine

from .throughput import throughput_text, tokens_per_gpu

STAGE_SHORT = {s.name: s.short for s in STAGES}
STALE_S = float(verdict_catalog().params["stale_s"])   # the catalog's; a STALE endpoint's last stats line is older


@dataclass(frozen=True)
class EngineFigures:
    """One engine (DP rank) over the window its endpoint's figures are taken over: its means, whose sums
    are the endpoint's (:func:`window_figures`), and its samples and preemptions there."""

    samples: int
    prompt_tps: float | None
    gen_tps: float | None
    running: float | None
    waiting: float | None
    kv: float | None
    preemptions: int


NO_FIGURES = EngineFigures(0, None, None, None, None, None, 0)   # an engine without a sample in the window


@dataclass(frozen=True)
class EndpointSummary:
    """One endpoint as of the report's time. Its figures are taken over the run verdict's steady window
    (``window``), never over the idle tail after the benchmark."""

    id: str
    role: str
    nodes: tuple[str, ...]
    engines: int
    samples: int
    first_ts: datetime | None
    last_ts: datetime | None
    window: dict[str, Any] | None          # {"label", "start", "end"} the figures are taken over
    prompt_tps_mean: float | None          # engines summed, mean over the window
    gen_tps_mean: float | None
    running_mean: float | None
    waiting_mean: float | None
    waiting_peak: float | None             # the window's highest 10 s total
    kv_mean: float | None                  # engines averaged
    kv_peak: float | None
    preemptions: int                       # over the window
    window_samples: int                    # the stats samples the figures rest on (all engines)
    health: str                            # see endpoint_health
    phase: str                             # starting | warm-up | steady | drain | serving | idle | dead
    facts: dict[str, Any]
    startup: dict[str, Any] = field(default_factory=dict)   # Startup.to_dict as of the report's time
    latency: dict[str, dict[str, float | None]] = field(default_factory=dict)  # see endpoint_latency
    log: str | None = None                 # "empty": every log file of it has 0 bytes (else not in the JSON)
    limiting: bool = False                 # on the side the run's verdict names as the limit
    per_engine: dict[str, EngineFigures] = field(default_factory=dict)  # over ``window`` (not in the JSON)

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id, "role": self.role, "nodes": list(self.nodes), "engines": self.engines,
            "samples": self.samples, "first_ts": _iso(self.first_ts), "last_ts": _iso(self.last_ts),
            "stats": {
                "window": self.window,
                "prompt_tps_mean": _r(self.prompt_tps_mean), "gen_tps_mean": _r(self.gen_tps_mean),
                "running_mean": _r(self.running_mean), "waiting_mean": _r(self.waiting_mean),
                "waiting_peak": _r(self.waiting_peak), "kv_usage_mean": _r(self.kv_mean),
                "kv_usage_peak": _r(self.kv_peak), "preemptions": self.preemptions, "samples": self.window_samples,
                "latency_s": self.latency,
            },
            "health": self.health,
            "limiting": self.limiting,
            "phase": self.phase,
            "facts": self.facts,
            "startup": self.startup,
        } | ({"log": self.log} if self.log else {})


def _iso(t: datetime | None) -> str | None:
    return t.isoformat() if t else None


def _r(x: float | None, nd: int = 1) -> float | None:
    return None if x is None else round(float(x), nd)


def _per_interval(ep: Endpoint, col: str) -> pl.Series:
    """The endpoint's total of ``col`` per stats interval (engines summed)."""
    return per_engine(ep.stats, default_interval_s()).group_by("bucket").agg(pl.col(col).sum()).sort("bucket")[col]


def _bucket_totals(s: pl.DataFrame, col: str, carry: bool) -> pl.DataFrame:
    """``col`` summed over the engines per stats interval (``bucket``). ``carry``: an engine that logs per
    batch, not on a clock, may write no line in an interval; its last state stands until its next line."""
    pe = per_engine(s, default_interval_s())
    if not carry or not pe.height:
        return pe.group_by("bucket").agg(pl.col(col).sum())   # a max: order-free
    wide = (pe.with_columns(pl.concat_str("file", pl.lit("#"), pl.col("engine").cast(pl.Utf8)).alias("key"))
            .pivot(on="key", index="bucket", values=col, aggregate_function="last").sort("bucket"))
    held = wide.select(pl.exclude("bucket").forward_fill())
    return pl.DataFrame({"bucket": wide["bucket"], col: held.sum_horizontal()})


def _engine_means(s: pl.DataFrame) -> pl.DataFrame:
    """Each engine's means over the samples ``s`` (sorted by engine: the float sums are the same every run),
    its sample count and preemptions."""
    return (s.group_by("engine").agg(pl.col("prompt_tps", "gen_tps", "running", "waiting", "kv_usage").mean(),
                                     pl.len().alias("samples"), pl.col("preemptions").fill_null(0).sum())
            .sort("engine"))


def window_figures(ep: Endpoint, start: datetime, end: datetime) -> dict[str, Any]:
    """Rates, queues (per-engine means summed) and KV (averaged) of an endpoint over a window; peaks are
    the highest 10 s total (waiting) and the highest sample (KV); the preemptions and stats samples in it.
    A figure no sample knows is None, not 0."""
    return window_and_engines(ep, start, end)[0]


def window_and_engines(ep: Endpoint, start: datetime, end: datetime) -> tuple[dict[str, Any], dict[str, EngineFigures]]:
    """:func:`window_figures` of a window and each engine's figures over it, its samples and means taken once."""
    s = in_window(ep.stats, start, end)
    if not s.height:
        return {}, {}
    means = _engine_means(s)
    totals = _bucket_totals(s.filter(pl.col("waiting").is_not_null()), "waiting", ep.per_batch_stats)
    fig = {"prompt_tps_mean": known_sum(means["prompt_tps"]), "gen_tps_mean": known_sum(means["gen_tps"]),
           "running_mean": known_sum(means["running"]), "waiting_mean": known_sum(means["waiting"]),
           "waiting_peak": totals["waiting"].max(), "kv_mean": s["kv_usage"].mean(), "kv_peak": s["kv_usage"].max(),
           "preemptions": int(s["preemptions"].fill_null(0).sum()) + _preemption_lines(ep, start, end),
           "window_samples": s.height}
    return fig, _engines_of(means)


def _preemption_lines(ep: Endpoint, start: datetime, end: datetime) -> int:
    """Preemptions logged as lines of their own (an SGLang retraction, a V0 preemption warning) in a window."""
    return sum(1 for _, r in ep.of(Preemption) if r.ts is not None and start <= r.ts <= end)


def _engines_of(means: pl.DataFrame) -> dict[str, EngineFigures]:
    """Each engine's figures from its means over a window, by engine name."""
    return {e: EngineFigures(n, p, g, run, wait, kv, int(pre)) for e, p, g, run, wait, kv, n, pre in means.select(
        "engine", "prompt_tps", "gen_tps", "running", "waiting", "kv_usage", "samples", "preemptions").iter_rows()}


def endpoint_latency(ep: Endpoint) -> dict[str, dict[str, float | None]]:
    """Per latency histogram with data (``ttft``, ``itl``, ...): the quantiles of the last interval
    (``p50``/``p90``/``p99``, the slowest engine's), and ``p90_max``, the worst interval's p90 of the run."""
    out: dict[str, dict[str, float | None]] = {}
    for key in KEYS:
        cols = [column(key, q) for q in QUANTILES]
        if not set(cols) <= set(ep.stats.columns):  # no latency histogram in this endpoint's sources
            continue
        rows = ep.stats.filter(pl.col("ts").is_not_null() & pl.any_horizontal(pl.col(c).is_not_null() for c in cols))
        if rows.height == 0:
            continue
        last = rows.sort("ts").group_by("engine", maintain_order=True).last()
        figs: dict[str, float | None] = {f"p{round(q * 100)}": _r(last[column(key, q)].max(), 4) for q in QUANTILES}
        figs["p90_max"] = _r(rows[column(key, 0.9)].max(), 4)
        out[key] = figs
    return out


def benchmark_began(run: Run, now: datetime | None) -> bool:
    """Load reached the run by ``now``: a benchmark point started at or before it (a point whose start is
    unknown, or a run judged at no time, counts as begun)."""
    return any(b.started is None or now is None or b.started <= now for b in run.benchmark)


def endpoint_health(ep: Endpoint, findings: list[Finding], now: datetime | None, stale_s: float = STALE_S,
                    loaded: bool = True, limiting: bool = False) -> str:
    """An endpoint's health, worst first (``HEALTH_STATES``): its own standing in the run's verdict
    (``limiting``: on the side the verdict names as the limit, LIMITS) and the states the findings about
    its runtime state imply (rule catalog: ``health``, else CRIT for an error, WARN for a warning); a
    finding on what the recipe asks (DIAG-K003, the config rules) and a likely consequence of another
    finding present (an engine death elsewhere: shown folded under it) imply nothing here. Else READY
    (start-up finished, no stats line because no load came yet: ``loaded`` is false and the endpoint
    shows no work), NO STATS (no stats line although it served or may have), STALE (as of ``now``) or OK."""
    rules = catalog()
    _, folded = fold_cascades(findings)
    implied = [h for f in findings if f.endpoint == ep.id and f.code in rules and finding_key(f) not in folded
               and (h := health_of(rules[f.code], f.severity)) is not None]
    if limiting:
        implied.append("LIMITS")
    if implied:
        return min(implied, key=HEALTH_STATES.index)
    if ep.samples == 0:
        return "READY" if ep.startup.phase == "ready" and not loaded else "NO STATS"
    last = ep.stats["ts"].max()
    if now is not None and last is not None and (now - last).total_seconds() > stale_s:  # type: ignore[operator]
        return "STALE"
    return "OK"


def endpoint_summary(run: Run, ep: Endpoint, findings: list[Finding], now: datetime | None = None,
                     stale_s: float = STALE_S, verdicts: Verdicts | None = None,
                     stale_at: datetime | None = None) -> EndpointSummary:
    """An endpoint's figures over the run verdict's steady window; an endpoint with no sample there (a
    live scrape beside a finished run, one that died earlier) over its own active window, so labelled.
    ``stale_at``: the time its health is judged STALE against (default ``now``; a finished run's stats end)."""
    window, label = summary_window(verdicts), window_dict(verdicts)
    fig, per = window_and_engines(ep, *window) if window is not None else ({}, {})
    if not fig and (own := active_window(run, [ep])) is not None:   # none of its samples in the run's window
        window, label = own, {"label": "active", "start": own[0].isoformat(), "end": own[1].isoformat()}
        fig, per = window_and_engines(ep, *own)
    keys = ("prompt_tps_mean", "gen_tps_mean", "running_mean", "waiting_mean", "waiting_peak", "kv_mean", "kv_peak")
    limiting = ep.id in limiting_endpoints(run, verdicts.run if verdicts is not None else None)
    health = endpoint_health(ep, findings, stale_at or now, stale_s, loaded=benchmark_began(run, now),
                             limiting=limiting)
    empty = log_empty(run, ep)
    return EndpointSummary(ep.id, ep.role, tuple(ep.nodes), len(ep.engines), ep.samples, ep.first_ts, ep.last_ts,
                           label if fig else None, **{k: fig.get(k) for k in keys},  # type: ignore[arg-type]
                           preemptions=fig.get("preemptions", 0), window_samples=fig.get("window_samples", 0),
                           health=health, phase="unknown" if empty else endpoint_phase(ep, health, verdicts, now),
                           facts=facts_of(ep, run.engine),
                           startup=ep.startup.to_dict(now), latency=endpoint_latency(ep),
                           log="empty" if empty else None, limiting=limiting,
                           per_engine=per if fig else {})


def summary_window(verdicts: Verdicts | None) -> tuple[datetime, datetime] | None:
    """The window every endpoint figure is taken over: the run verdict's steady window."""
    return verdicts.run.window if verdicts is not None else None


def window_dict(verdicts: Verdicts | None) -> dict[str, Any] | None:
    w = summary_window(verdicts)
    if verdicts is None or w is None:
        return None
    c = verdicts.run.concurrency
    label = f"C={number(c)} steady" if c is not None else "active"
    return {"label": label, "start": w[0].isoformat(), "end": w[1].isoformat()}


PHASES = ("starting", "warm-up", "steady", "drain", "serving", "idle", "dead", "unknown")  # a run's, an endpoint's


def run_phase(verdicts: Verdicts | None, now: datetime | None) -> str:
    """Where the run stands at ``now``: a point's warm-up, steady or drain, idle between or after the
    points, ``serving`` (no points: within its active window), ``starting`` or ``dead``."""
    if verdicts is None:
        return "unknown"
    if verdicts.run.cls == "startup-stuck":
        return "starting"
    if verdicts.run.cls == "invalid" and any(c in ("DIAG-E001", "DIAG-E004") for c, _ in verdicts.run.findings):
        return "dead"
    if now is not None:
        for v in verdicts.points:
            for ph in v.phases:
                if datetime.fromisoformat(ph["start"]) <= now <= datetime.fromisoformat(ph["end"]):
                    return ph["phase"]
    if verdicts.points:
        return "idle"
    w = verdicts.run.window
    return "serving" if w is not None and now is not None and now <= w[1] else ("idle" if w is not None else "unknown")


def endpoint_phase(ep: Endpoint, health: str, verdicts: Verdicts | None, now: datetime | None) -> str:
    if health == "DOWN":
        return "dead"
    if not ep.startup.serving and ep.startup.to_dict(now).get("phase") not in ("unknown", "serving", "ready"):
        return "starting"
    phase = run_phase(verdicts, now)
    return "idle" if phase in ("dead", "starting") else phase




def stage_text(startup: dict[str, Any]) -> str:
    """The stage badge of an endpoint: ``serving``, ``ready 4m50s`` (time to ready) or, while it starts,
    the stage under way with its progress and the time it has taken so far (``CUDA graphs 14/59 3m10s``)."""
    phase = startup.get("phase", "unknown")
    if phase == "unknown":
        return "-"
    if phase == "serving":
        return "serving"
    if phase == "ready":
        return f"ready {duration(startup.get('ready_after_s'))}"
    cur = startup["stages"][-1] if startup.get("stages") else None
    if cur is None:
        return "starting"
    text = STAGE_SHORT.get(cur["stage"], cur["stage"])
    if cur.get("progress"):
        text += f" {number(cur['progress'][0])}/{number(cur['progress'][1])}"
    return f"{text} {duration(cur.get('duration_s'))}"


# the startup facts shown where the engine's adapter names none of its own (``shown_facts``)
FACT_KEYS = ("version", "architecture", "kv_role", "kv_memory_gib", "kv_cache_tokens", "max_concurrency",
             "stats_disabled", "ssm_conv_layout")


def facts_of(ep: Endpoint, engine: EngineAdapter) -> dict[str, Any]:
    """Startup facts (the ones the run's engine shows), and the flags that actually ran (orchestrator
    ``Command:`` lines)."""
    out: dict[str, Any] = {k: ep.facts[k] for k in engine.shown_facts or FACT_KEYS if k in ep.facts}
    if ep.launch:
        out["launch"] = [{k: v for k, v in p.items() if k in ("node", "flags")} for p in ep.launch]
    return out


def topology(run: Run) -> str:
    """e.g. '4x prefill (2 engines) + 1x decode (8 engines, 2 nodes)'."""
    parts = []
    for role in ("prefill", "decode", "agg", "unknown"):
        eps = [e for e in run.endpoints.values() if e.role == role]
        if not eps:
            continue
        engines = sorted({len(e.engines) for e in eps})
        nodes = sorted({len(e.nodes) for e in eps})
        desc = f"{'/'.join(map(str, engines))} engine{'s' if engines != [1] else ''}"
        if nodes and nodes != [1] and nodes != [0]:
            desc += f", {'/'.join(map(str, nodes))} nodes"
        parts.append(f"{len(eps)}x {role} ({desc})")
    return " + ".join(parts) or "no endpoints"


def balance(verdicts: Verdicts | None) -> dict[str, Any] | None:
    """Balance by capacity, not throughput, over the run verdict's steady window: where a queue stands
    (the verdict's judgment, :attr:`Verdict.queues`: no other side is named), the waiting figures,
    decode's KV and batch headroom, and the side that limits (none unless the verdict names one). In a
    closed loop both sides' request rates match by construction, so a throughput ratio says nothing
    about which side limits."""
    if verdicts is None:
        return None
    v = verdicts.run
    pre, dec = v.figures.get("prefill") or {}, v.figures.get("decode") or {}
    if not (pre or dec):
        return None

    def stat(side: dict[str, Any], key: str, how: str) -> float | None:
        return (side.get(key) or {}).get(how)

    return {"window": window_dict(verdicts), "verdict": v.cls, "limiting": v.side,
            "queues": list(v.queues),
            "prefill_waiting_per_engine": stat(pre, "waiting", "mean"), "prefill_waiting_peak": stat(pre, "waiting", "peak"),
            "decode_waiting_per_engine": stat(dec, "waiting", "mean"), "decode_running_per_engine": stat(dec, "running", "mean"),
            "decode_kv_pct": stat(dec, "kv", "mean"), "decode_kv_peak": stat(dec, "kv", "peak"),
            "decode_util": v.figures.get("decode_util")}


def balance_text(b: dict[str, Any]) -> str:
    """``queue on prefill: prefill 174.5 waiting/engine (peak 212) | decode KV 21.2 % (peak 23.3), 46.5
    running/engine, 0.0 waiting/engine | prefill limits``; the queue named is the verdict's."""
    pw, dw = b["prefill_waiting_per_engine"], b["decode_waiting_per_engine"]
    queues = b.get("queues") or []
    queue = (f"queue{'s' if len(queues) > 1 else ''} on {' and '.join(queues)}" if queues
             else "no queue standing")
    parts = [f"{queue}: prefill {number(pw, 1)} waiting/engine (peak {number(b['prefill_waiting_peak'], 0)})",
             f"decode KV {number(b['decode_kv_pct'], 1)} % (peak {number(b['decode_kv_peak'], 1)}), "
             f"{number(b['decode_running_per_engine'], 1)} running/engine, {number(dw, 1)} waiting/engine"]
    parts.append(f"{b['limiting']} limits" if b["limiting"] else "neither side limits")
    return " | ".join(parts)


def stage(run: Run) -> str:
    from diag.parsers.orchestrator import stage_of

    return stage_of([r for _, r in run.lifecycle]) if run.lifecycle else "unknown (no orchestrator log)"


def model_of(run: Run) -> str | None:
    """The served model: job metadata, recipe, else what an engine printed at startup."""
    model = (run.job.model_path if run.job else None) or (run.recipe.model_path if run.recipe else None)
    for ep in run.endpoints.values():
        cfg = ep.facts.get("engine_config")
        model = model or (cfg.get("model") if isinstance(cfg, dict) else None) or ep.facts.get("model")
    return model


def link_lines(f: Finding) -> list[str]:
    """Symptom -> cause links of a finding, one line each: what caused it, what it explains."""
    out = [f"caused by {c['code']} [{c['endpoint'] or 'run'}]" + (f": {c['note']}" if c.get("note") else "")
           for c in f.caused_by]
    if f.explains:
        out.append("explains " + ", ".join(sorted({f"{e['code']} [{e['endpoint'] or 'run'}]" for e in f.explains})))
    return out




_RECORD_KINDS = {"KVTransfer": "KV-transfer", "NixlFailure": "NIXL-failure", "KVExpiry": "KV-lease",
                 "KVLoadFailure": "KV-load-failure", "StartupFact": "start-up", "StageMark": "start-up stage",
                 "Fault": "error", "Lifecycle": "orchestrator", "SpecDecode": "spec-decode",
                 "Preemption": "preemption", "PrefixCacheRate": "prefix-cache", "RequestCounts": "request-count"}


def found_without_stats(run: Run) -> str | None:
    """What the logs held when no endpoint has a stats sample (a paste of KV-transfer lines, a start-up
    of fault lines): the records by kind, so a read that judges nothing still says what it read. Runs with
    stats or start-up stages show them in their tables."""
    if any(ep.samples or ep.startup.stages for ep in run.endpoints.values()):  # tables of their own
        return None
    kinds = Counter(_RECORD_KINDS.get(type(r).__name__, type(r).__name__) for ep in run.endpoints.values()
                    for _, r in ep.records)
    if not kinds:
        return None
    parts = [f"{number(n)} {kind} record{'s' if n != 1 else ''}" for kind, n in kinds.most_common()]
    return ", ".join(parts) + " (no stats lines)"


def header_lines(run: Run, tp: dict[str, Any] | None = None) -> list[tuple[str, str]]:
    """The run header: job, model, topology, build, stage, span, throughput (``tp``, the run's at its
    verdict's point: :func:`diag.throughput.throughput_text`; the best benchmark point's without one)."""
    job = run.job
    rows = [("job", f"{(job.job_id if job else None) or '-'} {(job.job_name if job else None) or ''}".strip()),
            ("model", model_of(run) or "-"), ("topology", topology(run)), (f"{run.engine.display} build", run.build or "unknown"),
            ("stage", stage(run))]
    if run.start and run.clock:
        rows.append(("span", f"{run.start.isoformat(timespec='seconds')} .. {run.clock.isoformat(timespec='seconds')}"
                             f" ({(run.clock - run.start).total_seconds() / 60:,.1f} min)"))
    if notes := sorted({n for lg in run.sources if (n := lg.clock_note)}):
        rows.append(("clock", "; ".join(notes)))
    if (found := found_without_stats(run)) is not None:
        rows.append(("found", found))
    tpg = tokens_per_gpu(run)
    if tp is not None:
        rows.append(("throughput", throughput_text(tp, tpg)))
    elif tpg:
        parts = [f"{number(tpg['total_token_throughput'])} tok/s total at concurrency {number(tpg['concurrency'])}"]
        if "per_working_gpu" in tpg:
            parts.append(f"{number(tpg['per_working_gpu'])} tok/s per working GPU ({tpg['working_gpus']})")
        if "per_allocated_gpu" in tpg and tpg.get("allocated_gpus") != tpg.get("working_gpus"):
            parts.append(f"{number(tpg['per_allocated_gpu'])} per allocated GPU ({tpg['allocated_gpus']})")
        rows.append(("throughput", "; ".join(parts)))
    return rows


@dataclass(frozen=True)
class Report:
    """What ``analyze`` concluded about a run as of ``now``; emitters only render it."""

    run: Run
    findings: tuple[Finding, ...]
    endpoints: tuple[EndpointSummary, ...]
    header: tuple[tuple[str, str], ...]
    topology: str
    stage: str
    balance: dict[str, Any] | None
    tokens_per_gpu: dict[str, Any] | None
    now: datetime | None
    fail_on: str = "error"
    verdicts: Verdicts | None = None
    phase: str = "unknown"
    throughput: dict[str, Any] | None = None   # at the verdict's point: diag.throughput.throughput
    postmortem: Postmortem | None = None       # a failed run's (rules.postmortem)
    timeline: tuple[Event, ...] = ()           # the run's events in time order (rules.postmortem.timeline)

    @property
    def verdict(self) -> Verdict | None:
        return self.verdicts.run if self.verdicts is not None else None

    @property
    def counts(self) -> dict[str, int]:
        return {sev: sum(f.severity == sev for f in self.findings) for sev in ("error", "warning", "info")}

    @property
    def errors(self) -> tuple[str, ...]:
        return self.run.errors

    @property
    def read_nothing(self) -> bool:
        """No log could be read and no benchmark result was found: nothing to judge."""
        return not any(not s.error for s in self.run.sources) and not self.run.benchmark

    @property
    def outcome(self) -> str:
        """What the run's verdict means for it (rules.outcome): the exit status follows it."""
        return self.verdict.outcome if self.verdict is not None else "unknown"

    @property
    def fails(self) -> bool:
        """The run fails ``fail_on`` (rules.outcome's table): the command that judged it exits 1."""
        return fails(self.outcome, worst_severity(f.severity for f in self.findings), self.fail_on)

    def endpoint(self, eid: str) -> EndpointSummary | None:
        return next((e for e in self.endpoints if e.id == eid), None)
