"""Fault incidents (DIAG-E001 engine-dead, DIAG-E004 startup-failure) and accuracy (DIAG-A001).

Faults within ``window_s`` of each other are one incident; its root cause is the most specific
cause among them, and the incident is a startup or a runtime one by its cause, its traceback frames
and whether the endpoint had served. :mod:`rules.runtime` registers ``fault_incident`` and
``accuracy`` in its ``TEMPLATES``.
"""

from __future__ import annotations

from collections import Counter
from datetime import datetime
from statistics import median

from diag.parsers.records import Fault

from .catalog import Rule
from .finding import Finding
from .runmodel import Run
from .templating import _finding, _loc

# ---------------------------------------------------------------- fault incidents (E001, E004)

CAUSE_RANK = ("oom", "no_kv_memory", "kv_too_small", "ds_layout", "mamba_blocks", "kv_block_size", "nccl",
              "shm_hang", "rpc_timeout", "exception", "worker_died", "engine_failed_start", "engine_dead")
DEATH = {"engine_dead", "worker_died", "engine_failed_start"}
FATAL = {"oom", "no_kv_memory", "kv_too_small", "ds_layout", "mamba_blocks"}
CAUSE_TEXT = {
    "oom": "CUDA out of memory", "no_kv_memory": "no GPU memory left for the KV cache blocks",
    "kv_too_small": "KV cache too small for max-model-len", "ds_layout": "hybrid model without DS conv state layout",
    "mamba_blocks": "max-num-seqs above the available Mamba cache blocks", "kv_block_size": "P/D block-size mismatch",
    "nccl": "NCCL/collective failure", "kv_connector": "the KV connector crashed", "shm_hang": "a hung worker (shared-memory broadcast timeout)",
    "rpc_timeout": "an RPC to the workers timed out", "exception": "an exception",
    "worker_died": "a worker process died", "engine_failed_start": "engine failed to start",
    "engine_dead": "engine died (root cause not in the logs read)",
}


STARTUP_CAUSES = {"engine_failed_start", "kv_too_small", "no_kv_memory", "mamba_blocks"}  # ds_layout fires at the first transfer
RUNTIME_MARKERS = ("EngineDeadError", "output_handler", "execute_model", "RPC call", "serving_", "completion",
                   "generate", "step", "process_input", "run_busy_loop")
STARTUP_MARKERS = ("load_model", "determine_num_available_blocks", "profile_run", "initialize_kv_caches",
                   "from_vllm_config", "__init__", "wait_for_engine_startup", "run_engine_core", "init_device",
                   "initialization failed", "failed to start", "launch_core_engines", "make_async_mp_client")


def _phase(run: Run, group: list[tuple[str, str, Fault]], ready: datetime | None) -> str:
    """startup or runtime: the cause, then the traceback frames, then whether the endpoint had served."""
    if any(f.cause in STARTUP_CAUSES for _, _, f in group):
        return "startup"
    texts = [" ".join((f.message, f.exception or "", f.where or "", *f.frames)) for _, _, f in group]
    if any(m in t for t in texts for m in RUNTIME_MARKERS):
        return "runtime"
    if any(m in t for t in texts for m in STARTUP_MARKERS):
        return "startup"
    first = group[0][2].ts
    if ready is not None and first is not None:
        return "runtime" if first >= ready else "startup"
    for eid, _, _ in group:
        ep = run.endpoints.get(eid)
        if ep is not None and ep.samples and (first is None or ep.stats["ts"].min() <= first):
            return "runtime"
        if ep is not None and any(s.path in ep.files and (s.counts.noise.get("request", 0) or
                                                          s.counts.noise.get("access-log", 0))
                                  for s in run.sources):
            return "runtime"
    return "startup"


def _incidents(faults: list[tuple[str, str, Fault]], window_s: float) -> list[list[tuple[str, str, Fault]]]:
    groups: list[list[tuple[str, str, Fault]]] = []
    for item in faults:
        ts = item[2].ts
        if groups and (ts is None or groups[-1][-1][2].ts is None
                       or (ts - groups[-1][-1][2].ts).total_seconds() <= window_s):
            groups[-1].append(item)
        else:
            groups.append([item])
    return groups


def fault_incident(rule: Rule, run: Run) -> list[Finding]:
    p = rule.params
    faults = run.faults()
    ready = run.ready_at()
    out = []
    for group in _incidents(faults, float(p["window_s"])):
        causes = {f.cause for _, _, f in group}
        if not causes & (DEATH | FATAL):
            continue
        root = min(group, key=lambda t: (CAUSE_RANK.index(t[2].cause) if t[2].cause in CAUSE_RANK else 99,
                                          t[2].ts or datetime.min, t[2].line))
        eid, file, fault = root
        if _phase(run, group, ready) != p["phase"]:
            continue
        fan = Counter(f.cause for _, _, f in group)
        endpoints = sorted({e for e, _, _ in group})
        msg = f"{eid}: {CAUSE_TEXT.get(fault.cause, fault.cause)}"
        if fault.exception:
            msg += f" ({fault.exception[:160]})"
        if len(group) > 1:
            msg += f"; {len(group) - 1} follow-on error(s) folded in" + (
                f" across {', '.join(endpoints)}" if len(endpoints) > 1 else "")
        out.append(_finding(rule, msg, endpoint=eid, first_ts=group[0][2].ts, last_ts=group[-1][2].ts,
                            location=_loc(file, fault.traceback_line or fault.line),
                            evidence={"root_cause": fault.cause, "faults": dict(fan), "endpoints": endpoints,
                                      "line": fault.message[:300]}))
    if p["phase"] == "startup":
        out.extend(_readiness_stall(rule, run))
    return out


def _readiness_stall(rule: Rule, run: Run) -> list[Finding]:
    polls = [(f, r) for f, r in run.lifecycle if r.event == "not_ready"]
    if run.ready_at() is not None or len(polls) < rule.params.get("stall_polls", 10):
        return []
    file, last = polls[-1]
    missing = f"{last.get('waiting_prefill', '?')} prefill and {last.get('waiting_decode', '?')} decode"
    return [_finding(rule, f"workers never became ready: still waiting for {missing} worker(s) after "
                     f"{len(polls)} polls", first_ts=polls[0][1].ts, last_ts=last.ts, location=_loc(file, last.line),
                     evidence={"polls": len(polls), "last": dict(last.fields)})]


# ---------------------------------------------------------------- accuracy (A001)

def accuracy(rule: Rule, run: Run) -> list[Finding]:
    scores = run.accuracy_scores()
    if not scores:
        return []
    med = median(s for _, s in scores)
    out = []
    for label, s in scores:
        if s < rule.params["min_score"] or (len(scores) > 2 and s < rule.params["rel_drop"] * med):
            msg = f"{label}: accuracy {s:.3f} (sweep median {med:.3f})"
            hint = run.async_race_hint()
            if hint:
                msg += f"; {hint}"
            out.append(_finding(rule, msg, evidence={"score": s, "median": med, "label": label}))
    return out
