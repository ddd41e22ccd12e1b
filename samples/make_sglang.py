"""SGLang P/D sample runs (``python3 -m dynamo.sglang`` behind the Dynamo frontend), called by make_samples.py.

Each run is a Qwen3.5-397B-A17B-NVFP4 job on GB200 modelled on srt-slurm's SGLang disagg recipe
``recipes/qwen3.5/nvfp4/disagg/mtp_radix_off/1p1d-dep8-dpep-mtp-1k1k-gb300.yaml`` (DEP4 prefill, DEP8 decode,
``enable-dp-attention``), without MTP and at 8k1k: two DEP4 prefill workers (one node each, ranks DP0-DP3 in one
file) and one DEP8 decode worker over two nodes (srt-slurm starts one srun per node, both files named
``<node>_decode_w0.out``). Every SGLang line is built from an f-string of sglang 0.5.23 (the wheel's source):
the scheduler prefix ``[YYYY-MM-DD HH:MM:SS DPk TPk EPk]``, ``Prefill batch`` / ``Decode batch`` with the
hybrid-SSM usage fields (``full token usage``, ``mamba usage``) and the P/D queue fields, the start-up lines,
the retraction warning, the P/D transfer errors and ``Scheduler hit an exception``. Dynamo's Rust and Python
lines (ANSI) and tqdm bars are the noise. Prefill batch lines are thinned to one every few seconds per rank (a
real prefill server logs every batch, about two a second): each keeps the throughput SGLang computes since its
previous line. The decode server logs one line every ``decode-log-interval`` (500) steps, so its spacing follows
the step time and stops when there is no batch.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

import make_samples as ms
import pd_common as pd
from make_samples import ISL, MEAN_IN, MEAN_OUT, OSL, Proc, Seg, Timeline, WLog, sec, write

IMAGE, VERSION, DYNAMO = "lmsysorg/sglang:v0.5.23-cu130", "0.5.23", "1.2.0.dev20260526"
SERVED = "nvidia/Qwen3.5-397B-A17B-NVFP4"
PF_TOKENS, DEC_TOKENS = 262144, 1441792       # max_total_num_tokens per rank (full-attention layers)
LOG_INTERVAL = 500                           # decode-log-interval
SITE = "/usr/local/lib/python3.12/dist-packages/sglang/srt"
NOT_ENOUGH = "RuntimeError: Not enough memory. Please try to increase --mem-fraction-static. Current value: " \
             "mem_fraction_static=0.15"


@dataclass(frozen=True)
class SScn:
    name: str
    job: int
    start: datetime
    rack: int
    kind: str                 # healthy | prefill-bound | kv-capacity | transfer-failure | startup-failure
    concs: tuple[int, ...]
    mult: int
    rates: dict               # C -> (req/s, decode running/rank, prefill queue/rank, decode queue/rank)
    expect: dict = field(default_factory=dict)
    pw: int = 2               # DEP4 prefill workers


SCENARIOS = [
    SScn("sglang-healthy", 5150101, ms._t(2026, 12, 3, 10, 14, 9), 21, "healthy", (512, 1024), 4,
         {512: (10.9, 64, 1, 0), 1024: (14.0, 128, 3, 0)},
         expect={"findings": [], "verdict": {"class": "healthy", "limiter": None}}),
    SScn("sglang-prefill-bound", 5150102, ms._t(2026, 12, 3, 13, 40, 52), 22, "prefill-bound", (1024, 2048), 2,
         {1024: (18.4, 47, 60, 0), 2048: (18.4, 47, 180, 0)},
         expect={"findings": ["DIAG-B001", "DIAG-K003"], "verdict": {"class": "prefill-bound", "limiter": None}}),
    SScn("sglang-kv-capacity", 5150103, ms._t(2026, 12, 4, 8, 5, 30), 23, "kv-capacity", (1024, 4096), 1,
         {1024: (14.0, 128, 3, 0), 4096: (13.0, 176, 3, 300)},
         expect={"findings": ["DIAG-K001", "DIAG-K002", "DIAG-K003"],
                 "verdict": {"class": "decode-bound", "limiter": "kv-capacity"}}),
    SScn("sglang-transfer-failure", 5150104, ms._t(2026, 12, 4, 15, 22, 17), 24, "transfer-failure", (512, 1024),
         2, {512: (9.6, 56, 1, 6), 1024: (11.8, 104, 2, 14)},
         expect={"findings": ["DIAG-E002"],
                 "verdict": {"class": "transfer-bound", "limiter": "kv-transfer failures"}}),
    SScn("sglang-startup-failure", 5150105, ms._t(2026, 12, 5, 7, 51, 44), 25, "startup-failure", (1024,), 2,
         {1024: (14.0, 128, 3, 0)},
         expect={"findings": ["DIAG-E004"], "verdict": {"class": "invalid", "limiter": None}}),
]


def stamp(t: datetime) -> str:
    return t.strftime("%Y-%m-%d %H:%M:%S")


def rank_tag(e: int) -> str:
    return f" DP{e} TP{e} EP{e}"


def sg(t: datetime, msg: str, e: int | None = None) -> str:
    """A line through sglang's configure_logger: ``[%(asctime)s{prefix}] %(message)s`` (prefix on schedulers)."""
    return f"[{stamp(t)}{'' if e is None else rank_tag(e)}] {msg}"


# ------------------------------ topology, time
def topology(sc: SScn) -> list[Proc]:
    nodes = [(f"gb200-r{sc.rack:02d}-n{40 + i}", f"10.0.{sc.rack}.{40 + i}") for i in range(sc.pw + 2)]
    procs = [Proc("prefill", w, *nodes[w], [0, 1, 2, 3], 4, [0, 1, 2, 3], w, nodes[w][1]) for w in range(sc.pw)]
    return procs + [Proc("decode", 0, *nodes[sc.pw + k], list(range(4 * k, 4 * k + 4)), 8, [0, 1, 2, 3],
                         sc.pw + k, nodes[sc.pw][1]) for k in range(2)]


def timeline(sc: SScn, procs: list[Proc], rng: random.Random) -> Timeline:
    tl = ms.schedule(sc, procs, rng, launch_s=31, ready_s={"prefill": 236, "decode": 297}, jitter_s=20)
    launch = tl.launch
    if sc.kind == "startup-failure":   # decode's second node dies allocating its KV pool; nothing is served
        tl.crash = sec(launch, 168 + rng.uniform(0, 6))
        tl.segs, tl.bench_end, tl.end = [], sec(tl.crash, 9), sec(tl.crash, 12)
    return tl


# ------------------------------ the model of one rank's figures
def envelope(seg: Seg, t: datetime) -> tuple[float, float]:
    frac = (t - seg.t0) / (seg.t1 - seg.t0)
    return frac, max(0.05, min(1.0, frac / 0.05, (1.0 - frac) / 0.07))


def prefill_fig(sc: SScn, seg: Seg, t: datetime, rng: random.Random) -> dict:
    frac, env = envelope(seg, t)
    tput = seg.rate * MEAN_IN / 8 * env * (1 + rng.gauss(0, 0.05))
    queue = rng.randint(0, seg.pwait)
    if sc.kind == "prefill-bound":     # flat at the plateau, the queue standing and growing
        tail = 1.0 if frac < 0.93 else env
        tput = 17000 * (1 + rng.gauss(0, 0.025)) * tail
        queue = int(seg.pwait * min(1.0, 0.08 + frac / 0.4) * (1 + rng.gauss(0, 0.05)) * tail)
    run = min(3, max(1, round(tput / 6000)))
    inflight = rng.randint(2, 9)
    usage = (run + inflight) * ISL / PF_TOKENS
    return {"tput": max(tput, 0.0), "run": run, "queue": max(queue, 0), "usage": min(usage, 0.99),
            "inflight": inflight, "bootstrap": rng.randint(0, 2), "new_seq": run, "new_tok": min(16384, run * ISL)}


def decode_fig(sc: SScn, seg: Seg, t: datetime, rng: random.Random) -> dict:
    _, env = envelope(seg, t)
    run = max(1, int(seg.drun * env * (1 + rng.gauss(0, 0.03))))
    gen = seg.rate * MEAN_OUT / 8 * env * (1 + rng.gauss(0, 0.04))
    usage = run * (MEAN_IN + MEAN_OUT / 2) / DEC_TOKENS * (1 + rng.gauss(0, 0.02))
    queue, retracted, prealloc, transfer = rng.randint(0, seg.dwait), 0, rng.randint(0, 2), rng.randint(0, 3)
    if sc.kind == "kv-capacity" and seg.conc >= 4096 and env > 0.5:
        usage = 0.952 + 0.045 * rng.random()
        queue = int(seg.dwait * min(1.0, 0.1 + (t - seg.t0) / (seg.t1 - seg.t0) / 0.5))
        retracted = rng.choice([0, 1, 2, 3, 5])
    if sc.kind == "transfer-failure" and env > 0.5:   # requests stuck waiting for their KV
        prealloc, transfer = rng.randint(8, 16), rng.randint(18, 40)
    return {"run": run, "gen": max(gen, 0.0), "usage": min(usage, 0.999), "queue": queue, "retracted": retracted,
            "prealloc": prealloc, "transfer": transfer}


def prefill_line(f: dict) -> str:
    """metrics_reporter.report_prefill_stats on a P/D prefill server, hybrid SSM pool."""
    return (f"Prefill batch, #new-seq: {f['new_seq']}, #new-token: {f['new_tok']}, #cached-token: 0, "
            f"full token usage: {f['usage']:.2f}, mamba usage: {f['usage'] * 0.6:.2f}, "
            f"#running-req: {f['run']}, #queue-req: {f['queue']}, #pending-token: {f['queue'] * MEAN_IN}, "
            f"#bootstrap-req: {f['bootstrap']}, #inflight-req: {f['inflight']}, #optimistic-req: 0, "
            f"cuda graph: False, input throughput (token/s): {f['tput']:.2f}")


def decode_line(f: dict) -> str:
    """metrics_reporter.report_decode_stats on a P/D decode server, hybrid SSM pool."""
    return (f"Decode batch, #running-req: {f['run']}, #full token: {int(f['usage'] * DEC_TOKENS)}, "
            f"full token usage: {f['usage']:.2f}, mamba num: {f['run']}, mamba usage: {f['run'] / 1024:.2f}, "
            f"pre-allocated usage: {f['prealloc'] * ISL / DEC_TOKENS:.2f}, #prealloc-req: {f['prealloc']}, "
            f"#transfer-req: {f['transfer']}, #retracted-req: {f['retracted']}, cuda graph: True, "
            f"gen throughput (token/s): {f['gen']:.2f}, #queue-req: {f['queue']}")


def parsed(role: str, f: dict) -> dict:
    """What a batch line holds in diag's stats fields (the MANIFEST's first / last record)."""
    pre = role == "prefill"
    return {"prompt_tps": round(f["tput"], 2) if pre else None, "gen_tps": None if pre else round(f["gen"], 2),
            "running": f["run"], "waiting": f["queue"], "preemptions": None, "kv_usage": round(round(f["usage"], 2) * 100, 6),
            "prefix_hit": None, "ext_hit": None, "md": None}


# ------------------------------ one worker file
@dataclass
class Ctx:
    sc: SScn
    p: Proc
    tl: Timeline
    rng: random.Random
    log: WLog
    iid: int
    head: str          # the head node's IP (etcd, NATS)

    def S(self, t: datetime, msg: str, e: int | None = None, *counts: str) -> None:
        self.log.add(t, sg(t, msg, e), *counts)

    def R(self, t: datetime, level: str, target: str, msg: str, **f: object) -> None:
        self.log.add(t, ms.rust(t, level, target, msg, True, **f))

    def P(self, t: datetime, level: str, target: str, msg: str) -> None:
        self.log.add(t, ms.dynpy(t, level, target, msg))


def server_args(p: Proc) -> str:
    """engine.py: logger.info(f"server_args={...resolved_dict()}"), the flags that matter here."""
    d = {"model_path": "/model/", "served_model_name": SERVED, "tp_size": p.dp_size, "dp_size": p.dp_size,
         "ep_size": p.dp_size, "enable_dp_attention": True, "quantization": "modelopt_fp4",
         "kv_cache_dtype": "fp8_e4m3", "page_size": 64, "disaggregation_mode": p.role,
         "disaggregation_transfer_backend": "nixl", "chunked_prefill_size": 16384 if p.role == "prefill" else 4096,
         "max_running_requests": 4096, "mem_fraction_static": 0.8, "decode_log_interval": LOG_INTERVAL,
         "stream_interval": 50, "disable_radix_cache": True}
    return f"server_args={d!r}"


def startup(c: Ctx, dies: bool) -> None:
    """Dynamo runtime, then each scheduler rank: weights, KV pool, CUDA graphs; the endpoint registers."""
    p, rng = c.p, c.rng
    t0 = sec(c.tl.launch, rng.uniform(1, 3))
    span = ((c.tl.crash if dies else c.tl.ready[p.key]) - t0).total_seconds()

    def at(f: float) -> datetime:
        return sec(t0, f * span)

    c.log.add(at(0), f"Installing ai-dynamo=={DYNAMO} into /opt/dynamo/venv (setup_script: none)")
    c.log.add(at(0.03), f"Successfully installed ai-dynamo-{DYNAMO} ai-dynamo-runtime-{DYNAMO}")
    c.R(at(0.05), "INFO", "dynamo_runtime::distributed", "Initializing distributed runtime", namespace="dynamo",
        request_plane="tcp")
    c.R(at(0.051), "INFO", "dynamo_runtime::transports::etcd", "Connected to etcd",
        endpoints=f'["http://{c.head}:2379"]')
    c.S(at(0.06), server_args(p))
    weights = 0.45 if not dies else 0.7
    for e in p.engines:
        c.S(at(0.2 + 0.005 * e), f"Load weight begin. avail mem={rng.uniform(181.5, 182.4):.2f} GB", e)
        c.S(at(weights + 0.01 * (e % 4)), f"Load weight end. elapsed={rng.uniform(58, 74):.2f} s, "
            "type=Qwen3_5MoeForConditionalGeneration, quant=modelopt_fp4, "
            f"avail mem={rng.uniform(152.0, 153.5):.2f} GB, mem usage={rng.uniform(28.9, 29.6):.2f} GB.", e)
    if dies:
        return
    tokens = PF_TOKENS if p.role == "prefill" else DEC_TOKENS
    for e in p.engines:
        c.S(at(0.55 + 0.01 * (e % 4)), f"KV Cache is allocated. dtype: torch.float8_e4m3fn, #tokens: {tokens}, "
            f"KV size: {tokens * 15 * 2 * 512 / 2**30:.2f} GB", e)
        c.S(at(0.56 + 0.01 * (e % 4)), f"Memory pool end. avail mem={rng.uniform(22, 26):.2f} GB", e)
    lead = p.engines[0]
    if lead == 0:   # the TP0 rank only
        # one DP rank's budgets: dp attention divides the server-wide ones by the DP size
        # (0.5.23 arg_groups/parallel_hook.py:326-332, model_executor/model_runner.py:558-565)
        ranks = 4 if p.role == "prefill" else 8
        fl = flags(p.role, c.sc)
        c.S(at(0.58), f"max_total_num_tokens={tokens}, chunked_prefill_size="
            f"{fl['chunked-prefill-size'] // ranks}, max_prefill_tokens=16384, max_running_requests="
            f"{fl['max-running-requests'] // ranks}, context_len=9236, available_gpu_mem={rng.uniform(22, 26):.2f} GB",
            lead)
    if p.role == "decode":
        for e in p.engines:
            c.S(at(0.6 + 0.005 * (e % 4)), "Capture target decode CUDA graph begin. backend=full, "
                f"num_tokens_per_req=1, avail mem={rng.uniform(21, 23):.2f} GB", e)
        if lead == 0:   # tqdm on stderr, redrawn in place with \r
            bar = [f"Capturing batches (bs={bs} avail_mem={20.9 - 0.05 * k:.2f} GB): {100 * k // 52:3d}%|"
                   f"{'█' * (k * 10 // 52)}{' ' * (10 - k * 10 // 52)}| {k}/52 [00:{k // 6:02d}<00:{(52 - k) // 6:02d}, "
                   f"{5.9:.2f}it/s]" for k, bs in ((0, 512), (13, 384), (26, 192), (39, 64), (52, 1))]
            c.log.add(at(0.75), "\r".join(bar))
        for e in p.engines:
            c.S(at(0.85 + 0.005 * (e % 4)), "Capture target decode CUDA graph end. bs=[1, 2, 4, 8, 16, 24, 32, "
                f"64, 128, 192, 256, 384, 512], elapsed={rng.uniform(8.5, 11.0):.2f} s, mem usage="
                f"{rng.uniform(1.6, 2.2):.2f} GB, avail mem={rng.uniform(19, 21):.2f} GB.", e)
    tcp = "dynamo_runtime::pipeline::network::tcp::server"
    c.R(at(0.97), "INFO", tcp, "Endpoint starting with request plane mode: tcp")
    port = 30000 + rng.randint(0, 9999)
    for ep in ("generate", "clear_kv_blocks"):
        c.R(at(0.98), "INFO", tcp, f"Registered endpoint '{ep}' with shared TCP server on {p.ip}:{port}")
    c.P(c.tl.ready[p.key], "INFO", "main.init", f"Model registration succeeded for {SERVED}")


def startup_death(c: Ctx) -> None:
    """decode, second node: every scheduler there fails to size its KV pool; the engine kills the tree."""
    tc = c.tl.crash
    frames = [(f"{SITE}/managers/scheduler.py", 6362, "run_scheduler_process",
               "scheduler = Scheduler(server_args, port_args)"),
              (f"{SITE}/model_executor/pool_configurator.py", 647, "calculate_pool_sizes",
               "return MemoryPoolConfig(max_total_num_tokens=max_total_num_tokens)"),
              ("<string>", 12, "__init__", ""),
              (f"{SITE}/model_executor/pool_configurator.py", 99, "__post_init__", "raise RuntimeError(msg)")]
    text = ms.tb(frames, NOT_ENOUGH).replace("\n    \n", "\n")
    for k, e in enumerate(c.p.engines):
        c.S(sec(tc, 0.02 * k), f"Scheduler hit an exception: {text}", e)
    c.S(sec(tc, 0.3), "Received sigquit from a child process. It usually means the child failed.")
    c.P(sec(tc, 1.1), "ERROR", "main.worker", "dynamo.sglang worker exited with status 1")


def runtime(c: Ctx, fails: list[datetime]) -> None:
    """Batch lines: prefill thinned to every 3-6 s per rank, decode every LOG_INTERVAL steps per rank."""
    p, tl, rng = c.p, c.tl, c.rng
    for e in p.engines:
        t = sec(tl.ready[p.key], rng.uniform(5, 15))
        while t < tl.end:
            seg = ms.seg_at(tl, t)
            if seg is None:   # no batch, no line: skip to the next point's start
                nxt = [s.t0 for s in tl.segs if s.t0 > t]
                if not nxt:
                    break
                t = sec(nxt[0], rng.uniform(0.5, 4))
                continue
            if p.role == "prefill":
                f = prefill_fig(c.sc, seg, t, rng)
                c.S(t, prefill_line(f), e)
                step = rng.uniform(3, 6)
            else:
                f = decode_fig(c.sc, seg, t, rng)
                c.S(t, decode_line(f), e)
                if f["retracted"]:
                    c.S(sec(t, rng.uniform(0.5, 3)), "KV cache pool is full. Retract requests. #retracted_reqs: "
                        f"{f['retracted']}, #new_tokens_gained: {f['retracted'] * rng.randint(7000, 9000)}, "
                        f"#new_token_ratio: {0.31 + 0.01 * f['retracted']:.4f} -> {0.5 + 0.01 * f['retracted']:.4f}", e)
                step = LOG_INTERVAL * (0.021 + 0.00012 * f["run"]) * rng.uniform(0.95, 1.08)
            c.log.stats[e].append(parsed(p.role, f))
            t = sec(t, step)
    pd.noise(c.R, c.tl, c.p.role, rng)
    for t in fails:
        e = rng.choice(p.engines)
        room = rng.getrandbits(62)
        rid = ms.uid(rng).replace("-", "")
        why = (f"Request {room} timed out after 300.{rng.randint(0, 9)}s in KVPoll.WaitingForInput"
               if rng.random() < 0.6 else "KVSender failed to post transfer")
        c.S(t, f"Decode transfer failed for request rank={e} decode_req.req.rid='{rid}' "
            f"decode_req.req.bootstrap_room={room} with exception KVTransferError(bootstrap_room={room}): {why}",
            e, "kv_transfer_error_lines")






def prefill_transfer_errors(c: Ctx, rng: random.Random) -> None:
    """transfer-failure, prefill side: the NIXL transfer worker's posts come back ERR (logger.exception)."""
    frames = [(f"{SITE}/disaggregation/nixl/conn.py", 2298, "_send_kvcache_chunk",
               'self._post_xfer(xfer_handle, "KVSender failed to post transfer")'),
              (f"{SITE}/disaggregation/nixl/conn.py", 1094, "_post_xfer", "raise _NixlPostError(error_msg)")]
    last = "sglang.srt.disaggregation.nixl.conn._NixlPostError: KVSender failed to post transfer"
    for seg in (s for s in c.tl.segs if not s.warm):
        t = sec(seg.t0, rng.uniform(50, 90))
        while t < seg.t1:
            e = rng.choice(c.p.engines)
            c.S(t, f"Unexpected transfer worker error for room {rng.getrandbits(62)}\n{ms.tb(frames, last)}", e,
                "kv_transfer_error_lines")
            t = sec(t, rng.uniform(60, 120))


def shutdown(c: Ctx, t: datetime) -> None:
    c.R(t, "WARN", "dynamo_runtime::runtime", "Received SIGTERM, starting graceful shutdown")


# ------------------------------ recipe, launch, orchestrator
def flags(role: str, sc: SScn) -> dict:
    f = {"served-model-name": SERVED, "model-path": "/model/", "trust-remote-code": True,
         "quantization": "modelopt_fp4", "kv-cache-dtype": "fp8_e4m3",
         "tensor-parallel-size": 4 if role == "prefill" else 8, "data-parallel-size": 4 if role == "prefill" else 8,
         "expert-parallel-size": 4 if role == "prefill" else 8, "enable-dp-attention": True,
         "enable-dp-lm-head": True, "moe-dense-tp-size": 1,
         "mamba-ssm-dtype": "bfloat16", "disaggregation-mode": role, "disable-radix-cache": True,
         "disaggregation-bootstrap-port": 31000, "disaggregation-transfer-backend": "nixl",
         "mem-fraction-static": 0.15 if role == "decode" and sc.kind == "startup-failure" else 0.8,
         "max-running-requests": 512 if role == "prefill" else 4096,
         "chunked-prefill-size": 32768 if role == "prefill" else 4096, "watchdog-timeout": 1000000,
         "page-size": 64, "attention-backend": "trtllm_mha", "moe-runner-backend": "flashinfer_trtllm",
         "context-length": 9236, "stream-interval": 50}
    if role == "decode":
        f |= {"decode-log-interval": LOG_INTERVAL, "cuda-graph-max-bs-decode": 512}
    return f


ENV = {"TORCH_DISTRIBUTED_DEFAULT_TIMEOUT": "1800", "PYTHONUNBUFFERED": "1", "NCCL_MNNVL_ENABLE": "1",
       "NCCL_CUMEM_ENABLE": "1", "MC_FORCE_MNNVL": "1", "SGLANG_DISAGGREGATION_HEARTBEAT_MAX_FAILURE": "100000",
       "SGLANG_DISAGGREGATION_BOOTSTRAP_TIMEOUT": "100000", "SGLANG_USE_MESSAGE_QUEUE_BROADCASTER": "0",
       "SGLANG_DISABLE_TP_MEMORY_INBALANCE_CHECK": "1"}


def launch(sc: SScn, p: Proc, head_ip: str, procs: list[Proc]) -> tuple[str, str]:
    """srtctl's `Env:` (sorted) and `Command:` (backends/sglang.py build_worker_command) for one worker."""
    env = {"HEAD_NODE_IP": head_ip, "ETCD_ENDPOINTS": f"http://{head_ip}:2379",
           "NATS_SERVER": f"nats://{head_ip}:4222", "DYN_SYSTEM_PORT": str(7500 + p.port_idx),
           "DYN_REQUEST_PLANE": "tcp", "DYN_SKIP_SGLANG_LOG_FORMATTING": "1", "DYN_LOG": "info"} | ENV
    cmd = ["python3", "-m", "dynamo.sglang", "--model-path", "/model/", "--served-model-name", SERVED, "--host",
           "0.0.0.0", "--port", str(8081 + p.port_idx), "--nccl-port", str(29500 + p.port_idx),
           "--disaggregation-mode", p.role]
    if p.role == "prefill":
        cmd += ["--disaggregation-bootstrap-port", "31000"]
    nodes = [q.node for q in procs if q.role == p.role and q.idx == p.idx]
    if len(nodes) > 1:
        cmd += ["--dist-init-addr", f"{p.dp_addr}:29400", "--nnodes", str(len(nodes)), "--node-rank",
                str(nodes.index(p.node))]
    cmd += ["--dump-config-to", f"/logs/{p.node}_config.json", "--request-plane", "tcp"]
    for k, v in sorted(flags(p.role, sc).items()):
        if k in ("model-path", "served-model-name"):
            continue
        cmd += [f"--{k}"] if v is True else [f"--{k}", str(v)]
    return f"Env: {' '.join(f'{k}={v}' for k, v in sorted(env.items()))}", f"Command: {' '.join(cmd)}"






def config_yaml(sc: SScn) -> str:
    env = "\n".join(f'    {k}: "{v}"' for k, v in ENV.items())
    return f"""name: "qwen35-nvfp4-gb200-sglang-{sc.pw}xdep4-1xdep8-{sc.name}"

model:
  path: "{ms.HF_PATH}"
  container: "{IMAGE}"
  precision: "fp4"

dynamo:
  version: "{DYNAMO}"
  install: true

frontend:
  type: dynamo
  enable_multiple_frontends: false

resources:
  gpu_type: "gb200"
  gpus_per_node: 4
  prefill_nodes: {sc.pw}
  decode_nodes: 2
  prefill_workers: {sc.pw}
  decode_workers: 1

backend:
  type: sglang

  prefill_environment:
{env}

  decode_environment:
{env}

  sglang_config:
    prefill:
{pd.yaml_flags(flags("prefill", sc), 6)}

    decode:
{pd.yaml_flags(flags("decode", sc), 6)}

{ms.benchmark_yaml(sc)}"""


def job_json(sc: SScn) -> dict:
    res = {"gpu_type": "gb200", "gpus_per_node": 4, "prefill_nodes": sc.pw, "decode_nodes": 2, "agg_nodes": 0,
           "prefill_workers": sc.pw, "decode_workers": 1, "agg_workers": 0, "gpus_per_prefill": 4,
           "gpus_per_decode": 8, "gpus_per_agg": None}
    return {"version": "2.0", "job_id": str(sc.job), "job_name": f"qwen35-nvfp4-gb200-sglang-{sc.name}",
            "generated_at": sec(sc.start, -40).isoformat(),
            "model": {"path": ms.HF_PATH, "container": IMAGE, "precision": "fp4"}, "resources": res,
            "backend_type": "sglang", "frontend_type": "dynamo",
            "benchmark": {"type": "sa-bench", "isl": ISL, "osl": OSL}, "tags": [sc.name], "setup_script": None}


# ------------------------------ assembling a run
def build_run(sc: SScn, seed: int, out: Path) -> None:
    rng = random.Random(seed)
    procs = topology(sc)
    tl = timeline(sc, procs, rng)
    run = out / "runs" / sc.name
    fails = pd.transfer_fail_times(tl, rng) if sc.kind == "transfer-failure" else []
    files, ctxs = {}, {}
    for p in procs:
        c = Ctx(sc, p, tl, rng, WLog(p.file, p.role, p.idx, p.node, p.engines), rng.getrandbits(52), procs[0].ip)
        dies = tl.crash is not None and p is procs[-1]
        startup(c, dies)
        if dies:
            startup_death(c)
        elif tl.crash is None:
            mine = [t for t in fails if p.role == "decode" and rng.random() < 0.5]
            runtime(c, mine)
            if sc.kind == "transfer-failure" and p.role == "prefill":
                prefill_transfer_errors(c, rng)
            shutdown(c, sec(tl.end, 1 + 0.1 * p.port_idx))
        else:
            shutdown(c, sec(tl.end, 1 + 0.1 * p.port_idx))
        ctxs[p.key] = c
        write(run / "logs" / p.file, c.log.render())
        files[f"logs/{p.file}"] = c.log.manifest() | {"kv_transfer_error_lines": c.log.n["kv_transfer_error_lines"]}
    eps: dict[str, dict] = {}
    for p in procs:
        ep = eps.setdefault(f"{p.role}-w{p.idx}", {"id": f"{p.role}-w{p.idx}", "role": p.role, "engines": 0,
                                                   "stats_samples": 0, "files": []})
        stats = ctxs[p.key].log.stats
        ep["engines"] += len(p.engines)   # every rank's lines carry its DP tag: diag sees each engine
        ep["stats_samples"] += sum(len(v) for v in stats.values())
        ep["files"].append(f"logs/{p.file}")
    pd.finish_run(sc, tl, procs, ctxs, rng, run, files, eps,
                  head={"engine": "sglang", "sglang_version": VERSION}, image=IMAGE,
                  run_name=f"qwen35-nvfp4-gb200-sglang-{sc.name}",
                  launch=lambda p: launch(sc, p, procs[0].ip, procs), gpus=(4 * sc.pw, 8),
                  config=config_yaml(sc), job=job_json(sc))


def generate(out: Path) -> None:
    for i, sc in enumerate(SCENARIOS):
        build_run(sc, 5000 + 31 * i, out)
