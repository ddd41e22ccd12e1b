#!/usr/bin/env python3
"""Deterministic generator of synthetic srt-slurm run directories (vLLM + NVIDIA Dynamo, disaggregated).

    python samples/make_samples.py            # rewrites samples/runs/<scenario>/ and samples/slurm-*.out
    python samples/make_samples.py --out DIR  # the same tree under DIR (the test regenerates into a tmp dir)

Every run is a Qwen3.5-397B NxDEP2 prefill + 1xDEP8 decode job (GB200; 4xDEP2 on 4 nodes unless the
scenario says otherwise) laid out like a real ``outputs/<jobid>/`` directory. The two ``sweep-*`` runs
are one concurrency sweep (256..2048) over two topologies, 4xDEP2 and 5xDEP2, for ``diag report``. The output is a pure function of this file: one seeded ``random.Random``
per scenario, fixed start times, no wall clock. Each run's ``MANIFEST.json`` is filled from what was
actually written: records are counted as they are emitted (a torn record once, glued records separately).

Why this is longer than the ~600-line guideline: on top of the shared machinery (four line formats,
startup, the 10 s stats model, orchestrator log, benchmark files) each scenario needs its own fault text
(the OOM fan-out, NIXL failures, the Prometheus capture) and the labelled ``slurm-<jobid>.out``; the brief
allows only this one module, and splitting it per scenario would scatter the shared timeline.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import derived  # samples/derived.py (this script's folder is on sys.path): runs derived from these
import telemetry  # samples/telemetry.py: Tachometer and AIPerf captures of a run

ISL, OSL = 8192, 1024
MEAN_IN, MEAN_OUT = 7373, 922  # sa-bench random_range_ratio 0.8: lengths uniform in [0.8 x, x]
MODEL, HF_PATH = "Qwen3.5-397B-A17B-NVFP4", "hf:nvidia/Qwen3.5-397B-A17B-NVFP4"
ARCH, DYNAMO_VER = "Qwen3_5MoeForConditionalGeneration", "1.2.0.dev20260526"
OUT_BASE, SITE = "/home/jdoe/srt-slurm/outputs", "/usr/local/lib/python3.12/dist-packages"
BLOCK, PF_BLOCKS, DEC_BLOCKS = 1056, 1536, 1629
PF_TOKENS, DEC_TOKENS = BLOCK * PF_BLOCKS, BLOCK * DEC_BLOCKS
# image key -> (container, vLLM version); "nightly" predates the one-line KV capacity form (2026-08-04)
IMAGES = {
    "nightly": ("vllm/vllm-openai:nightly-d223c900d85224c02f2162ee2c757a769e99f519",
                "0.26.0rc2.dev187+gd223c900d"),
    "v0.26.1": ("vllm/vllm-openai:v0.26.1", "0.26.1"),
    "nightly-sep": ("vllm/vllm-openai:nightly-3f1c2a9be04d7f1e6a2c58b0d9e31f47c6a8d215",
                    "0.27.0rc1.dev77+g3f1c2a9be"),
}
OOM = ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.50 GiB. GPU 1 has a total capacity of"
       " 184.31 GiB of which 1.73 GiB is free. Including non-PyTorch memory, this process has 182.56 GiB "
       "memory"
       " in use. Of the allocated memory 174.92 GiB is allocated by PyTorch, and 4.87 GiB is reserved by "
       "PyTorch"
       " but unallocated. If reserved but unallocated memory is large try setting"
       " PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.  See documentation for "
       "Memory"
       " Management  (https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)")
DEAD = ("vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue. See stack trace (above)"
        " for the root cause.")
V1 = f"{SITE}/vllm/v1"
NIXL_PY = f"{SITE}/vllm/distributed/kv_transfer/kv_connector/v1/nixl/worker.py"
FUTURES = "/usr/lib/python3.12/concurrent/futures/_base.py"


@dataclass(frozen=True)
class Scn:
    name: str
    job: int
    start: datetime
    rack: int
    image: str
    kind: str
    concs: tuple[int, ...]
    mult: int                # sa-bench num_prompts_mult
    rates: dict              # C -> (req/s, decode running/engine, prefill waiting, decode waiting) targets
    api1: bool = True        # --api-server-count 1 (stats lines on)
    vcolor: bool = False     # VLLM_LOGGING_COLOR=1: coloured subprocess prefix, level and time
    rust_ansi: bool = True   # False when the recipe sets DYN_SDK_DISABLE_ANSI_LOGGING=1
    kv_both: bool = False    # kv_role='kv_both' as in the shipped recipe (deprecation warning)
    pw: int = 4              # prefill workers (DEP2 each, two per node)
    bound: dict = field(default_factory=dict)   # C -> "prefill" (plateau, queue), "kv" (decode KV full) or
    #                                             "batch" (decode running pinned at max_seqs, queue on decode)
    max_seqs: int | None = None                 # decode --max-num-seqs (None: vLLM's default, not passed)
    expect: dict = field(default_factory=dict)


def _t(*a: int) -> datetime:
    return datetime(*a, tzinfo=UTC)


STD = {512: (10.9, 61, 2, 0), 1024: (14.0, 122, 4, 1)}
SCENARIOS = [
    Scn("healthy", 5123301, _t(2026, 12, 31, 23, 50, 2), 7, "nightly", "healthy", (768, 1024), 8,
        {768: (12.7, 91, 3, 1), 1024: (14.0, 122, 4, 1)}, expect={"findings": [], "verdict": {"class": "healthy", "limiter": None}}),
    Scn("prefill-bound", 4987214, _t(2026, 8, 12, 14, 5, 11), 3, "nightly", "prefill-bound", (1024, 2048), 4,
        {1024: (18.4, 47, 70, 0), 2048: (18.4, 47, 190, 0)}, expect={"findings": ["DIAG-B001"], "verdict": {"class": "prefill-bound", "limiter": None}}),
    Scn("kv-exhaustion", 5010467, _t(2026, 8, 27, 18, 12, 5), 11, "v0.26.1", "kv-exhaustion", (1024, 4096), 2,
        {1024: (14.0, 122, 3, 1), 4096: (13.0, 214, 3, 300)}, vcolor=True,
        expect={"findings": ["DIAG-K001", "DIAG-K002"],
                "verdict": {"class": "decode-bound", "limiter": "kv-capacity"}}),
    Scn("engine-crash", 5044719, _t(2026, 9, 3, 3, 44, 27), 5, "v0.26.1", "engine-crash", (512, 1024), 8, STD,
        vcolor=True, expect={"findings": ["DIAG-E001"], "root_cause": "oom", "verdict": {"class": "invalid", "limiter": None}}),
    Scn("stats-missing", 4999083, _t(2026, 8, 20, 9, 31, 40), 9, "nightly", "stats-missing", (512, 1024), 4,
        STD, api1=False, rust_ansi=False, kv_both=True,
        expect={"findings": ["DIAG-L001"], "cause": "api_server_count",
                "verdict": {"class": "healthy", "limiter": None}}),
    Scn("nixl-failures", 5078130, _t(2026, 9, 24, 11, 20, 53), 2, "nightly-sep", "nixl-failures", (512, 1024),
        4,
        {512: (10.5, 60, 2, 1), 1024: (13.4, 120, 4, 2)}, vcolor=True,
        expect={"findings": ["DIAG-E002", "DIAG-E003"],
                "verdict": {"class": "transfer-bound", "limiter": "kv-transfer failures"}}),
]
SWEEP = (256, 512, 1024, 2048)
SCENARIOS += [
    Scn("sweep-4xdep2", 5131402, _t(2026, 11, 9, 8, 2, 31), 14, "nightly", "sweep", SWEEP, 2,
        {256: (7.0, 32, 1, 0), 512: (10.9, 61, 2, 0), 1024: (13.5, 120, 3, 0), 2048: (18.4, 120, 190, 0)},
        pw=4, bound={2048: "prefill"},
        expect={"findings": ["DIAG-B001"], "verdict": {"class": "prefill-bound", "limiter": None}}),
    Scn("sweep-5xdep2", 5131417, _t(2026, 11, 9, 9, 40, 7), 15, "nightly", "sweep", SWEEP, 2,
        {256: (7.1, 32, 1, 0), 512: (11.2, 62, 1, 0), 1024: (15.5, 124, 2, 1), 2048: (19.5, 200, 3, 300)},
        pw=5, bound={2048: "kv"},
        expect={"findings": ["DIAG-K001"], "verdict": {"class": "decode-bound", "limiter": "kv-capacity"}}),
]
SCENARIOS += [
    Scn("under-loaded", 5140012, _t(2026, 11, 20, 6, 15, 3), 16, "nightly", "healthy", (128, 256), 4,
        {128: (4.1, 16, 0, 0), 256: (7.0, 32, 1, 0)},
        expect={"findings": [], "verdict": {"class": "under-loaded", "limiter": None}}),
    Scn("decode-batch", 5140077, _t(2026, 11, 20, 9, 2, 41), 17, "nightly", "healthy", (512, 1024), 4,
        {512: (10.9, 61, 2, 0), 1024: (12.2, 96, 3, 32)}, bound={1024: "batch"}, max_seqs=96,
        expect={"findings": [], "verdict": {"class": "decode-bound", "limiter": "batch/compute"}}),
]
SLURM = Scn("slurm", 5090552, _t(2026, 10, 14, 7, 58, 12), 4, "nightly", "healthy", (256,), 4,
            {256: (5.5, 60, 2, 0)})


@dataclass
class Proc:
    """One srun'd worker process (one output file)."""

    role: str
    idx: int
    node: str
    ip: str
    engines: list[int]       # global DP ranks this process hosts
    dp_size: int
    gpus: list[int]
    port_idx: int            # srtctl process index (DYN_SYSTEM_PORT = 7500 + i)
    dp_addr: str             # --data-parallel-address (rank-0 node of the endpoint)

    @property
    def file(self) -> str:
        return f"{self.node}_{self.role}_w{self.idx}.out"

    @property
    def key(self) -> str:  # srtctl ManagedProcess name, as in "Critical process '<name>' exited"
        return f"{self.role}_{self.idx}_{self.node}"


@dataclass
class Seg:
    """One sa-bench phase (warmup or measured run) at one concurrency."""

    conc: int
    warm: bool
    t0: datetime
    t1: datetime
    rate: float
    drun: int
    pwait: int
    dwait: int


@dataclass
class Timeline:
    launch: datetime
    ready: dict
    healthy: datetime
    segs: list
    bench_end: datetime
    end: datetime
    crash: datetime | None = None


# ------------------------------ line formats
def iso_us(t: datetime) -> str:
    return t.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def md(t: datetime) -> str:
    return t.strftime("%m-%d %H:%M:%S")


def ostamp(t: datetime) -> str:
    return t.strftime("%Y-%m-%d %H:%M:%S")


def unix_date(t: datetime) -> str:
    return t.strftime("%a %b %d %H:%M:%S UTC %Y")


def sec(t: datetime, s: float) -> datetime:
    return t + timedelta(seconds=s)


def uid(rng: random.Random) -> str:
    return str(uuid.UUID(int=rng.getrandbits(128), version=4))


LEVEL_COL = {"DEBUG": "34", "INFO": "32", "WARN": "33", "WARNING": "33", "ERROR": "31"}


def rust(t: datetime, level: str, target: str, msg: str, ansi: bool = True, **fields: object) -> str:
    """Dynamo Rust tracing, compact format, optionally with its ANSI colouring."""
    if not ansi:
        return f"{iso_us(t)} {level:>5} {target}: {msg}" + "".join(f" {k}={v}" for k, v in fields.items())
    fs = "".join(f" \x1b[3m{k}\x1b[0m\x1b[2m=\x1b[0m{v}" for k, v in fields.items())
    return (f"\x1b[2m{iso_us(t)}\x1b[0m \x1b[{LEVEL_COL[level]}m{level:>5}\x1b[0m "
            f"\x1b[2m{target}\x1b[0m\x1b[2m:\x1b[0m {msg}{fs}")


def dynpy(t: datetime, level: str, target: str, msg: str) -> str:
    """A vLLM/Dynamo main-process record via Dynamo's VllmColorFormatter: ANSI unconditionally."""
    ts = t.strftime("%Y-%m-%dT%H:%M:%S.") + f"{t.microsecond // 1000:03d}Z"
    return (f"\x1b[2m{ts}\x1b[0m \x1b[{LEVEL_COL[level]}m{level:>5}\x1b[0m "
            f"\x1b[2m{target}\x1b[0m\x1b[2m:\x1b[0m {msg}")


def prefix(proc: str, pid: int, color: bool) -> str:
    return f"\x1b[0;36m({proc} pid={pid})\x1b[0;0m " if color else f"({proc} pid={pid}) "


def vl(t: datetime, proc: str, pid: int, level: str, src: str, msg: str, color: bool = False) -> str:
    """A vLLM subprocess record; each line of a multi-line message gets \\r\\n + the full header."""
    if color:
        head = f"\x1b[{LEVEL_COL[level]}m{level}\x1b[0m \x1b[90m{md(t)}\x1b[0m \x1b[90m[{src}]\x1b[0m "
    else:
        head = f"{level} {md(t)} [{src}] "
    return "\r\n".join(prefix(proc, pid, color) + head + part for part in msg.split("\n"))


def tqdm_bar(label: str, n: int, secs: float) -> str:
    """A tqdm bar redrawn in place: several states on one physical line, separated by \\r."""
    parts = []
    for k in (0, n // 4, n // 2, 3 * n // 4, n):
        fill, el = k * 10 // n, int(secs * k / n)
        rate = f"{n / secs:5.2f}it/s" if k else "?it/s"
        parts.append(f"{label}: {100 * k // n:3d}%|{'█' * fill}{' ' * (10 - fill)}| {k}/{n} "
                     f"[00:{el:02d}<00:{int(secs) - el:02d}, {rate}]")
    return "\r".join(parts)


def tb(frames: list[tuple[str, int, str, str]], last: str) -> str:
    """Python traceback text; frames are (file, line, function, source line)."""
    out = ["Traceback (most recent call last):"]
    for f, ln, fn, src in frames:
        out += [f'  File "{f}", line {ln}, in {fn}', f"    {src}"]
    return "\n".join([*out, last])


# ------------------------------ one output file
class WLog:
    """Events of one output file, rendered sorted by time (stable); an event is one or more physical lines."""

    COUNTS = ("kv_transfer_lines", "nixl_failure_lines", "kv_expiry_lines", "kv_invalid_lines",
              "kv_load_failure_lines", "torn_records", "glued_lines", "crlf_records")

    def __init__(self, name: str, role: str, worker: int, node: str, engines: list[int]):
        self.name, self.role, self.worker, self.node, self.engines = name, role, worker, node, engines
        self.ev: list[tuple[datetime, int, str]] = []
        self.stats: dict[int, list[dict]] = {e: [] for e in engines}                    # written records
        self.hidden: dict[int, list[tuple[datetime, dict]]] = {e: [] for e in engines}  # the model's values
        self.n: Counter = Counter()

    def add(self, t: datetime, text: str, *counts: str) -> None:
        self.ev.append((t, len(self.ev), text))
        self.n.update(counts)

    def render(self) -> str:
        return "".join(f"{x}\n" for _, _, x in sorted(self.ev, key=lambda e: e[:2]))

    def manifest(self) -> dict:
        eng = {f"{e}": {"stats_records": len(rows), "first": rows[0] if rows else None,
                        "last": rows[-1] if rows else None} for e, rows in self.stats.items()}
        return {"role": self.role, "worker": self.worker, "node": self.node, "engines": self.engines,
                "engine_stats": eng, **{k: self.n[k] for k in self.COUNTS}}


# ------------------------------ topology and time
def topology(sc: Scn) -> list[Proc]:
    """sc.pw DEP2 prefill processes (2 per node) and the DEP8 decode endpoint as one process per node."""
    pn = pf_nodes(sc)
    nodes = [f"gb200-r{sc.rack:02d}-n{12 + i}" for i in range(pn + 2)]
    ip = [f"10.0.{sc.rack}.{12 + i}" for i in range(pn + 2)]
    procs = [Proc("prefill", w, nodes[w // 2], ip[w // 2], [0, 1], 2, [2 * (w % 2), 2 * (w % 2) + 1], w,
                  ip[w // 2]) for w in range(sc.pw)]
    return procs + [Proc("decode", 0, nodes[pn + k], ip[pn + k], list(range(4 * k, 4 * k + 4)), 8,
                         [0, 1, 2, 3], sc.pw + k, ip[pn]) for k in range(2)]


def pf_nodes(sc: Scn) -> int:
    return (sc.pw + 1) // 2


def slurm_topology(sc: Scn) -> list[Proc]:
    n = [(f"gb200-r{sc.rack:02d}-n{30 + i}", f"10.0.{sc.rack}.{30 + i}") for i in range(3)]
    return [Proc("prefill", 0, *n[0], [0, 1], 2, [0, 1], 0, n[0][1]),
            Proc("prefill", 1, *n[1], [0, 1], 2, [0, 1], 1, n[1][1]),
            Proc("decode", 0, *n[2], [0, 1, 2, 3], 4, [0, 1, 2, 3], 2, n[2][1])]


def timeline(sc: Scn, procs: list[Proc], rng: random.Random) -> Timeline:
    tl = schedule(sc, procs, rng, launch_s=29, ready_s={"prefill": 262, "decode": 318}, jitter_s=25)
    if sc.kind == "engine-crash":
        last = tl.segs[-1]
        tl.crash = sec(last.t0, 0.41 * (last.t1 - last.t0).total_seconds())
        last.t1 = tl.crash
        tl.bench_end, tl.end = sec(tl.crash, 35), sec(tl.crash, 38)
    return tl


def schedule(sc: Any, procs: list[Proc], rng: random.Random, *, launch_s: float, ready_s: dict[str, float],
             jitter_s: float) -> Timeline:
    """A run's clock: the launch, each worker ready (its role's start-up time plus jitter), the health poll
    that sees them all, then each concurrency's warm-up and measured segment (``sc.rates``, ``sc.mult``)."""
    launch = sec(sc.start, launch_s)
    ready = {p.key: sec(launch, ready_s[p.role] + rng.uniform(0, jitter_s)) for p in procs}
    wait = (max(ready.values()) - launch).total_seconds()
    healthy = sec(launch, 3 + 10 * math.ceil((wait - 3) / 10))   # the 10 s health poll that sees everyone
    t, segs = sec(healthy, 2), []
    for c in sc.concs:
        rate, drun, pw, dw = sc.rates[c]
        for warm in (True, False):
            dur = c * (1 if warm else sc.mult) / rate
            segs.append(Seg(c, warm, t, sec(t, dur), rate, drun, pw, dw))
            t = sec(t, dur + (4 if warm else 7))
    return Timeline(launch, ready, healthy, segs, t, sec(t, 2))


def seg_at(tl: Timeline, t: datetime) -> Seg | None:
    return next((s for s in tl.segs if s.t0 <= t < s.t1), None)


# ------------------------------ the stats model
def mk(ptps: float, gen: float, run: int, wait: int, pre: int | None, kv: float, ext: float | None) -> dict:
    return {"prompt_tps": round(max(float(ptps), 0.0), 1), "gen_tps": round(max(float(gen), 0.0), 1),
            "running": run, "waiting": max(wait, 0), "preemptions": pre,
            "kv_usage": round(max(float(kv), 0.0), 1), "prefix_hit": 0.0, "ext_hit": ext}


def stats_for(sc: Scn, role: str, seg: Seg, t: datetime, rng: random.Random, n_pf: int, n_dec: int) -> dict:
    """One engine's stats for the 10 s ending at t: steady targets from sc.rates, ramps at segment ends."""
    frac = (t - seg.t0) / (seg.t1 - seg.t0)
    env = max(0.08, min(1.0, frac / 0.05, (1.0 - frac) / 0.07))

    def g(s: float) -> float:
        return 1 + rng.gauss(0, s)

    if role == "prefill":
        ptps = seg.rate * MEAN_IN / n_pf * env * g(0.05)
        wait = rng.randint(0, seg.pwait)
        if sc.kind == "prefill-bound" or sc.bound.get(seg.conc) == "prefill":   # flat at the plateau, queue growing
            tail = 1.0 if frac < 0.93 else env
            ptps = 17000 * g(0.025) * tail
            wait = int(seg.pwait * min(1.0, 0.08 + frac / 0.4) * g(0.05) * tail)
        run = min(3, max(1, round(ptps / 6000)))
        kv = (run + rng.randint(2, 9)) * ISL / PF_TOKENS * 100   # + blocks held until decode pulls them
        return mk(ptps, seg.rate / n_pf * env * g(0.2), run, wait, None, kv, None)
    run = max(1, int(seg.drun * env * g(0.03)))
    gen = seg.rate * MEAN_OUT / n_dec * env * g(0.04)
    kv = run * (MEAN_IN + MEAN_OUT / 2) / DEC_TOKENS * 100 * g(0.02)
    wait, pre, ptps = rng.randint(0, seg.dwait), None, 0.0
    if sc.bound.get(seg.conc) == "batch" and sc.max_seqs and env > 0.5:   # the batch is full: a queue on decode
        run = sc.max_seqs - (1 if rng.random() < 0.2 else 0)
        kv = run * (MEAN_IN + MEAN_OUT / 2) / DEC_TOKENS * 100 * g(0.02)
        wait = int(seg.dwait * min(1.0, 0.1 + frac / 0.5) * g(0.05))
    if ((sc.kind == "kv-exhaustion" and seg.conc >= 4096) or sc.bound.get(seg.conc) == "kv") and env > 0.5:
        kv = 95.2 + 4.6 * rng.random()
        wait = int(seg.dwait * min(1.0, 0.1 + frac / 0.5) * g(0.05))
        pre = rng.choice([None, 1, 2, 2, 3, 5, 8])
        ptps = (pre or 0) * MEAN_IN / 10 * g(0.1)   # preempted requests are recomputed locally
    return mk(ptps, gen, run, wait, pre, min(kv, 99.9), 99.9)


def stats_msg(e: int, s: dict) -> str:
    parts = [f"Avg prompt throughput: {s['prompt_tps']:.1f} tokens/s",
             f"Avg generation throughput: {s['gen_tps']:.1f} tokens/s",
             f"Running: {s['running']} reqs", f"Waiting: {s['waiting']} reqs"]
    if s["preemptions"] is not None:
        parts.append(f"Preemptions: {s['preemptions']}")
    parts += [f"GPU KV cache usage: {s['kv_usage']:.1f}%", f"Prefix cache hit rate: {s['prefix_hit']:.1f}%"]
    if s["ext_hit"] is not None:
        parts.append(f"External prefix cache hit rate: {s['ext_hit']:.1f}%")
    return f"Engine {e:03d}: " + ", ".join(parts)


def kv_metrics(rng: random.Random, ok: int, failed: int | None, expired: int) -> str:
    """The NIXL line; the two failure keys exist only in builds after vLLM PR #55854."""
    x, mb = rng.uniform(31, 58), rng.uniform(88, 104)
    v = {"Num successful transfers": ok, "Avg xfer time (ms)": round(x, 3), "P90 xfer time "
                                                                            "(ms)": round(x * 1.43, 3),
         "Avg post time (ms)": round(rng.uniform(0.6, 1.2), 3), "P90 post time "
                                                                "(ms)": round(rng.uniform(1.3, 2.4), 3),
         "Avg MB per transfer": round(mb, 3), "Throughput (MB/s)": round(mb / x * 1000, 3),
         "Avg number of descriptors": round(rng.uniform(1640, 1660), 1)}
    if not ok:
        v = dict.fromkeys(v, 0)
    if failed is not None:
        v |= {"Num failed transfers": failed, "Num KV expired reqs": expired}
    return "KV Transfer metrics: " + ", ".join(f"{k}={val}" for k, val in v.items())


# ------------------------------ recipe-derived text
def kv_role(sc: Scn, role: str) -> str:
    return "kv_both" if sc.kv_both else ("kv_producer" if role == "prefill" else "kv_consumer")


def recipe_flags(sc: Scn, role: str, dp: int) -> dict:
    kvc = {"kv_connector": "NixlConnector", "kv_role": kv_role(sc, role), "kv_load_failure_policy": "fail"}
    f = {"kv-transfer-config": json.dumps(kvc), "served-model-name": MODEL, "tensor-parallel-size": 1,
         "pipeline-parallel-size": 1, "data-parallel-size": dp, "enable-expert-parallel": True,
         "no-disable-hybrid-kv-cache-manager": True, "generation-config": "vllm",
         "no-enable-prefix-caching": True,
         "async-scheduling": True, "stream-interval": 100, "mamba-ssm-cache-dtype": "bfloat16",
         "language-model-only": True, "max-model-len": 9216}
    if role == "prefill":
        f["max-num-batched-tokens"] = 16384
    elif max(sc.concs) >= 4096:
        f["max-cudagraph-capture-size"] = 640
    if role == "decode" and sc.max_seqs:
        f["max-num-seqs"] = sc.max_seqs
    if sc.api1:
        f["api-server-count"] = 1
    return f


def recipe_env(sc: Scn) -> dict:
    env = {"DYN_LOG": "info"} | ({} if sc.rust_ansi else {"DYN_SDK_DISABLE_ANSI_LOGGING": "1"})
    return env | {"VLLM_LOGGING_COLOR": "1" if sc.vcolor else "0", "VLLM_SSM_CONV_STATE_LAYOUT": "DS"}


def nondefault_args(sc: Scn, p: Proc, eid: str) -> str:
    d = {"model": "/model", "served_model_name": [MODEL], "generation_config": "vllm", "max_model_len": 9216,
         "data_parallel_size": p.dp_size, "data_parallel_size_local": len(p.engines),
         "data_parallel_start_rank": p.engines[0], "data_parallel_address": p.dp_addr,
         "data_parallel_rpc_port": 13345, "data_parallel_hybrid_lb": True, "enable_expert_parallel": True}
    d |= {"api_server_count": 1} if sc.api1 else {}
    d |= {"enable_prefix_caching": False, "mamba_ssm_cache_dtype": "bfloat16", "async_scheduling": True,
          "stream_interval": 100, "language_model_only": True}
    d |= {"max_num_batched_tokens": 16384} if p.role == "prefill" else {}
    body = ", ".join(f"{k!r}: {v!r}" for k, v in d.items())
    kvc = (f"KVTransferConfig(kv_connector='NixlConnector', engine_id='{eid}', kv_buffer_device='cuda', "
           f"kv_buffer_size=1000000000.0, kv_role='{kv_role(sc, p.role)}', kv_rank=None, kv_parallel_size=1, "
           "kv_ip='127.0.0.1', kv_port=14579, kv_connector_extra_config={}, kv_connector_module_path=None, "
           "enable_permute_local_kv=False, kv_load_failure_policy='fail')")
    return f"non-default args: {{{body}, 'kv_transfer_config': {kvc}}}"


def engine_config(ver: str, p: Proc, cap: int) -> str:
    sizes = sorted([1, 2, 4, *range(8, 256, 8), *range(256, cap + 1, 16)], reverse=True)
    return (f"Initializing a V1 LLM engine (v{ver}) with config: model='/model', speculative_config=None, "
            "tokenizer='/model', skip_tokenizer_init=False, tokenizer_mode=auto, revision=None, "
            "trust_remote_code=False, dtype=torch.bfloat16, max_seq_len=9216, download_dir=None, "
            "load_format=auto, tensor_parallel_size=1, pipeline_parallel_size=1, "
            f"data_parallel_size={p.dp_size}, "
            "decode_context_parallel_size=1, quantization=modelopt_fp4, enforce_eager=False, "
            "kv_cache_dtype=auto, "
            f"device_config=cuda, seed=0, served_model_name={MODEL}, enable_prefix_caching=False, "
            "enable_chunked_prefill=True, pooler_config=None, compilation_config={'mode': 3, "
            f"'cudagraph_mode': [2, 1], 'cudagraph_capture_sizes': {sizes}, 'max_cudagraph_capture_size': "
            f"{cap}}}")


# ------------------------------ worker logs
@dataclass
class Ctx:
    """Per-file state shared by the writers of one worker log."""

    sc: Scn
    p: Proc
    tl: Timeline
    rng: random.Random
    log: WLog
    eid: str          # NIXL engine_id of the endpoint (ranks append _dp<k>)
    pids: dict
    head_ip: str
    iid: int          # Dynamo instance id
    dec_eid: str = ""

    def R(self, t: datetime, level: str, target: str, msg: str, **f: object) -> None:
        self.log.add(t, rust(t, level, target, msg, self.sc.rust_ansi, **f))

    def P(self, t: datetime, level: str, target: str, msg: str) -> None:
        self.log.add(t, dynpy(t, level, target, msg))

    def V(self, t: datetime, proc: str, level: str, src: str, msg: str, *counts: str) -> None:
        multi = ("crlf_records",) if "\n" in msg else ()
        self.log.add(t, vl(t, proc, self.pids[proc], level, src, msg, self.sc.vcolor), *counts, *multi)


def new_ctx(sc: Scn, p: Proc, tl: Timeline, rng: random.Random, head_ip: str) -> Ctx:
    pids = {"main": rng.randint(2000, 9000)}
    pids["APIServer"] = pids["main"] + rng.randint(300, 400)
    pids |= {f"ApiServer_{k}": pids["APIServer"] + k for k in range(len(p.engines))}
    for e in p.engines:
        pids[f"EngineCore_DP{e}"] = pids["main"] + rng.randint(500, 900)
        pids[f"Worker_DP{e}_EP{e}"] = pids[f"EngineCore_DP{e}"] + rng.randint(40, 90)
    log = WLog(p.file, p.role, p.idx, p.node, p.engines)
    return Ctx(sc, p, tl, rng, log, uid(rng), pids, head_ip, rng.getrandbits(52))


def startup(c: Ctx) -> None:
    """Install, Dynamo runtime, vLLM config, per-engine init (NCCL, weights, KV, NIXL, CUDA graphs), ready."""
    sc, p, rng = c.sc, c.p, c.rng
    t0 = sec(c.tl.launch, rng.uniform(1, 3))
    span = (c.tl.ready[p.key] - t0).total_seconds()

    def at(f: float) -> datetime:
        return sec(t0, f * span)

    ver, old = IMAGES[sc.image][1], sc.image == "nightly"
    cap = 640 if p.role == "decode" and max(sc.concs) >= 4096 else 1024
    blocks = PF_BLOCKS if p.role == "prefill" else DEC_BLOCKS
    c.log.add(at(0), f"Installing ai-dynamo=={DYNAMO_VER} into /opt/dynamo/venv (setup_script: none)")
    c.log.add(at(0.04), f"Successfully installed ai-dynamo-{DYNAMO_VER} ai-dynamo-runtime-{DYNAMO_VER}")
    c.R(at(0.05), "INFO", "dynamo_runtime::distributed", "Initializing distributed runtime",
        namespace="dynamo", request_plane="tcp")
    c.R(at(0.051), "INFO", "dynamo_runtime::transports::etcd", "Connected to etcd",
        endpoints=f'["http://{c.head_ip}:2379"]')
    c.R(at(0.052), "INFO", "dynamo_runtime::transports::nats", "Connected to NATS server",
        url=f"nats://{c.head_ip}:4222")
    main = [("utils.log_non_default_args", nondefault_args(sc, p, c.eid)),
            ("model._resolve_architecture", f"Resolved architecture: {ARCH}"),
            ("model.__post_init__", "Using max model len 9216")]
    if not sc.api1:
        main.append(("arg_utils.create_engine_config", "Defaulting api_server_count to "
                                                       "data_parallel_size_local "
                     f"({len(p.engines)}) for hybrid LB mode."))
    main.append(("scheduler.__post_init__", "Chunked prefill is enabled with max_num_batched_tokens=16384."))
    if old:   # the line was removed from vLLM on 2026-07-31 (#50590)
        main.append(("vllm.__post_init__", "Asynchronous scheduling is enabled."))
    main.append(("config.verify_and_update_config", f"Setting attention block size to {BLOCK} tokens to "
                                                    "ensure "
                 "that attention page size is >= mamba page size."))
    if sc.kv_both:
        main.append(("kv_transfer.__post_init__", "Using kv_role='kv_both' with NixlConnector is deprecated "
                                                  "and "
                     "will be removed in a future release. Please set kv_role='kv_producer' for prefill "
                     "instances "
                     "and kv_role='kv_consumer' for decode instances."))
    main += [("factory.create_connector", "Creating v1 connector with name: NixlConnector and engine_id: "
                                          f"{c.eid}"),
             ("utils.launch_core_engines", f"Started DP Coordinator process (PID: {c.pids['main'] + 211})")]
    for i, (target, msg) in enumerate(main):
        c.P(at(0.06 + 0.003 * i), "WARN" if "deprecated" in msg else "INFO", target, msg)
    for li, e in enumerate(p.engines):
        engine_startup(c, at, li, e, ver, old, cap, blocks, span)
    c.P(at(0.95), "INFO", "main.setup_vllm_engine",
        f"Cache config values: {{'num_gpu_blocks': {blocks}, 'block_size': {BLOCK}}}")
    c.P(at(0.95), "INFO", "main.setup_vllm_engine",
        f"Scheduler config values: {{'max_num_seqs': {(p.role == 'decode' and sc.max_seqs) or 1024}, "
        "'max_num_batched_tokens': 16384}")
    if not sc.api1:
        for k in range(len(p.engines)):
            c.V(at(0.96), f"ApiServer_{k}", "WARNING", "loggers.py:1201", "AsyncLLM created with "
                                                                          "api_server_count "
                "more than 1; disabling stats logging to avoid incomplete stats.")
    tcp = "dynamo_runtime::pipeline::network::tcp::server"
    c.R(at(0.97), "INFO", tcp, "Endpoint starting with request plane mode: tcp")
    port = 30000 + rng.randint(0, 9999)
    for ep in ("generate", "clear_kv_blocks", "load_lora", "unload_lora", "list_loras"):
        c.R(at(0.98), "INFO", tcp, f"Registered endpoint '{ep}' with shared TCP server on {p.ip}:{port}")
    c.P(c.tl.ready[p.key], "INFO", "main.init", f"VllmWorker for {MODEL} has been initialized")


def engine_startup(c: Ctx, at: Callable[[float], datetime], li: int, e: int, ver: str, old: bool, cap: int,
                   blocks: int, span: float) -> None:
    """One DP engine's init: EngineCore_DP<e> and its worker Worker_DP<e>_EP<e>, plus raw NCCL output."""
    p, rng = c.p, c.rng
    core, work, gpu, b = f"EngineCore_DP{e}", f"Worker_DP{e}_EP{e}", p.gpus[li], 0.1 + 0.01 * li
    if li == 0:   # printed on local DP rank 0 only
        c.V(at(b), core, "INFO", "core.py:101", engine_config(ver, p, cap))
    wpid = c.pids[work]
    nccl = [f"Bootstrap: Using eth0:{p.ip}<0>", "NCCL version 2.28.3+cuda13.0",
            f"ncclCommInitRank comm 0x{rng.getrandbits(40):x} rank {e} nranks {p.dp_size} cudaDev {gpu} "
            "nvmlDev "
            f"{gpu} busId {0x1b + 0x20 * gpu:x}000 commId 0x{rng.getrandbits(64):016x} - Init COMPLETE"]
    for k, line in enumerate(nccl):
        c.log.add(at(b + 0.02 + 0.005 * k), f"{p.node}:{wpid}:{wpid} [{gpu}] NCCL INFO {line}")
    c.V(at(b + 0.04), work, "INFO", "parallel_state.py:1367", f"rank {e} in world size {p.dp_size} is "
                                                              "assigned "
        f"as DP rank {e}, PP rank 0, PCP rank 0, TP rank 0, EP rank {e}, EPLB rank N/A")
    c.V(at(b + 0.05), work, "INFO", "mamba_utils.py:88",
        "VLLM_SSM_CONV_STATE_LAYOUT env detected. Setting SSM conv state layout to DS.")
    c.V(at(b + 0.06), work, "INFO", "qwen_gdn_linear_attn.py:214",
        "Using FlashInfer GDN prefill kernel (requested=auto, head_k_dim=128).")
    c.V(at(0.42 + 0.01 * li), work, "INFO", "default_loader.py:291",
        f"Loading weights took {rng.uniform(36, 48):.2f} seconds")
    c.V(at(0.44 + 0.01 * li), work, "INFO", "gpu_model_runner.py:3412",
        f"Model loading took 58.{rng.randint(10, 40)} GiB memory and {rng.uniform(50, 62):.6f} seconds")
    kv_gib = blocks * 0.0631
    if li == 0:   # a multi-line record: \r\n + full header per line
        c.V(at(0.52), work, "INFO", "gpu_worker.py:301",
            f"Memory profiling takes {rng.uniform(5, 8):.2f} seconds\nthe current vLLM instance can use "
            "total_gpu_memory (184.31GiB) x gpu_memory_utilization (0.92) = 169.57GiB\nmodel weights take "
            "58.21GiB; "
            "non_torch_memory takes 2.31GiB; PyTorch activation peak memory takes "
            f"{169.57 - 62.42 - kv_gib:.2f}GiB; "
            f"the rest of the memory reserved for KV Cache is {kv_gib:.2f}GiB.")
    c.V(at(0.53 + 0.01 * li), work, "INFO", "gpu_worker.py:339", f"Available KV cache memory: {kv_gib:.2f} "
                                                                 "GiB")
    tok, conc, tk = f"{blocks * BLOCK:,}", f"{blocks * BLOCK / 9216:.2f}x", at(0.55 + 0.01 * li)
    if old:   # before vLLM #50462 (2026-08-04) the capacity took two lines
        c.V(tk, core, "INFO", "kv_cache_utils.py:1291", f"GPU KV cache size: {tok} tokens")
        c.V(tk, core, "INFO", "kv_cache_utils.py:1296", "Maximum concurrency for 9,216 tokens per request: "
                                                        f"{conc}")
    else:
        c.V(tk, core, "INFO", "kv_cache_utils.py:1302",
            f"GPU KV cache size: {tok} tokens, Maximum concurrency for 9,216 tokens per request: {conc}")
    c.V(at(0.57), work, "INFO", "worker.py:402", "Initializing NIXL wrapper")
    c.V(at(0.57), work, "INFO", "worker.py:415", f"Initializing NIXL worker {c.eid}_dp{e}")
    c.V(at(0.58), work, "INFO", "worker.py:1120",
        "Registering KV_Caches. use_mla: False, kv_buffer_device: cuda, use_host_buffer: False")
    n = 3 + len(range(8, 256, 8)) + len(range(256, cap + 1, 16))
    bars = ["mixed prefill-decode, PIECEWISE"] + (["decode, FULL"] if p.role == "decode" else [])
    for k, label in enumerate(bars):
        bar = tqdm_bar(f"Capturing CUDA graphs ({label})", n, rng.uniform(7, 11))
        c.log.add(at(0.7 + 0.06 * k + 0.01 * li), prefix(work, wpid, c.sc.vcolor) + bar)
    c.V(at(0.86 + 0.01 * li), work, "INFO", "gpu_model_runner.py:4420",
        f"Graph capturing finished in {rng.randint(14, 22)} secs, took {rng.uniform(1.6, 2.4):.2f} GiB")
    c.V(at(0.9 + 0.01 * li), core, "INFO", "core.py:262", "init engine (profile, create kv cache, warmup "
                                                          "model) "
        f"took {span * rng.uniform(0.72, 0.78):.2f} s (compilation: {rng.uniform(38, 46):.2f} s)")


def runtime(c: Ctx, n_pf: int, n_dec: int, fails: list[datetime], expiries: list[datetime]) -> None:
    """Stats ticks (every 10 s, one record per engine), NIXL metrics, request noise, the messy records."""
    sc, p, tl, rng, log = c.sc, c.p, c.tl, c.rng, c.log
    origin = sec(tl.ready[p.key], rng.uniform(2, 9))
    stop = tl.crash if tl.crash and p.role == "decode" else tl.end
    prev = dict.fromkeys(p.engines, False)
    k = active = 0
    glue_at, tear_at, todo = 5 + rng.randint(0, 3), 12 + rng.randint(0, 4), {"glue", "tear"}
    while (t := sec(origin, 10 * k)) < stop:
        k += 1
        seg = seg_at(tl, t)
        recs = []
        for e in p.engines:
            if seg:
                s = stats_for(sc, p.role, seg, t, rng, n_pf, n_dec)
            elif prev[e]:   # first idle interval after activity is still INFO; later ones are DEBUG
                s = mk(0, 0, 0, 0, None, 0, 99.9 if p.role == "decode" else None)
            else:
                continue
            prev[e] = seg is not None
            recs.append((e, s))
            log.hidden[e].append((t, s))
        if not recs:
            continue
        active += 1
        mess = ("glue" if active >= glue_at and "glue" in todo else
                "tear" if active >= tear_at and "tear" in todo else "") if seg else ""
        todo.discard(mess)
        if sc.api1:
            stats_tick(c, t, seg, recs, mess, n_dec, fails, expiries)
        if seg:
            noise(c, t, "" if sc.api1 else mess, stop)


def stats_tick(c: Ctx, t: datetime, seg: Seg | None, recs: list, mess: str, n_dec: int,
               fails: list[datetime], expiries: list[datetime]) -> None:
    """The API server's periodic lines: one per engine (maybe glued / torn), then the NIXL line."""
    p, rng, log, api = c.p, c.rng, c.log, "APIServer"
    phys = [vl(t, api, c.pids[api], "INFO", "loggers.py:271", stats_msg(e, s), c.sc.vcolor) for e, s in recs]
    if mess == "glue" and len(phys) > 1:   # two records written without a newline between them
        phys[:2] = [phys[0] + phys[1]]
        log.n["glued_lines"] += 1
    elif mess == "tear":   # a record torn mid-word across two physical lines
        i = phys[-1].index("Avg generation thr") + len("Avg generation thr")
        phys[-1] = phys[-1][:i] + "\n" + phys[-1][i:]
        log.n["torn_records"] += 1
    log.add(t, "\n".join(phys))
    for e, s in recs:
        log.stats[e].append({**s, "md": md(t)})
    new_keys = c.sc.image == "nightly-sep"
    nf = sum(1 for f in fails if sec(t, -10) < f <= t)
    ne = sum(1 for f in expiries if sec(t, -10) < f <= t)
    if p.role == "decode" and seg:
        ok = max(1, int(seg.rate * 10 * len(p.engines) / n_dec * rng.uniform(0.85, 1.1)))
        c.V(sec(t, 0.01), api, "INFO", "metrics.py:121", kv_metrics(rng, ok, nf if new_keys else None, 0),
            "kv_transfer_lines")
    elif p.role == "prefill" and ne:   # lease expiries are recorded on the producer side
        c.V(sec(t, 0.01), api, "INFO", "metrics.py:121", kv_metrics(rng, 0, 0, ne), "kv_transfer_lines")


def noise(c: Ctx, t: datetime, mess: str, stop: datetime) -> None:
    """Dynamo per-request INFO lines and router selections; with stats off the messy records go here."""
    rng, tgt, an = c.rng, "dynamo_runtime::pipeline::network::ingress::push_handler", c.sc.rust_ansi

    def rx(ts: datetime, rid: str) -> str:
        return rust(ts, "INFO", tgt, "request "
                                     "received", an, request_id=rid, component=c.p.role, endpoint="generate")

    for _ in range(rng.randint(1, 2) if c.sc.api1 else rng.randint(4, 7)):
        rid, t1 = uid(rng), sec(t, rng.uniform(0.2, 9.5))
        t2 = sec(t1, rng.uniform(0.3, 2.5) if c.p.role == "prefill" else rng.uniform(30, 80))
        if t1 < stop:
            c.log.add(t1, rx(t1, rid))
        if t2 < stop:
            c.log.add(t2, rust(t2, "INFO", tgt, "request completed", an, request_id=rid, component=c.p.role,
                               endpoint="generate", elapsed_ms=int((t2 - t1).total_seconds() * 1000)))
    t3 = sec(t, rng.uniform(0, 9))
    if c.p.role == "decode" and rng.random() < 0.5 and t3 < stop:
        c.log.add(t3, rust(t3, "INFO", "dynamo_llm::kv_router::scheduling::selector",
                           f"Selected worker: worker_type=prefill, worker_id={rng.getrandbits(52)}, "
                           f"dp_rank={rng.randint(0, 1)}, logit={-rng.random():.3f}, cached_blocks=0, "
                           "tree_size=0, "
                           f"total_blocks={PF_BLOCKS}", an))
    if mess:
        ta = sec(t, rng.uniform(0, 9))
        a, b = rx(ta, uid(rng)), rx(sec(ta, 0.003), uid(rng))
        if mess == "glue":
            c.log.add(ta, a + b, "glued_lines")
        else:
            i = b.index("request rece") + len("request rece")
            c.log.add(ta, a + "\n" + b[:i] + "\n" + b[i:], "torn_records")


def shutdown(c: Ctx, t: datetime) -> None:
    c.R(t, "WARN", "dynamo_runtime::runtime", "Received SIGTERM, starting graceful shutdown")
    c.P(sec(t, 0.2), "INFO", "main.graceful_shutdown", "Shutting down vLLM engine and unregistering "
                                                       "endpoints")


# ------------------------------ faults
def inject_crash(c: Ctx) -> None:
    """engine-crash, decode node 2: EngineCore_DP5 dies of CUDA OOM, then the fan-out and the exit."""
    tc = c.tl.crash
    worker = [(f"{V1}/executor/multiproc_executor.py", 842, "worker_busy_loop", "output = func(*args, "
                                                                                "**kwargs)"),
              (f"{V1}/worker/gpu_worker.py", 721, "execute_model",
               "output = self.model_runner.execute_model(scheduler_output, intermediate_tensors)"),
              (f"{V1}/worker/gpu_model_runner.py", 3318, "execute_model", "model_output = "
                                                                          "self._model_forward("),
              (f"{SITE}/vllm/model_executor/layers/fused_moe/layer.py", 2104, "forward_impl",
               "workspace = torch.empty(workspace_shape, dtype=hidden_states.dtype, "
               "device=hidden_states.device)")]
    c.V(tc, "Worker_DP5_EP5", "ERROR", "multiproc_executor.py:851", "WorkerProc hit an "
                                                                    "exception.\n" + tb(worker, OOM))
    core = [(f"{V1}/engine/core.py", 1102, "run_engine_core", "engine_core.run_busy_loop()"),
            (f"{V1}/engine/core.py", 1421, "run_busy_loop", "self._process_engine_step()"),
            (f"{V1}/engine/core.py", 1137, "_process_engine_step", "outputs, model_executed = "
                                                                   "self.step_fn()"),
            (f"{V1}/engine/core.py", 487, "step_with_batch_queue", "model_output = future.result()"),
            (FUTURES, 449, "result", "return self.__get_result()"),
            (f"{V1}/executor/multiproc_executor.py", 318, "get_response", "raise result")]
    c.V(sec(tc, 0.1), "EngineCore_DP5", "ERROR", "core.py:1111", "EngineCore encountered a fatal "
                                                                 "error.\n" + tb(core, OOM))
    c.V(sec(tc, 0.3), "EngineCore_DP5", "ERROR", "multiproc_executor.py:232",
        "Worker proc Worker_DP5_EP5 died unexpectedly (exit code: 1), shutting down executor.")
    handler = [(f"{V1}/engine/async_llm.py", 702, "output_handler", "outputs = await "
                                                                    "engine_core.get_output_async()"),
               (f"{V1}/engine/core_client.py", 1012, "get_output_async",
                "raise self._format_exception(outputs) from None")]
    c.V(sec(tc, 0.4), "APIServer", "WARNING", "core_client.py:655",
        "[shutdown] MPClient: engine core exited unexpectedly; starting cleanup")
    c.V(sec(tc, 0.5), "APIServer", "ERROR", "async_llm.py:745", "AsyncLLM output_handler "
                                                                "failed.\n" + tb(handler, DEAD))
    for k in range(4):   # every in-flight request's handler sees the same dead engine
        c.P(sec(tc, 0.6 + 0.05 * k), "ERROR", "handlers.generate", "Error in generate for request "
                                                                   f"{uid(c.rng)}: {DEAD}")
    c.P(sec(tc, 1.2), "ERROR", "engine_monitor._check_engine_health", "vLLM engine is dead, initiating "
                                                                      f"shutdown: {DEAD}")
    c.R(sec(tc, 1.4), "WARN", "dynamo_runtime::runtime", "Runtime shutdown requested, cancelling endpoints")
    c.P(sec(tc, 3.8), "ERROR", "main.worker", "dynamo.vllm worker exited with status 1")


def crash_prefill_side(c: Ctx) -> None:
    """engine-crash, every prefill process: transport errors, then KV leases expire with nobody reading."""
    tc, rng = c.tl.crash, c.rng
    for k in range(2):
        ts = sec(tc, 1.5 + k * 0.8 + rng.random())
        c.log.add(ts, f"[{ts.timestamp():.6f}] [{c.p.node}:{c.pids['Worker_DP0_EP0']}:0]          "
                      "sock.c:334  "
                      f"UCX  ERROR recv(fd={180 + k}) failed: Connection reset by remote peer")
    c.R(sec(tc, 2.9), "ERROR", "dynamo_runtime::pipeline::network::tcp::client",
        "Failed to send response stream: Connection reset by peer (os error 104)", request_id=uid(rng))
    for e in c.p.engines:
        c.V(sec(tc, 30 + rng.random()), f"Worker_DP{e}_EP{e}", "WARNING", "worker.py:1688",
            f"Releasing expired KV blocks for request {uid(rng)} which were retrieved by 0 remote worker(s) "
            "before "
            "lease expired.", "kv_expiry_lines")
    c.V(sec(tc, 32), f"EngineCore_DP{c.p.engines[0]}", "WARNING", "scheduler.py:688",
        f"Evicted stale remote engine {c.dec_eid}_dp5 (inactive for 31.{rng.randint(1, 9)}s).")


def nixl_events(c: Ctx, pf_eids: list[str], pf_ips: list[str]) -> list[datetime]:
    """nixl-failures, decode side: structured NIXL failures (some with tracebacks) and KV-load failures."""
    rng, out, n = c.rng, [], 0
    runs = [s for s in c.tl.segs if not s.warm]
    t = sec(runs[0].t0, rng.uniform(20, 40))
    while t < runs[-1].t1:
        if seg_at(c.tl, t):
            e, rem = rng.choice(c.p.engines), rng.randrange(len(pf_eids))
            kind = "handshake_failed" if n % 3 == 0 else "transfer_failed"
            ctx = {"failure_type": kind, "request_id": uid(rng), "engine_id": f"{c.eid}_dp{e}",
                   "remote_engine_id": pf_eids[rem], "remote_host": pf_ips[rem],
                   "remote_port": 5600 + rem % 2}
            head = f"NIXL transfer failure: {kind}"
            if kind == "transfer_failed":
                head += ". Marking blocks as invalid"
                ctx |= {"remote_request_id": uid(rng), "num_local_blocks": 8, "num_remote_blocks": 8,
                        "local_block_ids_sample": sorted(rng.sample(range(1, DEC_BLOCKS), 3)),
                        "xfer_state": "ERR"}
            msg = f"{head} | Context: {ctx!r}"
            if kind == "handshake_failed" and n % 2 == 0:
                msg += "\n" + tb([(NIXL_PY, 1388, "done_callback", "self._remote_agents[eid] = f.result()"),
                                  (FUTURES, 449, "result", "return self.__get_result()"),
                                  (NIXL_PY, 912, "_nixl_handshake", "raise RuntimeError(")],
                                 f"RuntimeError: Handshake with {ctx['remote_host']}:{ctx['remote_port']} "
                                 "timed "
                                 "out after 30.0 s")
            c.V(t, f"Worker_DP{e}_EP{e}", "ERROR", "worker.py:2207", msg, "nixl_failure_lines")
            nreq = 3 if n % 4 == 1 else rng.randint(1, 2)
            ids = "{" + ", ".join(repr(uid(rng)) for _ in range(nreq)) + "}"
            c.V(sec(t, 0.2), f"EngineCore_DP{e}", "ERROR", "scheduler.py:2071", f"Failing {nreq} request(s) "
                                                                                "due to "
                f"KV load failure (failure_policy=fail, {nreq * ISL} tokens affected). Request IDs: {ids}",
                "kv_load_failure_lines")
            out.append(t)
            n += 1
        t = sec(t, rng.uniform(35, 75))
    return out


def expiry_events(c: Ctx, invalid: bool) -> list[datetime]:
    """nixl-failures, prefill side: lease expiries and (once) blocks read for an unknown request."""
    rng, out = c.rng, []
    runs = [s for s in c.tl.segs if not s.warm]
    for k in range(rng.randint(3, 5)):
        t, e = sec(runs[0].t0, 60 + k * rng.uniform(70, 110)), rng.choice(c.p.engines)
        c.V(t, f"Worker_DP{e}_EP{e}", "WARNING", "worker.py:1688", f"Releasing expired KV blocks for request "
            f"{uid(rng)} which were retrieved by 0 remote worker(s) before lease expired.", "kv_expiry_lines")
        out.append(t)
    if invalid:
        c.V(sec(runs[-1].t0, 95), "Worker_DP1_EP1", "ERROR", "worker.py:1703", "Potentially invalid KV "
                                                                               "blocks for "
            f"unrecognized request {uid(rng)} were retrieved by a decode worker. They may have expired.",
            "kv_invalid_lines")
    return out


# ------------------------------ frontend, orchestrator
def frontend_log(sc: Scn, tl: Timeline, procs: list[Proc], rng: random.Random, iids: dict) -> WLog:
    node, an = procs[0].node, sc.rust_ansi
    log = WLog(f"{node}_frontend_0.out", "frontend", 0, node, [])

    def r(t: datetime, level: str, target: str, msg: str, **f: object) -> None:
        log.add(t, rust(t, level, target, msg, an, **f))

    t = sec(tl.launch, 4)
    r(t, "INFO", "dynamo_runtime::distributed", "Initializing distributed runtime", namespace="dynamo")
    r(sec(t, 1), "INFO", "dynamo_llm::http::service::service_v2", "Starting HTTP service on: 0.0.0.0:8000",
      address='"0.0.0.0:8000"')
    for p in procs:
        r(sec(tl.ready[p.key], 0.5), "INFO", "dynamo_llm::discovery::watcher", "added model instance",
          model_name=MODEL, component=p.role, instance_id=iids[p.key])
    t = sec(tl.launch, 3)
    while t <= tl.healthy:   # the orchestrator's health polls (probes are logged like requests)
        r(t, "INFO", "http-request: dynamo_llm::http::service::service_v2", "http response "
                                                                            "sent", method="GET",
          uri="/health", status=200 if t >= tl.healthy else 503, latency_ms=0)
        t = sec(t, 10)
    pf, dec = [p for p in procs if p.role == "prefill"], [p for p in procs if p.role == "decode"]
    metrics = "http-request: dynamo_llm::http::service::metrics"
    t = tl.segs[0].t0
    while t < tl.bench_end:
        if seg_at(tl, t):
            for _ in range(2):
                rid, xid, t1 = uid(rng), uid(rng), sec(t, rng.uniform(0, 10))
                r(t1, "INFO", metrics, "metrics: request received", request_id=rid, x_request_id=xid,
                  input_tokens=rng.randint(6554, ISL))
                el = rng.uniform(40, 90) * 1000
                t2 = sec(t1, el / 1000)
                err = tl.crash is not None and t2 > tl.crash
                r(t2, "ERROR" if err else "INFO", metrics, "metrics: request completed", request_id=rid,
                  x_request_id=xid, ttft_ms=f"{rng.uniform(300, 1500):.1f}", elapsed_ms=f"{el:.1f}",
                  output_tokens=rng.randint(819, OSL), avg_itl_ms=f"{rng.uniform(40, 70):.2f}",
                  status="error" if err else "success", prefill_worker_id=iids[rng.choice(pf).key],
                  decode_worker_id=iids[rng.choice(dec).key])
            r(sec(t, rng.uniform(0, 10)), "INFO", "dynamo_llm::kv_router::scheduling::selector",
              f"Selected worker: worker_type=decode, worker_id={iids[rng.choice(dec).key]}, "
              f"dp_rank={rng.randint(0, 7)}, logit={-rng.random():.3f}, cached_blocks=0, tree_size=0, "
              f"total_blocks={DEC_BLOCKS}")
        t = sec(t, 10)
    return log


def worker_launch(sc: Scn, p: Proc, head_ip: str) -> tuple[str, str]:
    """The `Env:` and `Command:` srtctl logs for one worker (srtctl flags first, then recipe flags sorted)."""
    env = [f"HEAD_NODE_IP={head_ip}", f"ETCD_ENDPOINTS=http://{head_ip}:2379",
           f"NATS_SERVER=nats://{head_ip}:4222", f"DYN_SYSTEM_PORT={7500 + p.port_idx}",
           "DYN_REQUEST_PLANE=tcp", "DYN_SKIP_SGLANG_LOG_FORMATTING=1",
           f"VLLM_NIXL_SIDE_CHANNEL_HOST={p.ip}", "VLLM_NIXL_SIDE_CHANNEL_PORT=5600",
           f"DYN_VLLM_KV_EVENT_PORT={5200 + p.port_idx}"]
    env += [f"VLLM_PORT={20000 + 50 * p.port_idx}"] if p.dp_size == len(p.engines) else []  # not multi-node
    env += [f"{k}={v}" for k, v in recipe_env(sc).items()]
    cmd = ["python3 -m dynamo.vllm", "--model /model", f"--served-model-name {MODEL}",
           f"--disaggregation-mode {p.role}", f"--device-ids {','.join(map(str, p.gpus))}",
           f"--data-parallel-size-local {len(p.engines)}", f"--data-parallel-start-rank {p.engines[0]}",
           f"--data-parallel-address {p.dp_addr}", "--data-parallel-rpc-port "
                                                   "13345", "--data-parallel-hybrid-lb",
           "--request-plane tcp"]
    flags = recipe_flags(sc, p.role, p.dp_size)
    for k in sorted(flags):
        v = flags[k]
        if k != "served-model-name":
            cmd.append(f"--{k}" if v is True else f"--{k} '{v}'" if k == "kv-transfer-config" else f"--{k} "
                                                                                                   f"{v}")
    return f"Env: {' '.join(env)}", f"Command: {' '.join(cmd)}"


def orchestrator(sc: Scn, tl: Timeline, procs: list[Proc], fail_tail: list[str] | None,
                 labels: dict | None = None) -> list[tuple[datetime, str]]:
    """sweep_<jobid>.log: the job script's banner, then srtctl's `YYYY-MM-DD HH:MM:SS [LEVEL] msg` lines."""
    ev: list[tuple[datetime, str]] = []
    logs, cfg = f"{OUT_BASE}/{sc.job}/logs", f"{OUT_BASE}/{sc.job}/config.yaml"
    nodes, head = sorted({p.node for p in procs}), procs[0].node

    def o(t: datetime, msg: str, level: str = "INFO") -> None:
        ev.append((t, f"{ostamp(t)} [{level}] {msg}"))

    bar = "=" * 60
    ev += [(sc.start, line) for line in [
        bar, "🚀 srtctl Sweep Orchestrator", bar, f"Job ID: {sc.job}", f"Config: {cfg}",
        f"Nodes: {' '.join(nodes)}", "CPUs per node: 144", "GPUs per node: 4",
        f"Container: {IMAGES[sc.image][0]}", f"Start: {unix_date(sc.start)}", f"Runtime config: {cfg}", bar,
        "Resolved 61 packages in 14ms", "Audited 61 packages in 0.52ms"]]
    t = sec(sc.start, 3)
    run_name = f"qwen35-397b-nvfp4-gb200-disagg-{sc.name}"
    for msg in ["Sweep Orchestrator", f"Job ID: {sc.job}", f"Run name: {run_name}",
                f"Config: {cfg}", f"Head node: {head}", f"Worker nodes: {', '.join(nodes)}",
                "CPU allocation: 144 CPUs per node, 36.0 CPUs per GPU", "Starting infrastructure services "
                                                                        "(NATS, etcd)"]:
        o(t, msg)
    o(sec(t, 4), "NATS is ready")
    o(sec(t, 5), "etcd is ready")
    o(sec(t, 5), f"Ensuring model '{HF_PATH}' is cached on {len(nodes)} node(s)")
    o(sec(t, 24), "Model pre-download complete")
    t = sec(tl.launch, -0.5)
    o(t, "Starting backend workers")
    for i, p in enumerate(procs):
        ts = sec(t, 0.3 * i)
        o(ts, f"Starting {p.role} worker {p.idx} on {p.node}")
        for line in worker_launch(sc, p, procs[0].ip):
            o(ts, line)
        o(ts, f"Log: stdout (srun --label, task {labels[p.key]})" if labels else f"Log: {logs}/{p.file}")
    npf = sum(p.role == "prefill" for p in procs)
    nd = len(procs) - npf
    t = sec(t, 2)
    for dt, msg in [(0, f"Started {len(procs)} worker processes"), (0, "Starting frontend layer"),
                    (0, f"Starting dynamo frontend 0 on {head}"), (1, f"Frontend URL: http://{head}:8000"),
                    (1, "Waiting for workers to be ready..."),
                    (1, f"Waiting for server health (expecting {len(procs)} health entries: {npf}P + {nd}D "
                        "Dynamo "
                        f"generate instances; logical workers: {npf}P + 1D)..."),
                    (1, f"Polling http://{head}:8000/health every 10.0s for {npf} prefills and {nd} "
                        "decodes")]:
        o(sec(t, dt), msg)
    tp = sec(tl.launch, 63)
    while tp < tl.healthy:
        hp = sum(tl.ready[p.key] <= tp for p in procs if p.role == "prefill")
        hd = sum(tl.ready[p.key] <= tp for p in procs if p.role == "decode")
        o(tp, f"Model is not ready, waiting for {npf - hp} prefills and {nd - hd} decodes. "
              f"Have {hp} prefills and {hd} decodes.")
        tp = sec(tp, 60)
    gp = 2 * npf
    gd = sum(len(p.engines) for p in procs if p.role == "decode")
    for msg in [f"Model is ready. Have {npf} prefills and {nd} decodes.", "Server is healthy - starting "
                                                                          "benchmark",
                "Running SA-Bench benchmark", "Script: /srtctl-benchmarks/sa-bench/bench.sh",
                f"Command: bash /srtctl-benchmarks/sa-bench/bench.sh http://localhost:8000 {ISL} {OSL} "
                f"{'x'.join(map(str, sc.concs))} inf /model {MODEL} true {gp + gd} {gp} {gd} 0.8 {sc.mult} 1 "
                "qwen3_5_moe false", f"Log: {logs}/benchmark.out"]:
        o(tl.healthy, msg)
    te = sec(tl.bench_end, 1)
    if tl.crash:
        bad = next(p for p in procs if p.role == "decode" and 5 in p.engines)
        o(sec(tl.crash, 5), f"Critical process '{bad.key}' exited with code 1", "ERROR")
        o(tl.bench_end, "Benchmark failed with exit code 1", "ERROR")
        o(te, "Cleanup")
        for msg in [bar, "FAILURE DETAILS", bar, f"--- Process: {bad.key} ---", "Exit code: 1", "Node: "
                                                                                                f"{bad.node}",
                    f"Log file: {logs}/{bad.file}", "Last 50 lines of log:"]:
            o(te, msg, "ERROR")
        ev += [(te, "  " + line) for line in fail_tail or []]
    else:
        o(tl.bench_end, "Benchmark completed successfully")
        o(te, "Cleanup")
    o(te, f"Cleaning up {len(procs) + 3} processes...")
    for i, p in enumerate(procs):
        ev += [(sec(te, 1 + 0.1 * i), f"srun: error: {p.node}: task 0: Killed"),
               (sec(te, 1 + 0.1 * i), f"srun: Terminating StepId={sc.job}.{i + 2}")]
    o(sec(te, 3), "Running post-processing container (srtlog + S3 sync)...")
    o(sec(te, 41), "Post-processing complete")
    tend = sec(te, 42)
    ev += [(tend, "✗ Sweep failed (exit code: 1)" if tl.crash else "✓ Sweep completed successfully"),
           (tend, f"End: {unix_date(tend)}")]
    return ev


# ------------------------------ recipe, metadata, result
def yaml_block(d: dict, ind: int) -> str:
    def val(k: str, v: object) -> str:
        return "true" if v is True else f"'{v}'" if k == "kv-transfer-config" else (
            f'"{v}"' if isinstance(v, str) else f"{v}")

    return "\n".join(f"{' ' * ind}{k}: {val(k, v)}" for k, v in d.items())


def config_yaml(sc: Scn) -> str:
    """config.yaml: the submitted srt-slurm v1 recipe, modelled on the shipped 4xdep2-1xdep8 recipe."""
    env = yaml_block(recipe_env(sc), 4)
    return f"""name: "qwen35-397b-nvfp4-gb200-disagg-{sc.pw}xdep2-1xdep8-{sc.name}"

model:
  path: "{HF_PATH}"
  container: "{IMAGES[sc.image][0]}"
  precision: "NVFP4"

dynamo:
  version: "{DYNAMO_VER}"
  install: true

resources:
  gpu_type: "gb200"
  gpus_per_node: 4

  prefill_nodes: {pf_nodes(sc)}
  prefill_workers: {sc.pw}
  gpus_per_prefill: 2

  decode_nodes: 2
  decode_workers: 1
  gpus_per_decode: 8

frontend:
  type: dynamo
  enable_multiple_frontends: false

backend:
  type: vllm
  connector: null

  prefill_environment:
{env}

  decode_environment:
{env}

  vllm_config:
    prefill:
{yaml_block(recipe_flags(sc, "prefill", 2), 6)}

    decode:
{yaml_block(recipe_flags(sc, "decode", 8), 6)}

{benchmark_yaml(sc)}"""


def benchmark_yaml(sc: Scn) -> str:
    """The recipe's sa-bench block (the runs' ISL/OSL, concurrencies and prompt multiplier)."""
    return f"""benchmark:
  type: "sa-bench"
  isl: {ISL}
  osl: {OSL}
  concurrencies: "{'x'.join(map(str, sc.concs))}"
  req_rate: "inf"
  random_range_ratio: 0.8
  num_prompts_mult: {sc.mult}
  num_warmup_mult: 1
"""


def job_json(sc: Scn) -> dict:
    res = {"gpu_type": "gb200", "gpus_per_node": 4, "prefill_nodes": pf_nodes(sc), "decode_nodes": 2,
           "agg_nodes": 0, "prefill_workers": sc.pw, "decode_workers": 1, "agg_workers": 0, "gpus_per_prefill": 2,
           "gpus_per_decode": 8, "gpus_per_agg": None}
    return {"version": "2.0", "job_id": str(sc.job), "job_name": f"qwen35-397b-nvfp4-gb200-disagg-{sc.name}",
            "generated_at": sec(sc.start, -40).isoformat(),
            "model": {"path": HF_PATH, "container": IMAGES[sc.image][0], "precision": "NVFP4"},
            "resources": res, "backend_type": "vllm", "frontend_type": "dynamo",
            "benchmark": {"type": "sa-bench", "isl": ISL, "osl": OSL},
            "tags": [sc.name], "setup_script": None}


def bench_result(sc: Scn, seg: Seg, rng: random.Random) -> dict:
    """One results_concurrency_*.json: summary keys first and last, short per-request arrays between."""
    n, k = seg.conc * sc.mult, 16
    failed = rng.randint(9, 16) if sc.kind == "nixl-failures" else 0
    done, dur = n - failed, (seg.t1 - seg.t0).total_seconds()
    tin = int(done * MEAN_IN * rng.uniform(0.998, 1.002))
    tout = int(done * MEAN_OUT * rng.uniform(0.998, 1.002))
    tpot = seg.drun / (seg.rate * MEAN_OUT / 8) * 1000
    ttft = 420 + (seg.pwait + seg.dwait) * 8 / seg.rate * 1000 * 0.5
    lat = {}
    e2el = ttft + tpot * (MEAN_OUT - 1)
    for m, v in (("ttft", ttft), ("tpot", tpot), ("itl", tpot * 0.98), ("e2el", e2el)):
        lat |= {f"mean_{m}_ms": round(v, 2), f"median_{m}_ms": round(v * 0.93, 2),
                f"std_{m}_ms": round(v * 0.31, 2), f"p99_{m}_ms": round(v * (2.9 if m == "itl" else 1.8), 2)}
    return {"date": seg.t1.strftime("%Y%m%d-%H%M%S"), "backend": "dynamo", "model_id": MODEL,
            "tokenizer_id": "/model", "best_of": 1, "num_prompts": n, "request_rate": "inf",
            "burstiness": 1.0,
            "max_concurrency": seg.conc, "duration": round(dur, 3), "completed": done,
            "total_input_tokens": tin, "total_output_tokens": tout,
            "request_throughput": round(done / dur, 4), "request_goodput": None,
            "output_throughput": round(tout / dur, 2),
            "peak_output_tokens_per_s": round(tout / dur * 1.21, 2),
            "total_token_throughput": round((tin + tout) / dur, 2),
            "input_lens": [rng.randint(6554, ISL) for _ in range(k)],
            "output_lens": [rng.randint(819, OSL) for _ in range(k)],
            "ttfts": [round(ttft / 1000 * rng.uniform(0.6, 1.5), 6) for _ in range(k)],
            "itls": [[round(tpot / 10 * rng.uniform(0.5, 1.5), 6) for _ in range(4)] for _ in range(k)],
            "generated_texts": ["" for _ in range(k)],
            "errors": ["" for _ in range(k - 1)] + (["Server error: KV load failed"] if failed else [""]),
            **lat, "reuse_http_connections": True}


def bench_block(r: dict) -> list[str]:
    rows = [("Successful requests:", r["completed"]), ("Failed requests:", r["num_prompts"] - r["completed"]),
            ("Maximum request concurrency:", r["max_concurrency"]),
            ("Benchmark duration (s):", f"{r['duration']:.2f}"), ("Total input "
                                                                  "tokens:", r["total_input_tokens"]),
            ("Total generated tokens:", r["total_output_tokens"]),
            ("Request throughput (req/s):", f"{r['request_throughput']:.2f}"),
            ("Output token throughput (tok/s):", f"{r['output_throughput']:.2f}"),
            ("Peak output token throughput (tok/s):", f"{r['peak_output_tokens_per_s']:.2f}"),
            ("Total Token throughput (tok/s):", f"{r['total_token_throughput']:.2f}")]
    out = [" Serving Benchmark Result ".center(50, "="), *(f"{k:<40} {v:<10}" for k, v in rows)]
    for m, title in (("ttft", "Time to First Token"), ("tpot", "Time per Output Token (excl. 1st token)"),
                     ("itl", "Inter-token Latency"), ("e2el", "End-to-end Latency")):
        out.append(title.center(50, "-"))
        out += [f"{f'{a} {m.upper()} (ms):':<40} "
                f"{r[f'{a.lower()}_{m}_ms']:<10.2f}" for a in ("Mean", "Median", "P99")]
    return [*out, "=" * 50]


def benchmark_files(sc: Scn, tl: Timeline, rng: random.Random, out: Path,
                    gpus: tuple[int, int] | None = None) -> list[str]:
    """benchmark.out, the per-concurrency results and (for finished runs) benchmark-rollup.json; ``gpus``:
    (prefill, decode) GPUs in the results' names (default: sc.pw DEP2 prefill workers, one DEP8 decode)."""
    ctx, gen = gpus or (2 * sc.pw, 8)
    lines, results = [], []
    head = ["Traffic request rate: inf", "Burstiness factor: 1.0 (Poisson process)"]
    for seg in tl.segs:
        if seg.warm:
            lines += [*head, f"Maximum request concurrency: {seg.conc}", "Warmup run completed."]
            continue
        lines += [f"Running benchmark with concurrency: {seg.conc}", unix_date(seg.t0), *head,
                  f"Maximum request concurrency: {seg.conc}"]
        if tl.crash and seg.t1 == tl.crash:
            n = seg.conc * sc.mult
            lines += [f" 37%|███▋      | {int(n * 0.37)}/{n} [03:55<06:40,  5.73it/s]",
                      "Traceback (most recent call last):",
                      '  File "/srtctl-benchmarks/sa-bench/benchmark_serving.py", line 1371, in <module>',
                      "    main(args)", "aiohttp.client_exceptions.ClientPayloadError: Response payload is "
                                        "not "
                      "completed: <TransferEncodingError: 400, message='Not enough data for satisfy "
                      "transfer length "
                      "header.'>", f"Error: benchmark with concurrency {seg.conc} failed (exit code 1)"]
            break
        r = bench_result(sc, seg, rng)
        results.append(r)
        lines += [*bench_block(r), unix_date(seg.t1), "Completed benchmark with concurrency: "
                                                      f"{seg.conc}", "-" * 41]
        name = f"results_concurrency_{seg.conc}_gpus_{ctx + gen}_ctx_{ctx}_gen_{gen}.json"
        write(out / "logs" / f"sa-bench_isl_{ISL}_osl_{OSL}" / name, json.dumps(r) + "\n")
    write(out / "logs" / "benchmark.out", "\n".join(lines) + "\n")
    if not tl.crash:
        keys = [("concurrency", "max_concurrency"), ("throughput_toks", "output_throughput"),
                ("request_throughput", "request_throughput"), ("ttft_mean_ms", "mean_ttft_ms"),
                ("ttft_p99_ms", "p99_ttft_ms"), ("tpot_mean_ms", "mean_tpot_ms"),
                ("tpot_p99_ms", "p99_tpot_ms"), ("itl_mean_ms", "mean_itl_ms"), ("itl_p99_ms", "p99_itl_ms"),
                ("e2el_mean_ms", "mean_e2el_ms"),
                ("completed_requests", "completed"), ("total_input_tokens", "total_input_tokens"),
                ("total_output_tokens", "total_output_tokens")]
        roll = {"benchmark_type": "sa-bench", "timestamp": tl.bench_end.isoformat(),
                "config": {"model": MODEL, "isl": ISL, "osl": OSL},
                "runs": [{a: r[b] for a, b in keys} for r in results]}
        write(out / "logs" / "benchmark-rollup.json", json.dumps(roll, indent=2) + "\n")
    return [f"results_concurrency_{r['max_concurrency']}" for r in results]


PROM = [("vllm:num_requests_running", "gauge", "Number of requests in model execution batches.", "running"),
        ("vllm:num_requests_waiting", "gauge", "Number of requests waiting to be processed.", "waiting"),
        ("vllm:kv_cache_usage_perc", "gauge", "KV-cache usage. 1 means 100 percent usage.", "kv"),
        ("vllm:num_preemptions_total", "counter", "Cumulative number of preemption from the engine.", "pre"),
        ("vllm:prompt_tokens_total", "counter", "Number of prefill tokens processed.", "ptok"),
        ("vllm:generation_tokens_total", "counter", "Number of generation tokens processed.", "gtok")]


def prom_engine(role: str, past: list[tuple[datetime, dict]]) -> dict:
    last = past[-1][1] if past else mk(0, 0, 0, 0, None, 0, None)
    # vllm:prompt_tokens counts every prompt token, also those a decode engine received by KV transfer
    ptok = sum(s["prompt_tps"] if role == "prefill" else s["gen_tps"] * MEAN_IN / MEAN_OUT for _, s in past)
    return {"running": last["running"], "waiting": last["waiting"], "kv": round(last["kv_usage"] / 100, 6),
            "pre": sum(s["preemptions"] or 0 for _, s in past), "ptok": int(ptok * 10),
            "gtok": int(sum(s["gen_tps"] for _, s in past) * 10)}


def prometheus(tl: Timeline, procs: list[Proc], logs: dict, rng: random.Random) -> list[str]:
    """raw_prometheus.jsonl: every worker and the frontend scraped every 120 s of the benchmark."""
    rows, t = [], sec(tl.segs[0].t0, 30)
    while t < tl.bench_end:
        for i, p in enumerate(procs):
            vals = {e: prom_engine(p.role, [x for x in logs[p.key].hidden[e] if x[0] <= t])
                    for e in p.engines}
            text = []
            for name, typ, hlp, key in PROM:
                text += [f"# HELP {name} {hlp}", f"# TYPE {name} {typ}"]
                text += [f'{name}{{engine="{e}",model_name="{MODEL}"}} '
                         f'{float(v[key])}' for e, v in vals.items()]
            ts_ns = int(sec(t, 0.01 * i).timestamp()) * 10**9 + rng.randint(0, 10**9 - 1)
            rows.append({"timestamp_ns": ts_ns,
                         "endpoint_url": f"http://{p.node}:{7500 + p.port_idx}/metrics", "role": p.role,
                         "worker_id": p.key, "text": "\n".join(text) + "\n"})
        inflight = sum(s.conc for s in tl.segs if s.t0 <= t < s.t1)
        text = []
        for name, hlp, v in (("dynamo_frontend_inflight_requests", "Number of inflight requests", inflight),
                             ("dynamo_frontend_queued_requests", "Number of requests in HTTP processing "
                                                                 "queue",
                              int(inflight * 0.04))):
            text += [f"# HELP {name} {hlp}", f"# TYPE {name} gauge", f'{name}{{model="{MODEL}"}} {v}']
        rows.append({"timestamp_ns": int(t.timestamp()) * 10**9 + rng.randint(0, 10**9 - 1),
                     "endpoint_url": f"http://{procs[0].node}:8000/metrics", "role": "frontend",
                     "worker_id": "frontend_0", "text": "\n".join(text) + "\n"})
        t = sec(t, 120)
    return [json.dumps(r) for r in rows]


# ------------------------------ assembling runs
def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(text.encode("utf-8"))


def build_workers(sc: Scn, procs: list[Proc], rng: random.Random) -> tuple[Timeline, dict]:
    tl = timeline(sc, procs, rng)
    ctxs = {p.key: new_ctx(sc, p, tl, rng, procs[0].ip) for p in procs}
    n_pf = sum(len(p.engines) for p in procs if p.role == "prefill")
    n_dec = sum(len(p.engines) for p in procs if p.role == "decode")
    dec_eid = next(ctxs[p.key].eid for p in procs if p.role == "decode")
    for p in procs:   # one DEP8 endpoint has one engine_id over both nodes
        ctxs[p.key].dec_eid = dec_eid
        ctxs[p.key].eid = dec_eid if p.role == "decode" else ctxs[p.key].eid
    pf_eids = [f"{ctxs[p.key].eid}_dp{e}" for p in procs if p.role == "prefill" for e in p.engines]
    pf_ips = [p.ip for p in procs if p.role == "prefill" for _ in p.engines]
    for p in procs:
        c = ctxs[p.key]
        startup(c)
        nixl = sc.kind == "nixl-failures"
        fails = nixl_events(c, pf_eids, pf_ips) if nixl and p.role == "decode" else []
        exp = expiry_events(c, p.idx == 1) if nixl and p.role == "prefill" else []
        runtime(c, n_pf, n_dec, fails, exp)
        crashed = bool(tl.crash) and p.role == "decode" and 5 in p.engines
        if tl.crash and p.role == "prefill":
            crash_prefill_side(c)
        if crashed:
            inject_crash(c)
        else:
            shutdown(c, sec(tl.end, 1 + 0.1 * p.port_idx))
    return tl, ctxs


def expect_block(sc: Scn, tl: Timeline, procs: list[Proc], ctxs: dict) -> dict:
    eps: dict[str, dict] = {}
    tot = {"prefill": 0.0, "decode": 0.0}
    for p in procs:
        stats = ctxs[p.key].log.stats
        ep = eps.setdefault(f"{p.role}-w{p.idx}", {"id": f"{p.role}-w{p.idx}", "role": p.role, "engines": 0,
                                                   "stats_samples": 0, "files": []})
        ep["engines"] += len(p.engines)
        ep["stats_samples"] += sum(len(v) for v in stats.values())
        ep["files"].append(f"logs/{p.file}")
        key = "prompt_tps" if p.role == "prefill" else "gen_tps"
        tot[p.role] += sum(r[key] for rows in stats.values() for r in rows) * 10
    pf, dc = tot["prefill"] / ISL, tot["decode"] / OSL   # requests' worth of tokens, each side
    match = {"prefill_requests": round(pf, 1), "decode_requests": round(dc, 1),
             "ratio": round(pf / dc, 3) if dc else None}
    out = dict(sc.expect) | {"endpoints": list(eps.values()), "rate_match": match}
    if tl.crash:
        bad = next(p for p in procs if p.role == "decode" and 5 in p.engines)
        out["crash"] = {"file": f"logs/{bad.file}", "engine": 5, "proc": "EngineCore_DP5", "md": md(tl.crash),
                        "critical_process": bad.key, "exit_code": 1}
    return out


def build_run(sc: Scn, seed: int, out: Path) -> None:
    rng = random.Random(seed)
    procs = topology(sc)
    tl, ctxs = build_workers(sc, procs, rng)
    run, files, tail = out / "runs" / sc.name, {}, None
    fe = frontend_log(sc, tl, procs, rng, {k: c.iid for k, c in ctxs.items()})
    for p in procs:
        text = ctxs[p.key].log.render()
        write(run / "logs" / p.file, text)
        files[f"logs/{p.file}"] = ctxs[p.key].log.manifest()
        if tl.crash and p.role == "decode" and 5 in p.engines:
            tail = [ln.rstrip("\r") for ln in text.split("\n")[:-1][-50:]]
    write(run / "logs" / fe.name, fe.render())
    files[f"logs/{fe.name}"] = fe.manifest()
    ev = orchestrator(sc, tl, procs, tail)
    write(run / "logs" / f"sweep_{sc.job}.log", "".join(f"{x}\n" for _, x in sorted(ev, key=lambda e: e[0])))
    write(run / "config.yaml", config_yaml(sc))
    meta = json.dumps(job_json(sc), indent=2) + "\n"
    write(run / f"{sc.job}.json", meta)
    write(run / "logs" / f"{sc.job}.json", meta)
    results = benchmark_files(sc, tl, rng, run)
    if sc.name == "prefill-bound":   # the same run's series as srt-slurm 2.x and AIPerf capture them
        telemetry.write(sc.name, sc.job, procs, {k: c.log for k, c in ctxs.items()}, prom_engine, MODEL,
                        f"{MODEL}_isl{ISL}_osl{OSL}_c{sc.concs[0]}_{sc.start:%Y%m%d%H%M%S}", out / "telemetry",
                        seed + 1, (MEAN_IN, MEAN_OUT))
    if sc.kind == "stats-missing":
        rows = prometheus(tl, procs, {k: c.log for k, c in ctxs.items()}, rng)
        write(run / "logs" / "raw_prometheus.jsonl", "\n".join(rows) + "\n")
    manifest = {"scenario": sc.name, "job_id": str(sc.job), "vllm_version": IMAGES[sc.image][1],
                "start": sc.start.isoformat(), "benchmark_start": tl.segs[0].t0.isoformat(timespec="seconds"),
                "benchmark_end": tl.bench_end.isoformat(timespec="seconds"), "concurrencies": list(sc.concs),
                "completed_results": results, "files": files, "expect": expect_block(sc, tl, procs, ctxs)}
    write(run / "MANIFEST.json", json.dumps(manifest, indent=2) + "\n")


def build_slurm(out: Path) -> None:
    """A user's slurm-<jobid>.out: orchestrator lines plus three workers' output under `srun --label`."""
    sc, rng = SLURM, random.Random(90552)
    procs = slurm_topology(sc)
    tl, ctxs = build_workers(sc, procs, rng)
    labels = {p.key: i for i, p in enumerate(procs)}
    ev = orchestrator(sc, tl, procs, None, labels)
    for p in procs:   # srun --label prefixes every physical line, continuations and \r\n lines included
        ev += [(t, "\n".join(f"{labels[p.key]}: {ln}" for ln in text.split("\n")))
               for t, _, text in ctxs[p.key].log.ev]
    write(out / f"slurm-{sc.job}.out", "".join(f"{x}\n" for _, x in sorted(ev, key=lambda e: e[0])))
    man = {"file": f"slurm-{sc.job}.out", "job_id": str(sc.job), "vllm_version": IMAGES[sc.image][1],
           "labels": {str(labels[p.key]): ctxs[p.key].log.manifest() for p in procs},
           "unlabelled": "srtctl orchestrator lines (YYYY-MM-DD HH:MM:SS [LEVEL] msg), the banner, srun "
                         "messages"}
    write(out / f"slurm-{sc.job}.manifest.json", json.dumps(man, indent=2) + "\n")


def generate(out: Path) -> None:
    for i, sc in enumerate(SCENARIOS):
        build_run(sc, 1000 + 17 * i, out)
    build_slurm(out)
    derived.generate(out / "runs", {sc.name: sc.job for sc in SCENARIOS})
    import make_sglang  # samples/make_sglang.py: the SGLang P/D runs (it imports this module's helpers)
    make_sglang.generate(out)
    import make_trtllm  # samples/make_trtllm.py: the TensorRT-LLM P/D runs
    make_trtllm.generate(out)


def main() -> None:
    ap = argparse.ArgumentParser(description="Regenerate diag's synthetic srt-slurm sample runs.")
    ap.add_argument("--out", type=Path, default=Path(__file__).resolve().parent, help="directory to write "
                                                                                      "into")
    generate(ap.parse_args().out)


if __name__ == "__main__":
    main()
