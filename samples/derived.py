"""Sample runs derived from the generated ones: the same run, with the recipe and what ran made to
differ, or with one P/D pitfall in what ran and the failure it causes in the logs (symptom -> cause).

Each derived run copies a base run under a new job id and applies text edits (regular expressions over
named files), so the logs stay the generator's realistic ones. ``samples/make_samples.py`` calls
:func:`generate` after the base runs; the byte-identical regeneration test covers these too.
"""

from __future__ import annotations

import re
import shutil
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

OOM = r"torch\.OutOfMemoryError: CUDA out of memory\.[^\n]*"
DS_ASSERT = "AssertionError: 3-read Mamba conv transfer requires DS conv state layout. Set VLLM_SSM_CONV_STATE_LAYOUT=DS"
BLOCK_ASSERT = "AssertionError: Local block size 16 is not divisible by remote block size 32 or vice versa."


@dataclass(frozen=True)
class Edit:
    files: str          # glob under the run directory
    pattern: str
    repl: str
    count: int = 0      # 0: every match; the edit must match at least once


@dataclass(frozen=True)
class Derived:
    name: str
    base: str
    job: int
    why: str
    expect: tuple[str, ...]                       # codes the run must report, with its links
    verdict: tuple[str, str | None]               # the run's verdict: class and limiter
    links: tuple[tuple[str, str], ...]            # (symptom, cause) pairs the report must link
    edits: tuple[Edit, ...]
    append: tuple[tuple[str, str], ...] = ()      # (file, text) appended
    remove: tuple[str, ...] = ()                  # globs of files the derived run does not have
    startup_only: bool = False                    # the logs end before any stats line: manifest counts go to 0
    never_started: tuple[str, ...] = ()           # endpoints whose logs end before any engine's line


def _decode_cmd(flag: str) -> Edit:
    """Add a flag to every decode worker's ``Command:`` line."""
    return Edit("logs/sweep_*.log", r"(Command: python3 -m dynamo\.vllm [^\n]*--disaggregation-mode decode[^\n]*)",
                rf"\1 {flag}")


def _prefill_cmd(flag: str) -> Edit:
    return Edit("logs/sweep_*.log", r"(Command: python3 -m dynamo\.vllm [^\n]*--disaggregation-mode prefill[^\n]*)",
                rf"\1 {flag}")


def _polls(start_h: int, start_m: int, n: int, line: str) -> str:
    """``n`` orchestrator readiness polls a minute apart from HH:MM:37."""
    out = []
    for i in range(n):
        m = start_m + i
        out.append(f"2026-08-27 {start_h + m // 60:02d}:{m % 60:02d}:37 [INFO] {line}\n")
    return "".join(out)


def _engine_waits(node: str, started: datetime, since_s: int, until_s: int) -> tuple[str, str]:
    """A Dynamo worker's periodic "waiting for engine" line (Rust tracing, ANSI-coloured like the base run's
    Dynamo lines) every 10-30 s from ``since_s`` to ``until_s`` seconds of uptime: noise, no record."""
    lines, up, k = [], since_s, 0
    while up <= until_s:
        t = started + timedelta(seconds=up, microseconds=(k * 104729) % 1_000_000)
        lines.append(f"\x1b[2m{t.strftime('%Y-%m-%dT%H:%M:%S.%fZ')}\x1b[0m \x1b[32m INFO\x1b[0m "
                     "\x1b[2mdynamo_runtime::system_status_server\x1b[0m\x1b[2m:\x1b[0m waiting for engine "
                     "\x1b[3mendpoint\x1b[0m\x1b[2m=\x1b[0mgenerate \x1b[3muptime_s\x1b[0m\x1b[2m=\x1b[0m"
                     f"{up}\n")
        k += 1
        up += 10 + (k * 7) % 21
    return f"logs/{node}_decode_w0.out", "".join(lines)


_DECODE_UP = datetime(2026, 8, 27, 18, 12, 50, tzinfo=UTC)   # the base run's decode processes start
_STUCK_POLLS = _polls(18, 17, 3, "Model is not ready, waiting for 0 prefills and 2 decodes. Have 4 prefills and 0 decodes.")
_STALL_POLLS = (_polls(18, 17, 1, "Model is not ready, waiting for 1 prefills and 2 decodes. Have 3 prefills and 0 decodes.")
                + _polls(18, 18, 8, "Model is not ready, waiting for 1 prefills and 0 decodes. Have 3 prefills and 2 decodes."))

# Dynamo's own series in place of vLLM's (ai-dynamo 1.6.1 common/utils/prometheus.py LLMBackendMetrics):
# the KV gauge per DP rank, 0..1; the frontend's series are Dynamo's already. Text inside JSON strings.
_DYNAMO_ONLY = (
    Edit("logs/raw_prometheus.jsonl", r'vllm:kv_cache_usage_perc\{engine=\\"(\d+)\\",model_name=\\"([^"\\]*)\\"\}',
         r'dynamo_component_gpu_cache_usage_percent{dp_rank=\\"\1\\",model=\\"\2\\"}'),
    Edit("logs/raw_prometheus.jsonl", r"# HELP vllm:kv_cache_usage_perc [^\\]*\\n# TYPE vllm:kv_cache_usage_perc",
         r"# HELP dynamo_component_gpu_cache_usage_percent GPU cache usage as a percentage (0.0-1.0).\\n"
         r"# TYPE dynamo_component_gpu_cache_usage_percent"),
    Edit("logs/raw_prometheus.jsonl", r"(?:# (?:HELP|TYPE) vllm:[^\\]*|vllm:\w+\{[^}]*\} [^\\]*)\\n", ""),
)


# ---------------------------------------------------------------- log lines of the failure samples
# Each in the base runs' own shapes: Dynamo's Rust tracing (ANSI), vLLM records in Dynamo's ANSI format, UCX's
# epoch-headed lines, srtctl's orchestrator lines. The wordings are the programs' own (parsers/catalog/faults.toml
# names where each comes from).
_RUST_LEVEL = {"ERROR": "\x1b[31mERROR", "WARN": "\x1b[33m WARN", "INFO": "\x1b[32m INFO"}
_VLLM_LEVEL = {"ERROR": "\x1b[31mERROR", "WARNING": "\x1b[33mWARNING", "INFO": "\x1b[32mINFO"}


def _iso(t: datetime) -> str:
    return t.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _rust(t: datetime, level: str, target: str, msg: str) -> str:
    """A Dynamo Rust tracing line."""
    return f"\x1b[2m{_iso(t)}\x1b[0m {_RUST_LEVEL[level]}\x1b[0m \x1b[2m{target}\x1b[0m\x1b[2m:\x1b[0m {msg}\n"


def _vllm(proc: str, level: str, t: datetime, site: str, msgs: list[str]) -> str:
    """A vLLM record (several lines: a traceback) of process ``proc`` at ``site``."""
    head = f"\x1b[0;36m({proc})\x1b[0;0m {_VLLM_LEVEL[level]}\x1b[0m \x1b[90m{t:%m-%d %H:%M:%S}\x1b[0m \x1b[90m[{site}]\x1b[0m "
    return "".join(f"{head}{m}\n" for m in msgs)


def _ucx(t: datetime, where: str, site: str, msg: str) -> str:
    """A UCX error line (NIXL's transport): epoch seconds, host:pid:thread, file:line."""
    return f"[{t.timestamp():.6f}] [{where}:0] {site:>22}  UCX  ERROR {msg}\n"


def _ucx_registration(t: datetime, where: str, addr: str, length: int, hca: str) -> str:
    """UCX failing to pin GPU memory with the HCA (no peer-memory module on the node): ib_md.c, then ucp_mm.c."""
    return (_ucx(t, where, "ib_md.c:349", f"ibv_reg_mr(address={addr}, length={length}, access=0xf) failed: Bad address")
            + _ucx(t + timedelta(microseconds=81), where, "ucp_mm.c:164",
                   f"failed to register address {addr} mem_type bit 0x2 length {length} on md[5]={hca}: "
                   "Input/output error (md reg_mem_types 0x3)"))


_TCP = "dynamo_runtime::pipeline::network::tcp::client"
_STORM_AT = datetime(2026, 9, 3, 4, 3, 34, tzinfo=UTC)   # after the engine-crash OOM (04:03:01), before SIGTERM


def _storm(k: int, peer: str = "10.0.5.15:43119") -> str:
    """What a worker logs while the dead decode node goes away: refused connections to it, the etcd lease's
    keep-alive ending, NATS disconnecting (ai-dynamo-runtime 1.6.1 wordings)."""
    t = _STORM_AT + timedelta(microseconds=(k * 104729) % 500_000)
    refused = [_rust(t + timedelta(seconds=0.9 * i), "WARN", _TCP,
                     f"Failed to connect to {peer}: Connection refused (os error 111)") for i in range(4)]
    return "".join([*refused, _rust(t + timedelta(seconds=3.9), "WARN", "dynamo_runtime::transports::etcd",
                                    "Keep-alive stream unexpectedly ended"),
                    _rust(t + timedelta(seconds=4.3), "ERROR", "dynamo_runtime::transports::nats", "NATS is disconnected"),
                    _rust(t + timedelta(seconds=4.8), "WARN", _TCP,
                          f"Failed to connect to {peer}: Connection refused (os error 111)")])


_DEAD = "vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue. See stack trace (above) for the root cause."


def _dead_fanout(t: datetime) -> str:
    """The surviving decode node of the DEP group: its API server's output handler and Dynamo's handlers."""
    out = _vllm("APIServer pid=5600", "ERROR", t, "async_llm.py:745", ["AsyncLLM output_handler failed.", _DEAD])
    for i, rid in enumerate(("5a0f3c1e-6c02-4d3a-9a51-0d3f8f7e2c11", "b1e7d9a4-3f25-4c6e-8d0a-7e9c2b4f5a60",
                             "0c9e4b7d-2a18-4f3c-b6e5-91d2a7c3e804")):
        out += _rust(t + timedelta(milliseconds=50 * (i + 1)), "ERROR", "handlers.generate",
                     f"Error in generate for request {rid}: {_DEAD}")
    return out


_STORM_EDITS = (
    *(Edit(f"logs/{f}", r"(?m)^(?=[^\n]*Received SIGTERM, starting graceful shutdown)", _storm(k), 1)
      for k, f in enumerate(("gb200-r05-n12_prefill_w0.out", "gb200-r05-n12_prefill_w1.out",
                             "gb200-r05-n13_prefill_w2.out", "gb200-r05-n13_prefill_w3.out"))),
    Edit("logs/gb200-r05-n14_decode_w0.out", r"(?m)^(?=[^\n]*Received SIGTERM, starting graceful shutdown)",
         _dead_fanout(_STORM_AT - timedelta(seconds=31)) + _storm(5), 1),
)
_FRONTEND_REFUSED = "".join(_rust(datetime(2026, 9, 3, 4, 4, 29, tzinfo=UTC) + timedelta(seconds=0.7 * i), "WARN", _TCP,
                                  "Failed to connect to 10.0.5.15:43119: Connection refused (os error 111)")
                            for i in range(3))

# The zero-token run: UCX cannot pin the decode side's GPU memory with the HCA at the first transfers (before
# the first stats interval), so every transfer fails from the first; the benchmark still ends "successfully".
_ZERO_TOKENS = (
    Edit("logs/*_w*.out", r"Num successful transfers=(\d+)(.*?)Num failed transfers=\d+",
         r"Num successful transfers=0\2Num failed transfers=\1"),
    Edit("logs/gb200-r02-n14_decode_w0.out", r"(?m)^(?=[^\n]*\[loggers\.py:271\])",
         _ucx_registration(datetime(2026, 9, 24, 11, 27, 15, 412277, tzinfo=UTC), "gb200-r02-n14:4151",
                           "0x7f3c1a000000", 106954752, "mlx5_0"), 1),
    Edit("logs/gb200-r02-n15_decode_w0.out", r"(?m)^(?=[^\n]*\[loggers\.py:271\])",
         _ucx_registration(datetime(2026, 9, 24, 11, 27, 6, 404118, tzinfo=UTC), "gb200-r02-n15:6823",
                           "0x7f51e6000000", 106954752, "mlx5_0"), 1),
    Edit("logs/benchmark.out", r"(Total generated tokens:\s+)\d+", r"\g<1>0"),
    Edit("logs/benchmark.out", r"((?:Peak o|O)utput token throughput \(tok/s\):\s+)[\d.]+", r"\g<1>0.00"),
    Edit("logs/sa-bench_isl_8192_osl_1024/*.json", r'("total_output_tokens": )\d+', r"\g<1>0"),
    Edit("logs/sa-bench_isl_8192_osl_1024/*.json", r'("(?:output_throughput|peak_output_tokens_per_s)": )[\d.]+',
         r"\g<1>0.0"),
    Edit("logs/benchmark-rollup.json", r'("total_output_tokens": )\d+', r"\g<1>0"),
    Edit("logs/benchmark-rollup.json", r'("throughput_toks": )[\d.]+', r"\g<1>0.0"),
)

# NIXL's start-up registration of the KV caches fails on one decode node (UCX cannot pin GPU memory with the
# HCA); the worker, then its engine core, fail to start; srtctl sees the critical process exit and tears down.
_T_REG = datetime(2026, 8, 27, 18, 15, 44, 603311, tzinfo=UTC)
_NIXL_FRAMES = [
    "WorkerProc failed to start.",
    "Traceback (most recent call last):",
    '  File "/usr/local/lib/python3.12/dist-packages/vllm/v1/executor/multiproc_executor.py", line 734, in worker_main',
    "    worker = WorkerProc(*args, **kwargs)",
    '  File "/usr/local/lib/python3.12/dist-packages/vllm/v1/worker/gpu_worker.py", line 512, in initialize_from_config',
    "    self.model_runner.initialize_kv_cache(kv_cache_config)",
    '  File "/usr/local/lib/python3.12/dist-packages/vllm/distributed/kv_transfer/kv_connector/v1/nixl/worker.py", line 1188, in register_kv_caches',
    "    self.nixl_wrapper.register_memory(descs, backends=self.nixl_backends)",
    '  File "/usr/local/lib/python3.12/dist-packages/nixl/_api.py", line 412, in register_memory',
    "    self.agent.registerMem(reg_descs, handle_list)",
    "nixl._bindings.nixlBackendError: NIXL_ERR_BACKEND",
]
_NIXL_INIT_FAIL = (
    _ucx_registration(_T_REG, "gb200-r11-n15:8331", "0x7ef2c0000000", 1761509376, "mlx5_3")
    + _vllm("Worker_DP4_EP4 pid=8331", "ERROR", _T_REG + timedelta(seconds=1), "multiproc_executor.py:760", _NIXL_FRAMES)
    + _vllm("EngineCore_DP4 pid=8290", "ERROR", _T_REG + timedelta(seconds=2), "core.py:1099", ["EngineCore failed to start."])
    + _rust(_T_REG + timedelta(seconds=3), "ERROR", "main.worker", "dynamo.vllm worker exited with status 1")
)

def _stopped(hour: int, minute: int, second: int) -> str:
    """srtctl's cleanup stopping a worker that is still starting (ai-dynamo 1.6.1 graceful_shutdown.py)."""
    return _rust(datetime(2026, 8, 27, hour, minute, second, 120551, tzinfo=UTC), "INFO", "graceful_shutdown._handler",
                 "Received shutdown signal; unregistering endpoints from discovery")


def _teardown(t: datetime, dead: tuple[tuple[str, int], ...], killed: tuple[str, ...], job: int) -> str:
    """srtctl seeing critical processes exit, cleaning up (srun killing the other tasks) and failing the sweep."""
    stamp = f"{t:%Y-%m-%d %H:%M:%S}"
    out = [f"{stamp} [ERROR] Critical process '{name}' exited with code {code}\n" for name, code in dead]
    out += [f"{stamp} [INFO] Cleanup\n", f"{stamp} [INFO] Cleaning up {len(killed) + 3} processes...\n"]
    for step, node in enumerate(killed, start=2):
        out += [f"srun: error: {node}: task 0: Killed\n", f"srun: Terminating StepId={job}.{step}\n"]
    return "".join([*out, "✗ Sweep failed (exit code: 1)\n"])


# vLLM is imported (its platform detected) before dynamo.vllm parses its arguments; argparse's lines carry no time
_ARGPARSE = (_rust(datetime(2026, 8, 27, 18, 12, 44, 512000, tzinfo=UTC), "INFO",
                   "__init__.resolve_current_platform_cls_qualname", "Automatically detected platform cuda.")
             + "usage: __main__.py [-h] [--model MODEL] [--served-model-name SERVED_MODEL_NAME [SERVED_MODEL_NAME ...]]\n"
             "                   [--disaggregation-mode {agg,prefill,decode}] ...\n"
             "__main__.py: error: unrecognized arguments: --disable-log-requests\n")

DERIVED = (
    Derived("stats-missing-dynamo", "stats-missing", 4999084,
            "the stats-missing run captured from a Dynamo build whose workers export only Dynamo's series "
            "(no vllm: series): the same endpoints and findings from the KV gauge and the frontend's requests",
            ("DIAG-L001",), ("healthy", None), (), _DYNAMO_ONLY),
    Derived("drift-batched-tokens", "prefill-bound", 4987301,
            "the recipe says prefill max-num-batched-tokens 16384 (2 x ISL) but the workers ran 8192: the "
            "recipe looks right, the run was prefill-bound because of what ran",
            ("DIAG-B001", "DIAG-C004", "DIAG-D001"), ("prefill-bound", None), (("DIAG-B001", "DIAG-C004"),),
            (Edit("logs/sweep_*.log", r"--max-num-batched-tokens 16384", "--max-num-batched-tokens 8192"),)),
    Derived("async-accuracy", "healthy", 5123388,
            "async scheduling on vLLM v0.21.0 (no P/D race fixes #45357/#48481): gsm8k accuracy collapses to 0",
            ("DIAG-A001", "DIAG-C002"), ("invalid", None), (("DIAG-A001", "DIAG-C002"),),
            (Edit("config.yaml", r'container: "[^"]*"', 'container: "vllm/vllm-openai:v0.21.0"', 1),
             Edit("logs/*.out", r"v?0\.26\.0rc2\.dev187\+gd223c900d", "0.21.0")),
            append=(("logs/benchmark.out", "\nRunning gsm8k evaluation (1319 questions, 5-shot)...\n"
                                           "Accuracy: 0.000\nInvalid: 1.000\nLatency: 212.441 s\n"),)),
    Derived("mamba-kv", "kv-exhaustion", 5010502,
            "no --mamba-ssm-cache-dtype bfloat16 on either side: the hybrid model's Mamba state takes KV memory "
            "in float32 and decode runs out of KV",
            ("DIAG-K001", "DIAG-C003"), ("decode-bound", "kv-capacity"), (("DIAG-K001", "DIAG-C003"), ("DIAG-K003", "DIAG-C003")),
            (Edit("config.yaml", r'\n      mamba-ssm-cache-dtype: "bfloat16"', ""),
             Edit("logs/sweep_*.log", r" --mamba-ssm-cache-dtype bfloat16", ""),
             Edit("logs/*_w*.out", r", 'mamba_ssm_cache_dtype': 'bfloat16'", ""))),
    Derived("ds-layout-crash", "engine-crash", 5044790,
            "launched without VLLM_SSM_CONV_STATE_LAYOUT=DS: the decode engine dies on the conv-state layout "
            "assertion (vLLM raises it at worker init, so diag reports a startup failure; this derivation keeps the "
            "base run's timeline, so the assertion stands where the base run's OOM stood)",
            ("DIAG-E004", "DIAG-C001"), ("invalid", None), (("DIAG-E004", "DIAG-C001"),),
            (Edit("config.yaml", r'\n    VLLM_SSM_CONV_STATE_LAYOUT: "?DS"?', "", 0),
             Edit("logs/sweep_*.log", r" VLLM_SSM_CONV_STATE_LAYOUT=DS", ""),
             Edit("logs/*_w*.out", r"[^\n]*VLLM_SSM_CONV_STATE_LAYOUT env detected[^\n]*\n", ""),
             Edit("logs/*_decode_w*.out", OOM, DS_ASSERT),
             Edit("logs/sweep_*.log", OOM, DS_ASSERT))),
    Derived("block-size-crash", "engine-crash", 5044791,
            "prefill ran --block-size 16 and decode --block-size 32 (a launcher override, not the recipe): "
            "NIXL cannot map the remote blocks and the decode engine dies",
            ("DIAG-E001", "DIAG-C012", "DIAG-D001"), ("invalid", None), (("DIAG-E001", "DIAG-C012"),),
            (_prefill_cmd("--block-size 16"), _decode_cmd("--block-size 32"),
             Edit("logs/*_decode_w*.out", OOM, BLOCK_ASSERT),
             Edit("logs/sweep_*.log", OOM, BLOCK_ASSERT))),
    Derived("startup-stall", "kv-exhaustion", 5010560,
            "prefill-w3 hangs in CUDA-graph capture (its bar stops at 20/83) while the other four endpoints load, "
            "capture and register in about five minutes: the orchestrator polls '3 prefills and 2 decodes' and never "
            "starts the benchmark; the logs end eight polls later",
            ("DIAG-S001",), ("startup-stuck", None), (),
            (Edit("logs/*_prefill_w3.out", r"(?s)(Capturing CUDA graphs \(mixed prefill-decode, PIECEWISE\):\s+24%[^\n]*)\n.*",
                  "\\1\n", 1),
             Edit("logs/*_w*.out", r"(?s)(VllmWorker for \S+ has been initialized[^\n]*\n).*", r"\1"),
             Edit("logs/sweep_*.log", r"(?s)(2026-08-27 18:16:37 \[INFO\] Model is not ready[^\n]*\n).*", r"\1", 1)),
            append=(("logs/sweep_5010560.log", _STALL_POLLS),),
            remove=("logs/benchmark.out", "logs/benchmark-rollup.json", "logs/sa-bench_isl_8192_osl_1024/*.json",
                    "logs/*_frontend_*.out"),
            startup_only=True),
    Derived("startup-stuck", "kv-exhaustion", 5010561,
            "decode-w0 hangs in CUDA-graph capture on both its nodes (the bar stops at 14/59) while the four prefill "
            "endpoints are ready; the orchestrator polls '4 prefills and 0 decodes' three times and its log stops, and "
            "for 22 more minutes the decode logs only Dynamo's 'waiting for engine uptime_s=...' lines: no record "
            "after the bar, only the clock those noise lines carry shows the stage has lasted that long",
            ("DIAG-S001",), ("startup-stuck", None), (),
            (Edit("logs/*_decode_w0.out",
                  r"(?s)(Capturing CUDA graphs \(mixed prefill-decode, PIECEWISE\):\s+23%[^\r\n]*)[^\n]*\n.*", "\\1\n", 1),
             Edit("logs/*_prefill_w*.out", r"(?s)(VllmWorker for \S+ has been initialized[^\n]*\n).*", r"\1"),
             Edit("logs/sweep_*.log", r"(?s)(2026-08-27 18:16:37 \[INFO\] Model is not ready[^\n]*\n).*", r"\1", 1)),
            append=(("logs/sweep_5010561.log", _STUCK_POLLS), _engine_waits("gb200-r11-n14", _DECODE_UP, 250, 1560),
                    _engine_waits("gb200-r11-n15", _DECODE_UP + timedelta(seconds=3), 250, 1560)),
            remove=("logs/benchmark.out", "logs/benchmark-rollup.json", "logs/sa-bench_isl_8192_osl_1024/*.json",
                    "logs/*_frontend_*.out"),
            startup_only=True),
    Derived("oom-teardown-storm", "engine-crash", 5044792,
            "the engine-crash OOM, then the teardown storm every other process logs: refused connections to the dead "
            "decode node, the etcd keep-alive ending, NATS disconnecting, EngineDeadError on the surviving decode "
            "node, SIGTERM: consequences of the one OOM, not causes",
            ("DIAG-E001", "DIAG-E002", "DIAG-E003"), ("invalid", None), (), _STORM_EDITS,
            append=(("logs/gb200-r05-n12_frontend_0.out", _FRONTEND_REFUSED),)),
    Derived("kv-registration-zero-tokens", "nixl-failures", 5078131,
            "UCX cannot register GPU memory with the HCA on the decode nodes (no peer-memory module): every KV transfer "
            "fails, yet sa-bench reports success with 'Total generated tokens: 0'; the infrastructure owns the fix",
            ("DIAG-E002", "DIAG-V001", "DIAG-V002"), ("invalid", None), (), _ZERO_TOKENS),
    Derived("nixl-registration-startup", "kv-exhaustion", 5010562,
            "at start-up NIXL registers the KV caches and UCX cannot pin GPU memory with mlx5_3 on the second decode node "
            "(ibv_reg_mr: Bad address): the worker and its engine core fail to start, srtctl sees the critical process "
            "exit and tears the job down; the infrastructure owns the fix",
            ("DIAG-E004", "DIAG-E002"), ("invalid", None), (),
            (Edit("logs/gb200-r11-n15_decode_w0.out",
                  r"(?s)(\[worker\.py:1120\]\x1b\[0m Registering KV_Caches[^\n]*\n).*", r"\1", 1),
             Edit("logs/gb200-r11-n14_decode_w0.out",
                  r"(?s)(\[worker\.py:1120\]\x1b\[0m Registering KV_Caches[^\n]*\n).*", r"\1", 1),
             Edit("logs/*_prefill_w*.out", r"(?s)(\[worker\.py:1120\]\x1b\[0m Registering KV_Caches[^\n]*\n).*",
                  r"\1" + _stopped(18, 15, 50), 1),
             Edit("logs/sweep_*.log", r"(?s)(2026-08-27 18:15:37 \[INFO\] Model is not ready[^\n]*\n).*", r"\1", 1)),
            append=(("logs/gb200-r11-n15_decode_w0.out", _NIXL_INIT_FAIL),
                    ("logs/sweep_5010562.log", _teardown(datetime(2026, 8, 27, 18, 15, 49, tzinfo=UTC),
                                                         (("decode_0_gb200-r11-n15", 1),),
                                                         ("gb200-r11-n12", "gb200-r11-n12", "gb200-r11-n13",
                                                          "gb200-r11-n13", "gb200-r11-n14"), 5010562))),
            remove=("logs/benchmark.out", "logs/benchmark-rollup.json", "logs/sa-bench_isl_8192_osl_1024/*.json",
                    "logs/*_frontend_*.out"),
            startup_only=True),
    Derived("removed-flag", "kv-exhaustion", 5010563,
            "the recipe gives decode --disable-log-requests, a flag vLLM removed in 0.17.0: both decode workers exit at "
            "argument parsing (exit code 2) before any start-up stage, srtctl tears the job down; the recipe owns the fix",
            ("DIAG-E004", "DIAG-C014"), ("invalid", None), (("DIAG-E004", "DIAG-C014"),),
            (Edit("config.yaml", r"(\n      kv-transfer-config: '\{\"kv_connector\": \"NixlConnector\", \"kv_role\": "
                  r"\"kv_consumer\"[^\n]*)", r"\1\n      disable-log-requests: true", 1),
             _decode_cmd("--disable-log-requests"),
             Edit("logs/*_decode_w0.out", r"(?s)(Successfully installed [^\n]*\n).*", r"\1" + _ARGPARSE),
             Edit("logs/*_prefill_w*.out", r"(?s)(\n)[^\n]*Loading weights took.*", r"\1" + _stopped(18, 13, 38), 1),
             Edit("logs/sweep_*.log", r"(?s)(2026-08-27 18:12:36 \[INFO\] Polling [^\n]*\n).*", r"\1", 1)),
            append=(("logs/sweep_5010563.log", _teardown(datetime(2026, 8, 27, 18, 13, 37, tzinfo=UTC),
                                                         (("decode_0_gb200-r11-n14", 2), ("decode_0_gb200-r11-n15", 2)),
                                                         ("gb200-r11-n12", "gb200-r11-n12", "gb200-r11-n13",
                                                          "gb200-r11-n13"), 5010563)),),
            remove=("logs/benchmark.out", "logs/benchmark-rollup.json", "logs/sa-bench_isl_8192_osl_1024/*.json",
                    "logs/*_frontend_*.out"),
            startup_only=True, never_started=("decode-w0",)),
)


def _apply(run: Path, d: Derived, base_job: int) -> None:
    for path in sorted(run.rglob("*")):  # the new job id in every name and every text
        if path.is_file():
            text = path.read_text(encoding="utf-8")
            if str(base_job) in text:
                path.write_text(text.replace(str(base_job), str(d.job)), encoding="utf-8")
    for path in sorted(run.rglob(f"*{base_job}*"), key=lambda p: -len(p.parts)):
        path.rename(path.with_name(path.name.replace(str(base_job), str(d.job))))
    for e in d.edits:
        hits = 0
        for path in sorted(run.glob(e.files)):
            text = path.read_text(encoding="utf-8")
            new, n = re.subn(e.pattern, e.repl, text, count=e.count)
            hits += n
            if n:
                path.write_text(new, encoding="utf-8")
        if not hits:
            raise SystemExit(f"derived run {d.name}: edit {e.pattern!r} matched nothing in {e.files}")
    for rel, text in d.append:
        with (run / rel).open("a", encoding="utf-8") as fh:
            fh.write(text)
    for pattern in d.remove:
        for path in sorted(run.glob(pattern)):
            path.unlink()


def _startup_manifest(run: Path, data: dict) -> None:
    """The manifest of a run whose logs end before any stats line (files it no longer has dropped)."""
    data["files"] = {rel: spec for rel, spec in data["files"].items() if (run / rel).exists()}
    for spec in data["files"].values():
        for eng in spec["engine_stats"].values():
            eng.update(stats_records=0, first=None, last=None)
        for key in ("kv_transfer_lines", "nixl_failure_lines", "kv_expiry_lines", "kv_invalid_lines",
                    "kv_load_failure_lines"):
            spec[key] = 0
    for ep in data["expect"]["endpoints"]:
        ep["stats_samples"] = 0
    data["expect"]["rate_match"] = None
    data["completed_results"] = []
    data["benchmark_start"] = data["benchmark_end"] = None


def generate(runs: Path, base_jobs: dict[str, int]) -> None:
    """Write every derived run under ``runs`` from the base runs already there."""
    import json

    for d in DERIVED:
        out = runs / d.name
        if out.exists():
            shutil.rmtree(out)
        shutil.copytree(runs / d.base, out)
        _apply(out, d, base_jobs[d.base])
        manifest = out / "MANIFEST.json"
        data = json.loads(manifest.read_text(encoding="utf-8"))
        data["scenario"] = d.name
        data["derived_from"] = d.base
        data["why"] = d.why
        data["expect"] = {**data["expect"], "findings": list(d.expect), "links": [list(p) for p in d.links],
                          "verdict": {"class": d.verdict[0], "limiter": d.verdict[1]}}
        if d.startup_only:
            _startup_manifest(out, data)
        for ep in data["expect"]["endpoints"]:
            if ep["id"] in d.never_started:
                ep["engines"] = 0
        manifest.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n", encoding="utf-8")
