"""What the P/D sample runs of the engines beside vLLM (make_sglang.py, make_trtllm.py) share: srtctl's sweep
log, Dynamo's per-request noise on a worker, the transfer-failure schedule, the recipe's flag blocks and the
vLLM writers' view of a scenario (benchmark results, the frontend log)."""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

import make_samples as ms
from make_samples import ISL, MODEL, OSL, Proc, Timeline, sec, write

Emit = Callable[..., None]          # Ctx.R: (t, level, target, msg, **fields)


def noise(emit: Emit, tl: Timeline, role: str, rng: random.Random) -> None:
    """Dynamo per-request lines on each worker while a point runs."""
    tgt = "dynamo_runtime::pipeline::network::ingress::push_handler"
    for seg in tl.segs:
        t = seg.t0
        while t < seg.t1:
            rid, t1 = ms.uid(rng), sec(t, rng.uniform(0, 20))
            emit(t1, "INFO", tgt, "request received", request_id=rid, component=role, endpoint="generate")
            t = sec(t, 20)


def transfer_fail_times(tl: Timeline, rng: random.Random) -> list[datetime]:
    """When KV transfers fail: from 40-60 s into each measured point, every 15-40 s."""
    out = []
    for seg in (s for s in tl.segs if not s.warm):
        t = sec(seg.t0, rng.uniform(40, 60))
        while t < seg.t1:
            out.append(t)
            t = sec(t, rng.uniform(15, 40))
    return out


def orchestrator(sc: Any, tl: Timeline, procs: list[Proc], *, image: str, run_name: str,
                 launch: Callable[[Proc], tuple[str, str]], gpus: tuple[int, int], arch: str
                 ) -> list[tuple[datetime, str]]:
    """sweep_<jobid>.log: the banner, then srtctl's `YYYY-MM-DD HH:MM:SS [LEVEL] msg` lines; ``launch``: a
    worker's `Env:` and `Command:` lines, ``gpus``: (prefill, decode) GPUs, ``arch``: sa-bench's model type."""
    ev: list[tuple[datetime, str]] = []
    logs = f"{ms.OUT_BASE}/{sc.job}/logs"
    nodes, head = sorted({p.node for p in procs}), procs[0].node

    def o(t: datetime, msg: str, level: str = "INFO") -> None:
        ev.append((t, f"{ms.ostamp(t)} [{level}] {msg}"))

    bar = "=" * 60
    ev += [(sc.start, line) for line in [bar, "🚀 srtctl Sweep Orchestrator", bar, f"Job ID: {sc.job}",
                                          f"Nodes: {' '.join(nodes)}", "GPUs per node: 4", f"Container: {image}",
                                          f"Start: {ms.unix_date(sc.start)}", bar]]
    t = sec(sc.start, 3)
    for msg in ["Sweep Orchestrator", f"Job ID: {sc.job}", f"Run name: {run_name}",
                f"Head node: {head}", "Starting infrastructure services (NATS, etcd)"]:
        o(t, msg)
    o(sec(t, 5), "NATS is ready")
    o(sec(t, 6), "etcd is ready")
    t = sec(tl.launch, -0.5)
    o(t, "Starting backend workers")
    for i, p in enumerate(procs):
        ts = sec(t, 0.3 * i)
        o(ts, f"Starting {p.role} worker {p.idx} on {p.node}")
        for line in launch(p):
            o(ts, line)
        o(ts, f"Log: {logs}/{p.file}")
    npf = len({p.idx for p in procs if p.role == "prefill"})
    ndec = len({p.idx for p in procs if p.role == "decode"})
    o(sec(t, 2), f"Started {len(procs)} worker processes")
    o(sec(t, 3), f"Polling http://{head}:8000/health every 10.0s for {npf} prefills and {ndec} decodes")
    tp = sec(tl.launch, 63)
    stop = tl.crash or tl.healthy
    while tp < stop:
        hp = sum(tl.ready[p.key] <= tp for p in procs if p.role == "prefill")
        o(tp, f"Model is not ready, waiting for {npf - hp} prefills and {ndec} decodes. Have {hp} prefills and 0 "
              "decodes.")
        tp = sec(tp, 60)
    te = sec(tl.bench_end, 1)
    if tl.crash:
        bad = procs[-1]
        o(sec(tl.crash, 4), f"Critical process '{bad.key}' exited with code 1", "ERROR")
        o(te, "Cleanup")
    else:
        gp, gd = gpus
        for msg in [f"Model is ready. Have {npf} prefills and {ndec} decodes.", "Server is healthy - starting benchmark",
                    "Running SA-Bench benchmark", "Script: /srtctl-benchmarks/sa-bench/bench.sh",
                    f"Command: bash /srtctl-benchmarks/sa-bench/bench.sh http://localhost:8000 {ISL} {OSL} "
                    f"{'x'.join(map(str, sc.concs))} inf /model {MODEL} true {gp + gd} {gp} {gd} 0.8 {sc.mult} 1 "
                    f"{arch} false", f"Log: {logs}/benchmark.out"]:
            o(tl.healthy, msg)
        o(tl.bench_end, "Benchmark completed successfully")
        o(te, "Cleanup")
    o(te, f"Cleaning up {len(procs) + 3} processes...")
    tend = sec(te, 40)
    ev += [(tend, "✗ Sweep failed (exit code: 1)" if tl.crash else "✓ Sweep completed successfully"),
           (tend, f"End: {ms.unix_date(tend)}")]
    return ev


def yaml_flags(d: dict, ind: int) -> str:
    """A flat mapping as recipe YAML at indent ``ind`` (strings quoted, True as true)."""
    return "\n".join(f"{' ' * ind}{k}: " + ("true" if v is True else f'"{v}"' if isinstance(v, str) else f"{v}")
                     for k, v in d.items())


def as_vllm(sc: Any) -> ms.Scn:
    """The benchmark and frontend writers' view of a scenario (they read the concurrencies, mult, kind)."""
    kind = "nixl-failures" if sc.kind == "transfer-failure" else sc.kind
    return ms.Scn(sc.name, sc.job, sc.start, sc.rack, "nightly", kind, sc.concs, sc.mult, sc.rates, pw=sc.pw)


def finish_run(sc: Any, tl: Timeline, procs: list[Proc], ctxs: dict[str, Any], rng: random.Random, run: Path,
               files: dict[str, Any], eps: dict[str, dict], *, head: dict[str, Any], image: str, run_name: str,
               launch: Callable[[Proc], str], gpus: tuple[int, int], config: str, job: dict[str, Any]) -> None:
    """A P/D run's files beside its worker logs: the frontend log, the orchestrator's sweep log, the recipe, the
    job metadata, the benchmark results and the MANIFEST (``head``: its engine's fields after the job id,
    ``eps``: the endpoints it expects)."""
    if tl.segs:
        fe = ms.frontend_log(as_vllm(sc), tl, procs, rng, {k: c.iid for k, c in ctxs.items()})
        write(run / "logs" / fe.name, fe.render())
        files[f"logs/{fe.name}"] = fe.manifest()
    ev = orchestrator(sc, tl, procs, image=image, run_name=run_name, launch=launch, gpus=gpus, arch="qwen3_5_moe")
    write(run / "logs" / f"sweep_{sc.job}.log", "".join(f"{x}\n" for _, x in sorted(ev, key=lambda e: e[0])))
    write(run / "config.yaml", config)
    meta = json.dumps(job, indent=2) + "\n"
    write(run / f"{sc.job}.json", meta)
    write(run / "logs" / f"{sc.job}.json", meta)
    results = ms.benchmark_files(as_vllm(sc), tl, rng, run, gpus=gpus) if tl.segs else []
    manifest = {"scenario": sc.name, "job_id": str(sc.job), **head, "start": sc.start.isoformat(),
                "benchmark_start": tl.segs[0].t0.isoformat(timespec="seconds") if tl.segs else None,
                "benchmark_end": tl.bench_end.isoformat(timespec="seconds") if tl.segs else None,
                "concurrencies": list(sc.concs), "completed_results": results, "files": files,
                "expect": dict(sc.expect) | {"endpoints": list(eps.values())}}
    write(run / "MANIFEST.json", json.dumps(manifest, indent=2) + "\n")
