"""Fault lines: engine and worker death, OOM, KV capacity at startup, hangs, exceptions.

One root cause fans out into many lines (every API server, every client); this module only
classifies lines. Tracebacks are grouped with their exception line by the line parser, and
folding a fan-out into one finding is the rules engine's job.
"""

from __future__ import annotations

import re

from .formats import declare, record_parser
from .records import Fault, Header

# (cause, trigger literals, regex, samples); the order is the priority when a line matches several causes.
_CAUSES: list[tuple[str, tuple[str, ...], str, list[str]]] = [
    ("oom", ('OutOfMemoryError', 'out of memory', 'not enough GPU memory'), r"(?:torch\.(?:cuda\.)?)?OutOfMemoryError|CUDA out of memory|Failed to load model - not enough GPU memory", [
        "(EngineCore_DP5 pid=311) ERROR 08-06 12:44:02 [core.py:1010] torch.OutOfMemoryError: CUDA out of memory. "
        "Tried to allocate 2.50 GiB. GPU 1 has a total capacity of 184.31 GiB of which 1.02 GiB is free.",
        "vllm  |     raise torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.15 GiB.",
    ]),
    ("no_kv_memory", ('No available memory for the cache blocks',), r"No available memory for the cache blocks", [
        "(EngineCore_DP0 pid=223840) ERROR 10-27 01:02:03 [core.py:708] ValueError: No available memory for the "
        "cache blocks. Try increasing `gpu_memory_utilization` when initializing the engine.",
        "ERROR 03-10 08:07:20 [core.py:302] ValueError: No available memory for the cache blocks.",
    ]),
    ("kv_too_small", ('max seq len', 'that can be stored in KV cache'), r"To serve at least one request with the model'?s max seq len|is larger than the maximum "
                     r"number of tokens that can be stored in KV cache", [
        "(EngineCore pid=316) ERROR 04-02 10:00:00 [core.py:866] ValueError: To serve at least one request with the "
        "model's max seq len (100000), (4.26 GiB KV cache is needed, which is larger than the available KV cache",
        "ERROR 02-11 09:01:02 [engine.py:389] ValueError: The model's max seq len (131072) is larger than the maximum "
        "number of tokens that can be stored in KV cache (81536).",
    ]),
    ("mamba_blocks", ('Mamba cache blocks',), r"exceeds available Mamba cache blocks", [
        "(EngineCore_DP0 pid=3) ERROR 08-06 12:02:00 [core.py:1010] ValueError: max_num_seqs (1024) exceeds available "
        "Mamba cache blocks (361).",
        "ERROR 08-06 12:02:00 [core.py:1010] max_num_seqs (512) exceeds available Mamba cache blocks (300). Each "
        "decode sequence requires one Mamba cache block",
    ]),
    ("ds_layout", ('DS conv state layout',), r"3-read Mamba conv transfer requires DS conv state layout", [
        "(Worker_DP0_TP0 pid=9) ERROR 08-06 12:01:00 [multiproc_executor.py:750] AssertionError: 3-read Mamba conv "
        "transfer requires DS conv state layout. Set VLLM_SSM_CONV_STATE_LAYOUT=DS",
        "AssertionError: 3-read Mamba conv transfer requires DS conv state layout. Set VLLM_SSM_CONV_STATE_LAYOUT=DS",
    ]),
    ("kv_block_size", ("remote block size", "block size mismatch"),
     r"is not divisible by remote block size|block size mismatch", [
        "(Worker_TP0 pid=5) ERROR 05-20 10:00:00 [nixl_connector.py:900] AssertionError: Local block size 16 is not "
        "divisible by remote block size 32 or vice versa.",
        "AssertionError: Local block size 16 is not divisible by remote block size 32 or vice versa.",
    ]),
    ("shm_hang", ('shared memory broadcast block',), r"No available shared memory broadcast block found in \d+ seconds", [
        "(EngineCore_DP0 pid=3) INFO 08-06 13:00:00 [shm_broadcast.py:466] No available shared memory broadcast "
        "block found in 60 seconds. This typically happens when some processes are hanging.",
        "(Worker_TP0 pid=5) WARNING 08-06 13:01:00 [shm_broadcast.py:466] No available shared memory broadcast block "
        "found in 120 seconds.",
    ]),
    ("rpc_timeout", ('RPC call to',), r"RPC call to \S+ timed out", [
        "(EngineCore_DP0 pid=481282) ERROR 03-16 00:55:10 [core.py:868] TimeoutError: RPC call to execute_model "
        "timed out.",
        "(EngineCore_DP2 pid=12) ERROR 03-16 00:55:10 [core.py:868] RPC call to sample_tokens timed out.",
    ]),
    ("engine_failed_start", ('EngineCore failed to start', 'Engine core initialization failed'), r"EngineCore failed to start|Engine core initialization failed", [
        "(EngineCore_DP0 pid=7) ERROR 05-20 11:00:00 [core.py:1099] EngineCore failed to start.",
        "(APIServer pid=1) ERROR 10-24 12:00:00 [launcher.py:90] RuntimeError: Engine core initialization failed. "
        "See root cause above. Failed core proc(s): {}",
    ]),
    ("worker_died", ('died unexpectedly', 'Exception in worker', 'WorkerProc hit an exception'), r"Worker proc \S+ died unexpectedly|RayWorkerProc rank=\S+ died unexpectedly|"
                    r"Exception in worker \S+ while processing method|WorkerProc hit an exception", [
        "(EngineCore_DP5 pid=311) ERROR 08-06 12:44:03 [multiproc_executor.py:154] Worker proc VllmWorker-1 died "
        "unexpectedly (exit code: 1), shutting down executor.",
        "ERROR 04-17 15:30:42 [multiproc_worker_utils.py:238] Exception in worker VllmWorkerProcess while processing "
        "method load_model.",
    ]),
    ("engine_dead", ('EngineCore encountered', 'EngineDeadError', 'died unexpectedly', 'exited unexpectedly', 'output_handler failed', 'EngineCore hit an exception'), r"EngineCore encountered a fatal error|EngineDeadError|EngineCore encountered an issue|"
                    r"Engine core proc(?:ess)? \S+ died unexpectedly|engine core exited unexpectedly|"
                    r"AsyncLLM output_handler failed|EngineCore hit an exception", [
        "(EngineCore_DP5 pid=311) ERROR 08-06 12:44:02 [core.py:1000] EngineCore encountered a fatal error.",
        "(ApiServer_0 pid=244) ERROR 03-13 06:55:20 [async_llm.py:710] vllm.v1.engine.exceptions.EngineDeadError: "
        "EngineCore encountered an issue. See stack trace (above) for the root cause.",
    ]),
    ("nccl", ("NCCL error", "NCCL ERROR", "ncclInternalError", "ncclSystemError", "ncclUnhandledCudaError",
              "ProcessGroupNCCL", "HCCL", "HcclComm"), r"NCCL (?:error|ERROR)|ncclInternalError|ncclSystemError|ncclUnhandledCudaError|"
             r"ProcessGroupNCCL.*(?:[Tt]imeout|[Ww]atchdog)|HCCL\w* error|HcclCommInitRootInfo.*error", [
        "(Worker_TP3 pid=40) ERROR 08-06 12:10:00 [pynccl.py:120] NCCL error: unhandled system error (run with "
        "NCCL_DEBUG=INFO for details)",
        "[rank3]:[E806 12:10:00.1234] [PG 0 Rank 3] ProcessGroupNCCL's watchdog caught collective operation timeout",
    ]),
]

_FAULT_FORMATS = []
for _cause, _trig, _rx, _samples in _CAUSES:
    _FAULT_FORMATS.append((_cause, declare(f"fault-{_cause}", "record", _rx, samples=_samples, emits="fault",
                                           triggers=_trig)))

# An exception line at the end of a traceback: "pkg.mod.SomeError: message".
EXCEPTION = declare(
    "exception-line", "record",
    r"^\s*(?:[A-Za-z_][\w]*\.)*(?P<exc>[A-Z]\w*(?:Error|Exception|Exit|Interrupt|Timeout))(?:\(\))?(?::\s*(?P<emsg>.*))?$",
    samples=[
        "(EngineCore_DP0 pid=1) ERROR 08-06 12:00:00 [core.py:1] RuntimeError: HCCL HcclCommInitRootInfo error code 7",
        "ERROR 11-25 09:00:00 [engine.py:135] AssertionError()",
    ],
    emits="fault",
    triggers=("Error", "Exception", "Interrupt", "Timeout"),
    doc="only taken as a fault when it closes an open traceback of the same process",
)
TRACEBACK = declare(
    "traceback-start", "record", r"Traceback \(most recent call last\)",
    samples=[
        "(APIServer pid=480795) ERROR 03-16 00:55:10 [async_llm.py:538] Traceback (most recent call last):",
        "  | [2025-03-10T15:07:20Z] ERROR 03-10 08:07:20 [core.py:302] EngineCore hit an exception: Traceback "
        "(most recent call last):",
    ],
    emits="traceback",
    triggers=("Traceback (most recent call last)",),
)


FRAME = declare(
    "traceback-frame", "record", r'^\s*File "(?P<path>[^"]+)", line \d+, in ',
    samples=[
        '(Worker_TP7 pid=481423)   File "/usr/local/lib/python3.12/dist-packages/vllm/distributed/kv_transfer/'
        'kv_connector/v1/p2p/p2p_nccl_engine.py", line 513, in send_sync',
        'ERROR 03-10 08:07:20 [core.py:302]   File "/usr/local/lib/python3.12/dist-packages/vllm/v1/engine/core.py", '
        'line 294, in run_engine_core',
    ],
    emits="traceback",
    triggers=('File "',),
    doc="a traceback frame: groups a traceback whose head was cut, and tells KV-connector code apart",
)


def classify(msg: str) -> str | None:
    """The fault cause of a message, or None."""
    for cause, fmt in _FAULT_FORMATS:
        if any(t in msg for t in fmt.triggers) and fmt.regex.search(msg):
            return cause
    return None


def _fault_parser(cause: str):
    def parse(m: re.Match[str], line: int, hdr: Header, **kw: object) -> Fault:
        return Fault(line, cause=cause, message=m.string.strip()[:500], **kw)  # type: ignore[arg-type]

    return parse


for _cause, _fmt in _FAULT_FORMATS:
    record_parser(_fmt)(_fault_parser(_cause))


def exception_line(msg: str) -> tuple[str, str] | None:
    """(exception name, message) when ``msg`` is the last line of a traceback."""
    if not any(t in msg for t in EXCEPTION.triggers):
        return None
    m = EXCEPTION.regex.match(msg)
    if not m:
        return None
    return m["exc"], (m["emsg"] or "").strip()
