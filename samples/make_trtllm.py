"""TensorRT-LLM P/D sample runs (``python3 -m dynamo.trtllm`` behind the Dynamo frontend), called by make_samples.py.

Each run is a Qwen3.5-397B-A17B-NVFP4 8k1k job on GB300 modelled on srt-slurm's TRT-LLM disagg recipe
``recipes/multi-node/Qwen3.5/GB300/8k1k/trtllm/disagg/ctx2dep2_gen15tp4_mtp3_c90.yaml`` (TensorRT-LLM 1.3.0rc18,
``trtllm_config`` with ``print_iter_log: true``), without MTP and with fewer decode workers: DEP2 context
workers (``enable_attention_dp``, two per node, ``TLLM_PROFILE_LOG_RANKS=all`` as the recipe sets: each
attention-DP rank logs its own batch) and TP4 generation workers (one node each, the iteration line from rank 0
only, TensorRT-LLM's default). Every TensorRT-LLM line is built from its source's format strings: the Python
logger's ``[MM/DD/YYYY-HH:MM:SS] [TRT-LLM] [I] [_torch][RANK N]`` head, ``print_iter_log``'s line (the
``kv_cache_util`` form, ``N/A`` device time on an engine's first step, ``iter`` restarting with the real engine
after the KV-sizing dry run), ``Estimated max tokens in KV cache``, the C++ cache transceiver's
``Exception in ...`` errors, the executor's start-up failure and Open MPI's abort notice. TensorRT-LLM writes the
node's local time (``tz_hours`` ahead of UTC); Dynamo's Rust and Python lines (ANSI) are UTC and the noise.

The iteration line is written for every step, so runs are short: one concurrency each. The line has no queue
figure (``currank_total_requests`` counts requests fetched since start), so the logs show a context server's
saturation only as back-to-back full batches.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path

import make_samples as ms
import pd_common as pd
from make_samples import ISL, MEAN_IN, MEAN_OUT, Proc, Seg, Timeline, WLog, sec, write

IMAGE, VERSION, DYNAMO = "nvcr.io/nvidia/tensorrt-llm/release:1.3.0rc18", "1.3.0rc18", "1.3.0.dev20260708"
SERVED = "nvidia/Qwen3.5-397B-A17B-NVFP4"
PF_KV, DEC_KV = 401408, 2621440          # Estimated max tokens in KV cache, per rank
CTX_TOKENS, DEC_BATCH = 16384, 512       # prefill max_num_tokens (two prompts a step), decode max_batch_size
TRT = "/usr/local/lib/python3.12/dist-packages/tensorrt_llm"
DRY_RUN_STEPS = 2   # the KV-sizing dry run's iteration lines per logging rank


@dataclass(frozen=True)
class TScn:
    name: str
    job: int
    start: datetime
    rack: int
    kind: str                 # healthy | prefill-bound | decode-bound | transfer-failure | startup-failure
    concs: tuple[int, ...]
    mult: int
    rates: dict               # C -> (req/s, decode running/worker, -, -)
    tz_hours: int             # the nodes' local time ahead of UTC
    expect: dict = field(default_factory=dict)
    pw: int = 2               # DEP2 context workers (two per node)
    dw: int = 1               # TP4 generation workers
    ctx_busy: float = 0.5     # the share of wall time a context rank steps


SCENARIOS = [
    TScn("trtllm-healthy", 5160101, ms._t(2027, 1, 12, 2, 14, 9), 31, "healthy", (256,), 2,
         {256: (4.2, 208, 0, 0)}, 8,
         expect={"findings": [], "verdict": {"class": "healthy", "limiter": None}}),
    TScn("trtllm-prefill-bound", 5160102, ms._t(2027, 1, 12, 15, 40, 52), 32, "prefill-bound", (256,), 1,
         {256: (3.9, 61, 0, 0)}, -5, pw=1, dw=1, ctx_busy=1.0,
         expect={"findings": ["DIAG-B001"], "verdict": {"class": "prefill-bound", "limiter": None}}),
    TScn("trtllm-decode-bound", 5160103, ms._t(2027, 1, 13, 8, 5, 30), 33, "decode-bound", (384,), 1,
         {384: (3.1, 325, 0, 0)}, 0,
         expect={"findings": ["DIAG-B002", "DIAG-K004"],
                 "verdict": {"class": "decode-bound", "limiter": "kv-capacity"}}),
    TScn("trtllm-transfer-failure", 5160104, ms._t(2027, 1, 13, 23, 22, 17), 34, "transfer-failure", (256,), 2,
         {256: (3.8, 190, 0, 0)}, 8,
         expect={"findings": ["DIAG-E002"],
                 "verdict": {"class": "transfer-bound", "limiter": "kv-transfer failures"}}),
    TScn("trtllm-startup-failure", 5160105, ms._t(2027, 1, 14, 13, 51, 44), 35, "startup-failure", (256,), 2,
         {256: (4.2, 208, 0, 0)}, -5,
         expect={"findings": ["DIAG-E004"], "verdict": {"class": "invalid", "limiter": None}}),
]


# ------------------------------ topology, time
def topology(sc: TScn) -> list[Proc]:
    pn = (sc.pw + 1) // 2
    nodes = [(f"gb300-r{sc.rack:02d}-n{20 + i}", f"10.1.{sc.rack}.{20 + i}") for i in range(pn + sc.dw)]
    procs = [Proc("prefill", w, *nodes[w // 2], [0, 1], 2, [2 * (w % 2), 2 * (w % 2) + 1], w, nodes[w // 2][1])
             for w in range(sc.pw)]
    return procs + [Proc("decode", k, *nodes[pn + k], [0], 1, [0, 1, 2, 3], sc.pw + k, nodes[pn + k][1])
                    for k in range(sc.dw)]


def timeline(sc: TScn, procs: list[Proc], rng: random.Random) -> Timeline:
    tl = ms.schedule(sc, procs, rng, launch_s=34, ready_s={"prefill": 212, "decode": 251}, jitter_s=18)
    if sc.kind == "startup-failure":   # the last generation worker's executor fails to build; nothing is served
        tl.crash = sec(tl.launch, 171 + rng.uniform(0, 6))
        tl.segs, tl.bench_end, tl.end = [], sec(tl.crash, 9), sec(tl.crash, 12)
    return tl


# ------------------------------ TensorRT-LLM's lines
def local(sc: TScn, t: datetime) -> datetime:
    return t + timedelta(hours=sc.tz_hours)


def trt(sc: TScn, t: datetime, msg: str, rank: int, sev: str = "I") -> str:
    """tensorrt_llm/logger.py: ``[%m/%d/%Y-%H:%M:%S] [TRT-LLM] [I] `` and the PyTorch backend's rank tag, local time."""
    return f"[{local(sc, t):%m/%d/%Y-%H:%M:%S}] [TRT-LLM] [{sev}] [_torch][RANK {rank}] {msg}"


def iter_line(sc: TScn, t: datetime, rank: int, f: dict) -> str:
    """py_executor.py profile_step under print_iter_log (the kv_cache_util form)."""
    dev = "N/A" if f["dev"] is None else f"{f['dev']}ms"
    kv = "N/A" if f["kv"] is None else f"{f['kv']:.3f}"
    return trt(sc, t, f"iter = {f['iter']}, global_rank = {f['grank']}, rank = {rank}, num_scheduled_requests = "
                      f"{f['sched']}, kv_cache_util = {kv}, currank_total_requests = {f['cur']}/{f['tot']}, "
                      f"host_step_time = {f['host']}ms, prev_device_step_time = {dev}, timestamp = "
                      f"{local(sc, t):%Y-%m-%d %H:%M:%S}, states = {{'num_ctx_requests': {f['ctx']}, "
                      f"'num_ctx_tokens': {f['ctx_tok']}, 'num_generation_tokens': {f['gen']}, "
                      f"'cached_kv_tokens': 0}}", rank)


def parsed(f: dict) -> dict:
    """What an iteration line holds in diag's stats fields (the MANIFEST's first / last record): a step has no
    rate of its own (the run model folds steps into rates) and no queue."""
    return {"prompt_tps": None, "gen_tps": None, "running": f["sched"], "waiting": None, "preemptions": None,
            "kv_usage": None if f["kv"] is None else round(float(f"{f['kv']:.3f}") * 100, 6), "prefix_hit": None,
            "ext_hit": None, "md": None}


# ------------------------------ one worker file
@dataclass
class Ctx:
    sc: TScn
    p: Proc
    tl: Timeline
    rng: random.Random
    log: WLog
    iid: int
    head: str

    def T(self, t: datetime, msg: str, rank: int, sev: str = "I", *counts: str) -> None:
        self.log.add(t, trt(self.sc, t, msg, rank, sev), *counts)

    def R(self, t: datetime, level: str, target: str, msg: str, **f: object) -> None:
        self.log.add(t, ms.rust(t, level, target, msg, True, **f))

    def P(self, t: datetime, level: str, target: str, msg: str) -> None:
        self.log.add(t, ms.dynpy(t, level, target, msg))


def ranks(p: Proc) -> range:
    """The MPI ranks of a worker: DEP2 context (2), TP4 generation (4)."""
    return range(2 if p.role == "prefill" else 4)


def startup(c: Ctx, dies: bool) -> None:
    """Dynamo's runtime, then TensorRT-LLM's executor: the LLM args, the weights, the KV-sizing dry run (its own
    iteration lines), the KV cache, the transceiver; the endpoint registers."""
    p, rng, sc = c.p, c.rng, c.sc
    t0 = sec(c.tl.launch, rng.uniform(1, 3))
    span = ((c.tl.crash if dies else c.tl.ready[p.key]) - t0).total_seconds()

    def at(f: float) -> datetime:
        return sec(t0, f * span)

    c.log.add(at(0), f"Installing ai-dynamo=={DYNAMO} into /opt/dynamo/venv (setup_script: none)")
    c.R(at(0.02), "INFO", "dynamo_runtime::distributed", "Initializing distributed runtime", namespace="dynamo",
        request_plane="tcp")
    c.R(at(0.021), "INFO", "dynamo_runtime::transports::etcd", "Connected to etcd",
        endpoints=f'["http://{c.head}:2379"]')
    c.P(at(0.03), "INFO", "dynamo.trtllm.main", f"Initializing the worker with config: disaggregation_mode={p.role}, "
        f"extra_engine_args=/logs/trtllm_config_{p.role}.yaml")
    c.log.add(at(0.04), f"[TensorRT-LLM] TensorRT LLM version: {VERSION}")
    for r in ranks(p):
        c.T(at(0.1 + 0.002 * r), "ATTENTION RUNTIME FEATURES:  AttentionRuntimeFeatures(chunked_prefill=False, "
            "cache_reuse=False, has_speculative_draft_tokens=False, chunk_size=8192)", r)
    if dies:
        return
    tokens = PF_KV if p.role == "prefill" else DEC_KV
    logged = p.engines
    for r in logged:   # the KV-sizing dry run: its own engine lifecycle, iteration lines from iter 1
        for it in range(1, DRY_RUN_STEPS + 1):
            t = at(0.6 + 0.01 * it + 0.002 * r)
            f = {"iter": it, "grank": r, "sched": 1, "kv": None if it == 1 else 0.004, "cur": 0, "tot": 0,
                 "host": round(rng.uniform(900, 1400) / it, 2),
                 "dev": None if it == 1 else round(rng.uniform(600, 900), 2),
                 "ctx": 1, "ctx_tok": CTX_TOKENS if p.role == "prefill" else 1024, "gen": 0}
            c.log.add(t, iter_line(sc, t, r, f))
            c.log.stats[r].append(parsed(f))
    for r in ranks(p):
        c.T(at(0.7 + 0.002 * r), f"Estimated max tokens in KV cache : {tokens}", r)
    for r in ranks(p):
        c.T(at(0.75 + 0.002 * r), "Using UCX kv-cache transceiver. If your devices are not in the same domain, "
            "please consider setting UCX_CUDA_IPC_ENABLE_MNNVL=n, UCX_RNDV_SCHEME=put_zcopy and/or unset "
            "UCX_NET_DEVICES upon server hangs or lower-than-expected performance.", r)   # logger.info
    tcp = "dynamo_runtime::pipeline::network::tcp::server"
    c.R(at(0.97), "INFO", tcp, "Endpoint starting with request plane mode: tcp")
    port = 30000 + rng.randint(0, 9999)
    for ep in ("generate", "clear_kv_blocks"):
        c.R(at(0.98), "INFO", tcp, f"Registered endpoint '{ep}' with shared TCP server on {p.ip}:{port}")
    c.P(c.tl.ready[p.key], "INFO", "dynamo.trtllm.main", f"Model registration succeeded for {SERVED}")


def startup_death(c: Ctx) -> None:
    """The generation worker's executor fails to build on rank 2 (the KV cache does not fit: the memory fraction
    leaves no room); worker_main reports it, the proxy raises, and the MPI world aborts."""
    tc = c.tl.crash
    frames = [(f"{TRT}/executor/worker.py", 251, "worker_main",
               "worker: GenerationExecutorWorker = worker_cls("),
              (f"{TRT}/_torch/pyexecutor/py_executor_creator.py", 602, "create_py_executor",
               "kv_cache_creator.build_managers(resources, estimating_kv_cache=False)"),
              (f"{TRT}/_torch/pyexecutor/_util.py", 681, "build_managers",
               "kv_cache_manager = self._create_kv_cache_manager(")]
    err = ("ValueError: Insufficient memory for KV cache: free_gpu_memory_fraction 0.05 of 13.41 GiB free leaves "
           "0.67 GiB, less than one block per sequence")
    c.T(tc, f"Failed to initialize executor on rank 2: {err.split(': ', 1)[1]}", 2, "E")
    c.T(sec(tc, 0.01), ms.tb(frames, err), 2, "E")
    c.T(sec(tc, 0.4), "Executor worker returned error", 0, "E")
    c.log.add(sec(tc, 0.6), "MPI_ABORT was invoked on rank 2 in communicator MPI_COMM_WORLD\nwith errorcode 1.\n\n"
              "NOTE: invoking MPI_ABORT causes Open MPI to kill all MPI processes.\nYou may or may not see output "
              "from other processes, depending on\nexactly when Open MPI kills them.")


def envelope(seg: Seg, t: datetime) -> float:
    frac = (t - seg.t0) / (seg.t1 - seg.t0)
    return max(0.05, min(1.0, frac / 0.12, (1.0 - frac) / 0.08))


def resume(tl: Timeline, t: datetime, rng: random.Random, lag: tuple[float, float]) -> datetime | None:
    """Between two segments: the next one's start plus a lag drawn from ``lag`` (None after the last)."""
    nxt = [s.t0 for s in tl.segs if s.t0 > t]
    return sec(nxt[0], rng.uniform(*lag)) if nxt else None


def decode_steps(c: Ctx) -> None:
    """Rank 0 of a TP4 generation worker: a step while requests run, each a generation token per request."""
    sc, tl, rng = c.sc, c.tl, c.rng
    it, cur, dev = 0, 0, None
    t = sec(tl.segs[0].t0, rng.uniform(2, 6))
    while t < tl.end:
        seg = ms.seg_at(tl, t)
        if seg is None:
            if (after := resume(tl, t, rng, (2, 6))) is None:
                break
            t = after
            continue
        env = envelope(seg, t)
        run = max(1, min(DEC_BATCH, int(seg.drun * env * (1 + rng.gauss(0, 0.02)))))
        kv = run * (MEAN_IN + MEAN_OUT / 2) / DEC_KV * (1 + rng.gauss(0, 0.01))
        if sc.kind == "decode-bound" and env > 0.6:    # the KV cache, not the batch, holds the decode batch
            kv = 0.962 + 0.03 * rng.random()
            run = int(kv * DEC_KV / (MEAN_IN + MEAN_OUT / 2))
        host = round((0.021 + 0.00021 * run) * 1000 * rng.uniform(0.97, 1.05), 2)
        it += 1
        new = rng.random() < run / (MEAN_OUT * 0.9)
        cur += new
        f = {"iter": it, "grank": 0, "sched": run, "kv": min(kv, 0.999), "cur": cur, "tot": cur, "host": host,
             "dev": dev, "ctx": 0, "ctx_tok": 0, "gen": run}
        c.log.add(t, iter_line(sc, t, 0, f))
        c.log.stats[0].append(parsed(f))
        if sc.kind == "decode-bound" and env > 0.6 and rng.random() < 0.004:
            c.T(t, "num_fitting_reqs =0 and fitting_disagg_gen_init_requests is empty , may not have enough "
                "kvCache", 0, "W")
        dev = round(host * rng.uniform(0.9, 0.97), 2)
        t = sec(t, host / 1000)


def prefill_steps(c: Ctx, r: int) -> None:
    """One attention-DP rank of a DEP2 context worker: a step per batch of prompts, then idle until the next."""
    sc, tl, rng = c.sc, c.tl, c.rng
    it, cur, dev = 0, 0, None
    t = sec(tl.segs[0].t0, rng.uniform(0.5, 3))
    while t < tl.end:
        seg = ms.seg_at(tl, t)
        if seg is None:
            if (after := resume(tl, t, rng, (0.5, 3))) is None:
                break
            t, dev = after, None
            continue
        env = envelope(seg, t)
        busy = min(1.0, sc.ctx_busy * env) if sc.ctx_busy < 1 else (1.0 if env > 0.5 else env)
        full = busy >= 1.0 or rng.random() < busy
        n = 2 if full else 1
        toks = sum(rng.randint(int(0.8 * ISL), ISL) for _ in range(n))
        host = round((0.045 + toks * 6.0e-5) * 1000 * rng.uniform(0.97, 1.04), 2)
        it += 1
        cur += n
        inflight = n + rng.randint(0, 3)     # prompts whose KV waits for its transfer to decode
        f = {"iter": it, "grank": r, "sched": n, "kv": inflight * ISL / PF_KV,
             "cur": cur, "tot": 2 * cur + rng.randint(-2, 2) if cur > 2 else cur, "host": host, "dev": dev,
             "ctx": n, "ctx_tok": toks, "gen": 0}
        c.log.add(t, iter_line(sc, t, r, f))
        c.log.stats[r].append(parsed(f))
        dev = round(host * rng.uniform(0.93, 0.98), 2)
        gap = 0.0 if busy >= 1.0 else rng.expovariate(busy / max(1e-3, 1 - busy)) * host / 1000
        t = sec(t, host / 1000 + gap)


def transfer_errors(c: Ctx, fails: list[datetime]) -> None:
    """dataTransceiver.cpp: the generation side's requester and the context side's sender failing a request's KV
    transfer over UCX (the connection's error as the request's exception)."""
    rng = c.rng
    for t in fails:
        rid = rng.randint(10**5, 10**6)
        if c.p.role == "decode":
            msg = (f"Exception in DataRequester request(): request id:{rid} , request context id:{rid + 7} : "
                   f"[TensorRT-LLM][ERROR] UCX error: Connection reset by remote peer (ucxComm.cpp:188)")
        else:
            msg = (f"Exception in sendAndRemoveResponse: [TensorRT-LLM][ERROR] UCX error: Endpoint timeout "
                   f"(ucxComm.cpp:211) request id: {rid}")
        c.log.add(t, f"{local(c.sc, t):%m-%d-%Y %H:%M:%S}.{rng.randint(0, 999999):06d} [TRT-LLM] [E] [{0}] {msg}",
                  "kv_transfer_error_lines")


def shutdown(c: Ctx, t: datetime) -> None:
    c.R(t, "WARN", "dynamo_runtime::runtime", "Received SIGTERM, starting graceful shutdown")


# ------------------------------ recipe, launch
ENV = {"TRTLLM_SERVER_DISABLE_GC": "1", "TRTLLM_WORKER_DISABLE_GC": "1", "NCCL_GRAPH_MIXING_SUPPORT": "0",
       "TRTLLM_ENABLE_PDL": "1", "TLLM_LOG_LEVEL": "INFO", "PYTHONNOUSERSITE": "1"}


def role_env(role: str) -> dict:
    """The recipe's environments: every context rank logs its iteration line; generation logs rank 0's."""
    return ENV | ({"TLLM_PROFILE_LOG_RANKS": "all"} if role == "prefill" else {})


def trtllm_config(role: str, sc: TScn) -> str:
    """The recipe's ``trtllm_config.<role>`` block (the real recipe's fields; no MTP)."""
    frac = 0.05 if role == "decode" and sc.kind == "startup-failure" else (0.85 if role == "prefill" else 0.8)
    if role == "prefill":
        head = f"""      trust_remote_code: true
      max_batch_size: 2
      max_num_tokens: {CTX_TOKENS}
      max_seq_len: 9256
      tensor_parallel_size: 2
      moe_expert_parallel_size: 2
      enable_attention_dp: true
      pipeline_parallel_size: 1
      print_iter_log: true
      cuda_graph_config: null
      disable_overlap_scheduler: true"""
    else:
        head = f"""      trust_remote_code: true
      tensor_parallel_size: 4
      moe_expert_parallel_size: 1
      enable_attention_dp: false
      pipeline_parallel_size: 1
      max_batch_size: {DEC_BATCH}
      max_num_tokens: {DEC_BATCH}
      max_seq_len: 9256
      cuda_graph_config:
        enable_padding: true
        max_batch_size: {DEC_BATCH}
      print_iter_log: true
      stream_interval: 100
      num_postprocess_workers: 4"""
    return f"""{head}
      kv_cache_config:
        enable_block_reuse: false
        free_gpu_memory_fraction: {frac}
        dtype: fp8
      moe_config:
        backend: {"CUTEDSL" if role == "prefill" else "TRTLLM"}
      cache_transceiver_config:
        max_tokens_in_buffer: 8192
        backend: UCX
        kv_transfer_timeout_ms: 600000"""


def launch(sc: TScn, p: Proc, head_ip: str) -> tuple[str, str]:
    """srtctl's `Env:` (sorted) and `Command:` (backends/trtllm.py build_worker_command) for one worker."""
    env = {"HEAD_NODE_IP": head_ip, "ETCD_ENDPOINTS": f"http://{head_ip}:2379",
           "NATS_SERVER": f"nats://{head_ip}:4222", "DYN_SYSTEM_PORT": str(7500 + p.port_idx),
           "DYN_REQUEST_PLANE": "tcp", "DYN_LOG": "info"} | role_env(p.role)
    cmd = ["numactl", "-m", "0,1", "trtllm-llmapi-launch", "python3", "-m", "dynamo.trtllm", "--model-path", "/model",
           "--served-model-name", "model", "--disaggregation-mode", p.role, "--extra-engine-args",
           f"/logs/trtllm_config_{p.role}.yaml", "--request-plane", "tcp"]
    return f"Env: {' '.join(f'{k}={v}' for k, v in sorted(env.items()))}", f"Command: {' '.join(cmd)}"


def config_yaml(sc: TScn) -> str:
    def env(role: str) -> str:
        return "\n".join(f'    {k}: "{v}"' for k, v in role_env(role).items())
    return f"""name: "ctx{sc.pw}dep2_gen{sc.dw}tp4_{sc.name}"

model:
  path: "{ms.HF_PATH}"
  container: "{IMAGE}"
  precision: "fp4"

dynamo:
  version: "{DYNAMO}"
  install: true
  request_plane: tcp

frontend:
  type: dynamo
  enable_multiple_frontends: false

resources:
  gpu_type: "gb300"
  gpus_per_node: 4
  prefill_nodes: {(sc.pw + 1) // 2}
  prefill_workers: {sc.pw}
  gpus_per_prefill: 2
  decode_nodes: {sc.dw}
  decode_workers: {sc.dw}
  gpus_per_decode: 4

backend:
  type: trtllm

  prefill_environment:
{env("prefill")}

  decode_environment:
{env("decode")}

  trtllm_config:
    prefill:
{trtllm_config("prefill", sc)}

    decode:
{trtllm_config("decode", sc)}

{ms.benchmark_yaml(sc)}"""


def job_json(sc: TScn) -> dict:
    res = {"gpu_type": "gb300", "gpus_per_node": 4, "prefill_nodes": (sc.pw + 1) // 2, "decode_nodes": sc.dw,
           "agg_nodes": 0, "prefill_workers": sc.pw, "decode_workers": sc.dw, "agg_workers": 0,
           "gpus_per_prefill": 2, "gpus_per_decode": 4, "gpus_per_agg": None}
    return {"version": "2.0", "job_id": str(sc.job), "job_name": f"qwen35-nvfp4-gb300-trtllm-{sc.name}",
            "generated_at": sec(sc.start, -40).isoformat(),
            "model": {"path": ms.HF_PATH, "container": IMAGE, "precision": "fp4"}, "resources": res,
            "backend_type": "trtllm", "frontend_type": "dynamo",
            "benchmark": {"type": "sa-bench", "isl": ISL, "osl": ms.OSL}, "tags": [sc.name], "setup_script": None}


# ------------------------------ assembling a run
def build_run(sc: TScn, seed: int, out: Path) -> None:
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
            if p.role == "decode":
                decode_steps(c)
            else:
                for r in p.engines:
                    prefill_steps(c, r)
            pd.noise(c.R, tl, p.role, rng)
            transfer_errors(c, [t for t in fails if rng.random() < 0.5])
            shutdown(c, sec(tl.end, 1 + 0.1 * p.port_idx))
        else:
            shutdown(c, sec(tl.end, 1 + 0.1 * p.port_idx))
        ctxs[p.key] = c
        write(run / "logs" / p.file, c.log.render())
        files[f"logs/{p.file}"] = c.log.manifest() | {"kv_transfer_error_lines": c.log.n["kv_transfer_error_lines"],
                                                      "utc_offset_hours": sc.tz_hours}
    eps: dict[str, dict] = {}
    for p in procs:
        ep = eps.setdefault(f"{p.role}-w{p.idx}", {"id": f"{p.role}-w{p.idx}", "role": p.role, "engines": 0,
                                                   "stats_samples": 0, "samples": 0, "files": []})
        stats = ctxs[p.key].log.stats
        # the ranks that log iteration lines of the real engine (the dry run's steps are start-up work)
        ep["engines"] += sum(len(v) > DRY_RUN_STEPS for v in stats.values())
        ep["stats_samples"] += sum(len(v) for v in stats.values())
        ep["samples"] += sum(max(len(v) - DRY_RUN_STEPS, 0) for v in stats.values())
        ep["files"].append(f"logs/{p.file}")
    pd.finish_run(sc, tl, procs, ctxs, rng, run, files, eps,
                  head={"engine": "trtllm", "trtllm_version": VERSION, "utc_offset_hours": sc.tz_hours},
                  image=IMAGE, run_name=f"qwen35-nvfp4-gb300-trtllm-{sc.name}",
                  launch=lambda p: launch(sc, p, procs[0].ip), gpus=(2 * sc.pw, 4 * sc.dw),
                  config=config_yaml(sc), job=job_json(sc))


def generate(out: Path) -> None:
    for i, sc in enumerate(SCENARIOS):
        build_run(sc, 6000 + 37 * i, out)
