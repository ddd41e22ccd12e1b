"""Start-up facts a vLLM engine prints once: version, args, architecture, KV capacity, switches."""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any

from diag.parsers.formats import declare, record_parser
from diag.parsers.records import Header, StartupFact


def _num(text: str) -> float:
    return float(text.replace(",", ""))


VERSION = declare(
    "vllm-version", "record",
    r"vLLM (?:API )?server version (?P<v>\S+?)(?:, serving model (?P<model>\S+))?\s*$"
    r"|Initializing a V[01] LLM engine \(v(?P<ev>[^)]+)\) with config: (?P<cfg>.*)"
    r"|^\W*version\s+(?P<logo>\d+\.\d+\.\d+\S*)\s*$|^\W*model\s+(?P<logo_model>\S+)\s*$",
    samples=[
        "(APIServer pid=1) INFO 08-06 12:00:01 [api_server.py:1839] vLLM API server version 0.11.0",
        "(EngineCore_DP0 pid=223) INFO 08-06 12:00:09 [core.py:95] Initializing a V1 LLM engine (v0.26.1.dev12+gd223c90)"
        " with config: model='nvidia/Qwen3.5-397B-A17B-NVFP4', tensor_parallel_size=1, data_parallel_size=8",
        "(APIServer pid=1) INFO 08-06 12:00:01 [utils.py:300]   version 0.24.0",
        # the default `vllm serve` logo (entrypoints/common/startup.py): rows under the record's head
        " ▄▄ ▄█ █     █     █ ▀▄▀ █  version 0.33.0",
        "  █▄█▀ █     █     █     █  model   Qwen/Qwen3-30B-A3B",
    ],
    emits="startup",
    engine="vllm",
    triggers=("server version", "LLM engine (v", "version ", "  model   "),
)
_CFG_ITEM = re.compile(r"(?:^|, )(?P<k>model|tensor_parallel_size|pipeline_parallel_size|data_parallel_size|"
                       r"max_seq_len|kv_cache_dtype|enable_prefix_caching|served_model_name)=(?P<v>'[^']*'|[^,]+)")


@record_parser(VERSION)
def _version(m: re.Match[str], line: int, hdr: Header, **kw: object) -> StartupFact | list[StartupFact]:
    if m["cfg"] is not None:
        cfg = {c["k"]: c["v"].strip("'") for c in _CFG_ITEM.finditer(m["cfg"])}
        return [StartupFact(line, key="version", value=m["ev"], **kw),  # type: ignore[arg-type]
                StartupFact(line, key="engine_config", value=cfg, **kw)]  # type: ignore[arg-type]
    facts = []
    if m["v"] or m["logo"]:
        facts.append(StartupFact(line, key="version", value=m["v"] or m["logo"], **kw))  # type: ignore[arg-type]
    if m["model"] or m["logo_model"]:
        facts.append(StartupFact(line, key="model", value=m["model"] or m["logo_model"], **kw))  # type: ignore[arg-type]
    return facts


NON_DEFAULT = declare(
    "vllm-non-default-args", "record", r"non-default args: (?P<d>\{.*\})\s*$",
    samples=[
        "(APIServer pid=1) INFO 08-06 12:00:02 [utils.py:253] non-default args: {'model': 'Qwen/Qwen3-0.6B', "
        "'max_num_batched_tokens': 16384, 'async_scheduling': True, 'data_parallel_size': 2}",
        "(APIServer pid=1) INFO 08-06 12:00:02 [utils.py:253] non-default args: {'kv_transfer_config': "
        "KVTransferConfig(kv_connector='NixlConnector', engine_id='e1', kv_role='kv_consumer', "
        "kv_load_failure_policy='fail'), 'api_server_count': 1}",
    ],
    emits="startup",
    engine="vllm",
    triggers=("non-default args",),
)


@lru_cache(maxsize=256)
def _literal(text: str) -> Any:
    """Python-repr dict -> value; pyparsing grammar for reprs that ast cannot read."""
    import ast

    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        pass
    try:
        from diag.parsers.pyrepr import parse_pyrepr
    except ImportError:  # pragma: no cover - pyrepr is part of the package
        return {"__raw__": text}
    try:
        return parse_pyrepr(text)
    except ValueError:
        return {"__raw__": text}


@record_parser(NON_DEFAULT)
def _non_default(m: re.Match[str], line: int, hdr: Header, **kw: object) -> list[StartupFact]:
    args = _literal(m["d"])
    facts = [StartupFact(line, key="non_default_args", value=args, **kw)]  # type: ignore[arg-type]
    if isinstance(args, dict):
        ktc = args.get("kv_transfer_config")
        role = None
        if isinstance(ktc, dict):
            role = ktc.get("kv_role")
        elif isinstance(ktc, str):
            rm = re.search(r"kv_role['\"]?\s*[:=]\s*['\"](kv_\w+)", ktc)
            role = rm.group(1) if rm else None
        if role:
            facts.append(StartupFact(line, key="kv_role", value=role, **kw))  # type: ignore[arg-type]
    return facts


_SIMPLE: list[tuple[str, str, str, tuple[str, ...], list[str]]] = [
    ("architecture", "vllm-architecture", r"Resolved architecture: (?P<v>\w+)", ("Resolved architecture",), [
        "(EngineCore_DP0 pid=3) INFO 08-06 12:00:05 [model.py:547] Resolved architecture: "
        "Qwen3_5MoeForConditionalGeneration",
        "(APIServer pid=1) INFO 05-02 09:00:00 [config.py:712] Resolved architecture: Qwen3NextForCausalLM",
    ]),
    ("kv_memory_gib", "vllm-kv-memory", r"Available KV cache memory: (?P<v>[\d.,]+) GiB", ("Available KV cache memory",), [
        "(EngineCore_DP0 pid=3) INFO 08-06 12:01:40 [gpu_worker.py:298] Available KV cache memory: 61.73 GiB",
        "(Worker_DP1_TP0_EP1 pid=9) INFO 08-06 12:01:41 [gpu_worker.py:298] Available KV cache memory: 58.20 GiB",
    ]),
    ("kv_cache_tokens", "vllm-kv-size", r"(?:GPU|[A-Z]{2,5})(?: \+ host)? KV cache size: (?P<v>[\d,]+) tokens",
     ("KV cache size: ",), [
        "(EngineCore_DP0 pid=3) INFO 08-06 12:01:42 [kv_cache_utils.py:1087] GPU KV cache size: 1,312,768 tokens",
        "(EngineCore_DP1 pid=4) INFO 08-06 12:01:42 [kv_cache_utils.py:1087] GPU KV cache size: 899,184 tokens, "
        "Maximum concurrency for 9,216 tokens per request: 97.57x",
        "(EngineCore_DP0 pid=5) INFO 08-12 14:06:10 [kv_cache_utils.py:1148] GPU + host KV cache size: 2,625,536 "
        "tokens, Maximum concurrency for 9,216 tokens per request: 284.90x",
        "(EngineCore_DP0 pid=5) INFO 08-12 14:06:10 [kv_cache_utils.py:1148] XPU KV cache size: 412,160 tokens, "
        "Maximum concurrency for 4,096 tokens per request: 100.62x",
    ]),
    ("async_scheduling", "vllm-async-scheduling", r"Asynchronous scheduling is (?P<v>enabled|disabled)",
     ("Asynchronous scheduling is",), [
        "(APIServer pid=1) INFO 08-06 12:00:03 [vllm.py:601] Asynchronous scheduling is enabled.",
        "(APIServer pid=1) INFO 03-02 10:00:03 [vllm.py:590] Asynchronous scheduling is disabled.",
    ]),
    ("api_server_count", "vllm-api-server-count", r"Defaulting api_server_count to data_parallel_size\w* \((?P<v>\d+)\)",
     ("Defaulting api_server_count",), [
        "(APIServer pid=1) INFO 08-06 12:00:01 [arg_utils.py:1620] Defaulting api_server_count to "
        "data_parallel_size_local (4) for hybrid LB mode.",
        "INFO 03-02 10:00:01 [arg_utils.py:1590] Defaulting api_server_count to data_parallel_size (8).",
    ]),
    ("dp_rank", "vllm-rank-assignment", r"is assigned as DP rank (?P<v>\d+)", ("is assigned as DP rank",), [
        "(Worker_DP3_EP3 pid=51) INFO 08-06 12:00:20 [parallel_state.py:1400] rank 3 in world size 8 is assigned as "
        "DP rank 3, PP rank 0, PCP rank 0, TP rank 0, EP rank 3, EPLB rank N/A",
        "(Worker_DP0_TP1 pid=50) INFO 08-06 12:00:20 [parallel_state.py:1400] rank 1 in world size 4 is assigned as "
        "DP rank 0, PP rank 0, TP rank 1, EP rank 1",
    ]),
    ("max_model_len", "vllm-max-model-len", r"Using max model len (?P<v>\d+)", ("Using max model len",), [
        "(APIServer pid=1) INFO 08-06 12:00:02 [model.py:1700] Using max model len 9216",
        "INFO 03-02 10:00:02 [config.py:1500] Using max model len 131072",
    ]),
    ("ssm_conv_layout", "vllm-ssm-layout", r"Setting SSM conv state layout to (?P<v>\w+)", ("SSM conv state layout",), [
        "(EngineCore_DP0 pid=3) INFO 08-06 12:00:06 [mamba_utils.py:40] VLLM_SSM_CONV_STATE_LAYOUT env detected. "
        "Setting SSM conv state layout to DS.",
        "(EngineCore_DP1 pid=4) INFO 08-06 12:00:06 [mamba_utils.py:40] VLLM_SSM_CONV_STATE_LAYOUT env detected. "
        "Setting SSM conv state layout to SD.",
    ]),
]


def _simple_parser(key: str):
    def parse(m: re.Match[str], line: int, hdr: Header, **kw: object) -> StartupFact:
        raw = m["v"]
        value: Any = raw
        if key in ("kv_memory_gib",):
            value = _num(raw)
        elif key in ("kv_cache_tokens", "api_server_count", "dp_rank", "max_model_len"):
            value = int(_num(raw))
        elif key == "async_scheduling":
            value = raw == "enabled"
        return StartupFact(line, key=key, value=value, **kw)  # type: ignore[arg-type]

    return parse


for _key, _name, _rx, _trig, _samples in _SIMPLE:
    record_parser(declare(_name, "record", _rx, samples=_samples, emits="startup", triggers=_trig,
                          engine="vllm"))(
        _simple_parser(_key))

MAX_CONC = declare(
    "vllm-max-concurrency", "record",
    r"Maximum concurrency for (?P<tok>[\d,]+) tokens per request: (?P<x>[\d.,]+)x",
    samples=[
        "(EngineCore_DP0 pid=3) INFO 08-06 12:01:42 [kv_cache_utils.py:1091] Maximum concurrency for 9,216 tokens per "
        "request: 142.45x",
        "(EngineCore_DP1 pid=4) INFO 08-06 12:01:42 [kv_cache_utils.py:1087] GPU KV cache size: 899,184 tokens, "
        "Maximum concurrency for 9,216 tokens per request: 97.57x",
    ],
    emits="startup",
    engine="vllm",
    triggers=("Maximum concurrency for",),
)


@record_parser(MAX_CONC)
def _max_conc(m: re.Match[str], line: int, hdr: Header, **kw: object) -> StartupFact:
    return StartupFact(line, key="max_concurrency",
                       value={"tokens_per_request": int(_num(m["tok"])), "concurrency": _num(m["x"])},
                       **kw)  # type: ignore[arg-type]


STATS_OFF = declare(
    "vllm-stats-disabled", "record",
    r"(?P<asc>AsyncLLM created with api_server_count more than 1; disabling stats logging)"
    r"|(?P<dls>Stat logging is disabled)",
    samples=[
        "(APIServer pid=1) WARNING 08-06 12:00:30 [loggers.py:1100] AsyncLLM created with api_server_count more than "
        "1; disabling stats logging to avoid incomplete stats.",
        "[engine.py:598] Stat logging is disabled. Set `disable_log_stats=False` argument to enable.",
    ],
    emits="startup",
    engine="vllm",
    triggers=("disabling stats logging", "Stat logging is disabled"),
)


@record_parser(STATS_OFF)
def _stats_off(m: re.Match[str], line: int, hdr: Header, **kw: object) -> StartupFact:
    cause = "api_server_count" if m["asc"] else "disable_log_stats"
    return StartupFact(line, key="stats_disabled", value=cause, **kw)  # type: ignore[arg-type]


_KV_ROLE = re.compile(r"""kv_role['"]?\s*[:=]\s*['"]?(?P<r>kv_producer|kv_consumer|kv_both)""")
_PREFILL_FLAG = re.compile(r"--is-prefill-worker\b")   # dynamo.vllm's prefill flag before --disaggregation-mode


def role_from_head(head_text: str) -> str | None:
    """A worker's role from the ``kv_role`` its KV-transfer config printed, when that is one-sided
    (``kv_producer`` → prefill, ``kv_consumer`` → decode; ``kv_both`` or none: None), else from Dynamo's
    old ``--is-prefill-worker`` flag on its command line."""
    kv = _KV_ROLE.search(head_text)
    role = {"kv_producer": "prefill", "kv_consumer": "decode"}.get(kv["r"]) if kv else None
    return role or ("prefill" if _PREFILL_FLAG.search(head_text) else None)
