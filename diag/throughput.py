"""The run's throughput figures, computed once in analyze: the benchmark's best point per GPU, and the
throughput at the verdict's point (the useful tok/s the engines measured beside the benchmark's result),
with the header's sentence about them. Per GPU means per working GPU (the job's or recipe's resources;
allocated GPUs beside them where they differ)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from diag.rules.present import number
from diag.rules.runmodel import Run
from diag.rules.verdict import Verdict


def gpu_counts(run: Run) -> dict[str, Any]:
    """Working and allocated GPUs, from the job json or the recipe ({} where neither has a ``resources``
    mapping)."""
    from diag.parsers.jobmeta import gpu_counts as counts

    res = None
    if run.job is not None and run.job.resources:
        res = run.job.resources
    elif run.recipe is not None:
        res = run.recipe.data.get("resources")
    if not isinstance(res, Mapping) or not res:
        return {}
    try:
        return dict(counts(res))
    except (TypeError, ValueError, ZeroDivisionError):
        return {}


def tokens_per_gpu(run: Run) -> dict[str, Any] | None:
    """Best total token throughput of the benchmark per GPU, with its denominator named."""
    best = max((b for b in run.benchmark if b.total_token_throughput),
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


AGREE_FRAC = 0.02   # the engines' throughput and the benchmark's within this share of each other: one figure


def throughput(run: Run, v: Verdict | None, window: dict[str, Any] | None) -> dict[str, Any] | None:
    """The run's throughput at its verdict ``v``'s point, per working GPU: the useful tok/s the engines
    measured over its steady ``window`` (``rules.verdict_figures.useful``: a P/D decode's prompt tokens never
    count) and the benchmark's result at that point; ``agree``: both known and within AGREE_FRAC."""
    if v is None:
        return None
    engines = v.figures.get("useful") or {}
    bench = next((b for b in run.benchmark if v.concurrency and b.concurrency == v.concurrency
                  and b.total_token_throughput), None)
    if engines.get("tps") is None and bench is None:
        return None
    g = gpu_counts(run)
    working = (bench.total_gpus if bench else None) or g.get("working_gpus") or g.get("working")

    def per_gpu(tps: float | None) -> float | None:
        return round(tps / working, 1) if tps is not None and working else None

    bench_tps = bench.total_token_throughput if bench else None
    agree = (engines.get("tps") is not None and bench_tps is not None
             and abs(engines["tps"] - bench_tps) <= AGREE_FRAC * bench_tps)
    return {"concurrency": v.concurrency, "window": window, "working_gpus": working,
            "allocated_gpus": g.get("allocated_gpus") or g.get("allocated"),
            "engines": {**engines, "per_working_gpu": per_gpu(engines.get("tps"))} if engines else None,
            "benchmark": None if bench_tps is None else {"tps": bench_tps, "per_working_gpu": per_gpu(bench_tps)},
            "agree": agree}


def throughput_text(tp: dict[str, Any], best: dict[str, Any] | None) -> str:
    """The header's throughput: the benchmark's at the verdict's point (the engines' where it has none),
    the engines' beside it when the two differ by more than AGREE_FRAC, and the best point's when it is
    another one."""
    at = f" at concurrency {number(tp['concurrency'])}" if tp["concurrency"] else ""
    bench, engines = tp["benchmark"], tp["engines"] or {}
    label = tp["window"]["label"] if tp["window"] else "active"
    window = "the active window" if label == "active" else label
    if bench is not None:
        parts = [f"{number(bench['tps'])} tok/s total{at} (benchmark)"]
        head = bench["tps"]
    else:
        parts = [f"{number(engines['tps'])} tok/s total over {window} (engines; no benchmark result{at})"]
        head = engines["tps"]
    working, allocated = tp["working_gpus"], tp["allocated_gpus"]
    if working:
        parts.append(f"{number(head / working)} tok/s per working GPU ({number(working)})")
    if allocated and allocated != working:
        parts.append(f"{number(head / allocated)} per allocated GPU ({number(allocated)})")
    if bench is not None and engines.get("tps") is not None and not tp["agree"]:
        parts.append(f"engines {number(engines['tps'])} tok/s over {window}"
                     + (f" ({number(engines['per_working_gpu'])} per working GPU)" if engines["per_working_gpu"] else ""))
    if best is not None and best["concurrency"] != tp["concurrency"]:
        parts.append(f"benchmark's best {number(best['total_token_throughput'])} tok/s at concurrency "
                     f"{number(best['concurrency'])}"
                     + (f" ({number(best['per_working_gpu'])} per working GPU)" if "per_working_gpu" in best else ""))
    return "; ".join(parts)


__all__ = ["AGREE_FRAC", "gpu_counts", "throughput", "throughput_text", "tokens_per_gpu"]
