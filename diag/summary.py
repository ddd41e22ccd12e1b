"""Pure summaries of a run model: per-endpoint figures, health, topology, rate match, tok/s/GPU.

Every view (text, JSON, the TUI) renders these; none computes its own.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

import polars as pl

from diag.parsers.records import Fault
from diag.rules.finding import Finding
from diag.rules.runmodel import Endpoint, Run

HEALTH_ORDER = ("DOWN", "CRIT", "WARN", "STALE", "NO STATS", "OK")


@dataclass(frozen=True)
class EndpointSummary:
    id: str
    role: str
    nodes: tuple[str, ...]
    engines: int
    samples: int
    first_ts: datetime | None
    last_ts: datetime | None
    prompt_tps_mean: float | None
    prompt_tps_last: float | None
    gen_tps_mean: float | None
    gen_tps_last: float | None
    running_last: int | None
    waiting_last: int | None
    kv_last: float | None
    kv_max: float | None
    preemptions: int
    health: str
    facts: dict[str, Any]

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id, "role": self.role, "nodes": list(self.nodes), "engines": self.engines,
            "samples": self.samples, "first_ts": _iso(self.first_ts), "last_ts": _iso(self.last_ts),
            "stats": {
                "prompt_tps_mean": _r(self.prompt_tps_mean), "prompt_tps_last": _r(self.prompt_tps_last),
                "gen_tps_mean": _r(self.gen_tps_mean), "gen_tps_last": _r(self.gen_tps_last),
                "running_last": self.running_last, "waiting_last": self.waiting_last,
                "kv_usage_last": _r(self.kv_last), "kv_usage_max": _r(self.kv_max), "preemptions": self.preemptions,
            },
            "health": self.health,
            "facts": self.facts,
        }


def _iso(t: datetime | None) -> str | None:
    return t.isoformat() if t else None


def _r(x: float | None, nd: int = 1) -> float | None:
    return None if x is None else round(float(x), nd)


def _last_per_engine(ep: Endpoint) -> pl.DataFrame:
    """Each engine's last sample (endpoint 'last' figures sum or average these)."""
    return ep.stats.sort("ts", nulls_last=False).group_by("engine", maintain_order=True).last()


def _per_interval(ep: Endpoint, col: str) -> pl.Series:
    """The endpoint's total of ``col`` per stats interval (engines summed)."""
    return (ep.stats.filter(pl.col("ts").is_not_null())
            .group_by(pl.col("ts").dt.truncate("10s")).agg(pl.col(col).sum()).sort("ts")[col])


def health_of(ep: Endpoint, findings: list[Finding], now: datetime | None, stale_s: float) -> str:
    mine = [f for f in findings if f.endpoint == ep.id]
    if any(f.code in ("DIAG-E001", "DIAG-E004") for f in mine) or any(
            f.cause in ("engine_dead", "worker_died", "engine_failed_start") for _, f in ep.of(Fault)):
        return "DOWN"
    if any(f.severity == "error" for f in mine):
        return "CRIT"
    if any(f.severity == "warning" for f in mine):
        return "WARN"
    if ep.samples == 0:
        return "NO STATS"
    last = ep.stats["ts"].max() if ep.samples else None
    if now is not None and last is not None and (now - last).total_seconds() > stale_s:
        return "STALE"
    return "OK"


def endpoint_summary(ep: Endpoint, findings: list[Finding], now: datetime | None = None,
                     stale_s: float = 60.0) -> EndpointSummary:
    s = ep.stats
    if s.height:
        last = _last_per_engine(ep)
        prompt, gen = _per_interval(ep, "prompt_tps"), _per_interval(ep, "gen_tps")
        fig = dict(prompt_tps_mean=prompt.mean(), prompt_tps_last=last["prompt_tps"].sum(),
                   gen_tps_mean=gen.mean(), gen_tps_last=last["gen_tps"].sum(),
                   running_last=int(last["running"].sum()), waiting_last=int(last["waiting"].sum()),
                   kv_last=last["kv_usage"].mean(), kv_max=s["kv_usage"].max(),
                   preemptions=int(s["preemptions"].fill_null(0).sum()))
    else:
        fig = dict(prompt_tps_mean=None, prompt_tps_last=None, gen_tps_mean=None, gen_tps_last=None,
                   running_last=None, waiting_last=None, kv_last=None, kv_max=None, preemptions=0)
    return EndpointSummary(ep.id, ep.role, tuple(ep.nodes), len(ep.engines), ep.samples, ep.first_ts, ep.last_ts,
                           health=health_of(ep, findings, now, stale_s), facts=facts_of(ep),
                           **fig)  # type: ignore[arg-type]


FACT_KEYS = ("version", "architecture", "kv_role", "kv_memory_gib", "kv_cache_tokens", "max_concurrency",
             "max_model_len", "async_scheduling", "api_server_count", "stats_disabled", "ssm_conv_layout")


def facts_of(ep: Endpoint) -> dict[str, Any]:
    """Startup facts, and the flags that actually ran (orchestrator ``Command:`` lines)."""
    out: dict[str, Any] = {k: ep.facts[k] for k in FACT_KEYS if k in ep.facts}
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


def isl_osl(run: Run) -> tuple[int | None, int | None]:
    for src in (getattr(run.recipe, "benchmark", None), run.job):
        if src is not None and getattr(src, "isl", None) and getattr(src, "osl", None):
            return int(src.isl), int(src.osl)
    for b in run.benchmark:
        if getattr(b, "isl", None) and getattr(b, "osl", None):
            return b.isl, b.osl
    return None, None


def rate_match(run: Run) -> dict[str, Any] | None:
    """Sum of prefill prompt tok/s / ISL vs sum of decode gen tok/s / OSL (requests per second)."""
    isl, osl = isl_osl(run)
    pre = [e for e in run.endpoints.values() if e.role == "prefill" and e.samples]
    dec = [e for e in run.endpoints.values() if e.role == "decode" and e.samples]
    if not (isl and osl and pre and dec):
        return None
    p = sum(_per_interval(e, "prompt_tps").mean() or 0.0 for e in pre)
    d = sum(_per_interval(e, "gen_tps").mean() or 0.0 for e in dec)
    p_rps, d_rps = p / isl, d / osl
    return {"isl": isl, "osl": osl, "prefill_prompt_tps": round(p, 1), "decode_gen_tps": round(d, 1),
            "prefill_req_s": round(p_rps, 3), "decode_req_s": round(d_rps, 3),
            "ratio": round(p_rps / d_rps, 3) if d_rps else None}


def gpu_counts(run: Run) -> dict[str, Any]:
    """Working and allocated GPUs, from the job json or the recipe."""
    from diag.parsers.jobmeta import gpu_counts as counts

    res = None
    if run.job is not None and getattr(run.job, "resources", None):
        res = run.job.resources
    elif run.recipe is not None:
        res = (getattr(run.recipe, "data", None) or {}).get("resources")
    if not res:
        return {}
    try:
        return dict(counts(res))
    except (TypeError, ValueError, ZeroDivisionError):
        return {}


def tokens_per_gpu(run: Run) -> dict[str, Any] | None:
    """Best total token throughput of the benchmark per GPU, with its denominator named."""
    best = max((b for b in run.benchmark if getattr(b, "total_token_throughput", None)),
               key=lambda b: b.total_token_throughput, default=None)
    if best is None:
        return None
    g = gpu_counts(run)
    working = best.total_gpus or g.get("working_gpus") or g.get("working")
    allocated = g.get("allocated_gpus") or g.get("allocated")
    out: dict[str, Any] = {"concurrency": best.concurrency, "total_token_throughput": best.total_token_throughput}
    if working:
        out["per_working_gpu"] = round(best.total_token_throughput / working, 1)
        out["working_gpus"] = working
    if allocated:
        out["per_allocated_gpu"] = round(best.total_token_throughput / allocated, 1)
        out["allocated_gpus"] = allocated
    return out


def stage(run: Run) -> str:
    try:
        from diag.parsers.orchestrator import stage_of
    except ImportError:  # pragma: no cover
        return "unknown"
    return stage_of([r for _, r in run.lifecycle]) if run.lifecycle else "unknown (no orchestrator log)"
