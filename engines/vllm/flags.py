"""The engine flags vLLM (and ``python -m dynamo.vllm``) accept, and the ones it removed.

Used by DIAG-C014 to catch typos and removed flags before a job reaches the cluster. Names are the
long kebab spellings; every boolean flag also has a ``no-`` form (argparse BooleanOptionalAction),
which :func:`classify` accepts (the mechanism is core's :mod:`diag.parsers.flag_table`). The lists
follow vLLM's CLI as of mid-2026 (config dataclasses exposed through ``EngineArgs``/``AsyncEngineArgs``
plus the OpenAI server's frontend flags) and Dynamo's own ``dynamo.vllm`` flags. Extend the tuples when vLLM grows a flag.
"""

from __future__ import annotations

from diag.parsers.flag_table import FlagStatus, FlagTable, Removed

_ENGINE = """
model runner convert task tokenizer tokenizer-mode trust-remote-code dtype seed hf-config-path
allowed-local-media-path allowed-media-domains revision code-revision tokenizer-revision max-model-len
quantization enforce-eager max-logprobs logprobs-mode disable-sliding-window disable-cascade-attn
skip-tokenizer-init enable-prompt-embeds served-model-name config-format hf-token hf-overrides
pooler-config logits-processor-pattern generation-config override-generation-config enable-sleep-mode
model-impl override-attention-dtype logits-processors io-processor-plugin rope-scaling rope-theta
limit-mm-per-prompt media-io-kwargs mm-processor-kwargs mm-processor-cache-gb mm-processor-cache-type
mm-shm-cache-max-object-size-mb mm-encoder-tp-mode mm-encoder-attn-backend interleave-mm-strings
skip-mm-profiling video-pruning-rate disable-mm-preprocessor-cache language-model-only
enable-return-routed-experts
load-format download-dir safetensors-load-strategy model-loader-extra-config ignore-patterns
use-tqdm-on-load pt-load-map-location
structured-outputs-config reasoning-parser reasoning-parser-plugin
distributed-executor-backend pipeline-parallel-size tensor-parallel-size decode-context-parallel-size
dcp-kv-cache-interleave-size cp-kv-cache-interleave-size prefill-context-parallel-size
data-parallel-size data-parallel-rank data-parallel-start-rank data-parallel-size-local
data-parallel-address data-parallel-rpc-port data-parallel-backend data-parallel-hybrid-lb
data-parallel-external-lb data-parallel-multi-port-external-lb enable-expert-parallel enable-eplb
eplb-config expert-placement-strategy all2all-backend enable-dbo dbo-decode-token-threshold
dbo-prefill-token-threshold disable-nccl-for-dp-synchronization max-parallel-loading-workers
ray-workers-use-nsight disable-custom-all-reduce worker-cls worker-extension-cls
enable-multimodal-encoder-data-parallel nnodes node-rank master-addr master-port
distributed-timeout-seconds ubatch-size enable-elastic-ep numa-bind numa-bind-nodes
enable-ep-weight-filter
block-size gpu-memory-utilization kv-cache-memory-bytes swap-space kv-cache-dtype
num-gpu-blocks-override enable-prefix-caching prefix-caching-hash-algo cpu-offload-gb
calculate-kv-scales kv-sharing-fast-prefill mamba-cache-dtype mamba-ssm-cache-dtype mamba-block-size
mamba-cache-mode kv-offloading-size kv-offloading-backend
offload-group-size offload-num-in-group offload-prefetch-step offload-params
enable-lora enable-lora-bias max-loras max-lora-rank lora-dtype max-cpu-loras fully-sharded-loras
default-mm-loras lora-extra-vocab-size
show-hidden-metrics-for-version otlp-traces-endpoint collect-detailed-traces kv-cache-metrics
kv-cache-metrics-sample cudagraph-metrics enable-layerwise-nvtx-tracing enable-mfu-metrics
enable-logging-iteration-details
max-num-batched-tokens max-num-seqs max-num-partial-prefills max-long-partial-prefills
long-prefill-token-threshold scheduling-policy enable-chunked-prefill disable-chunked-mm-input
scheduler-cls disable-hybrid-kv-cache-manager async-scheduling stream-interval
compilation-config cudagraph-capture-sizes max-cudagraph-capture-size
speculative-config kv-transfer-config kv-events-config ec-transfer-config attention-config
additional-config profiler-config optimization-level kernel-config attention-backend moe-backend
gdn-prefill-backend enable-flashinfer-autotune
disable-log-stats aggregate-engine-logging enable-log-requests enable-log-outputs enable-log-deltas
device
"""

_SERVER = """
host port uds uvicorn-log-level disable-uvicorn-access-log allow-credentials allowed-origins
allowed-methods allowed-headers api-key lora-modules chat-template chat-template-content-format
trust-request-chat-template response-role ssl-keyfile ssl-certfile ssl-ca-certs enable-ssl-refresh
ssl-cert-reqs root-path middleware return-tokens-as-token-ids disable-frontend-multiprocessing
enable-request-id-headers enable-auto-tool-choice exclude-tools-when-tool-choice-none tool-call-parser
tool-parser-plugin tool-server log-config-file max-log-len disable-fastapi-docs
enable-prompt-tokens-details enable-server-load-tracking enable-force-include-usage
enable-tokenizer-info-endpoint h11-max-incomplete-event-size h11-max-header-count log-error-stack
headless api-server-count config tokens-only grpc
"""

# `python -m dynamo.vllm` (components/src/dynamo/vllm/args.py) on top of vLLM's engine args.
_DYNAMO = """
disaggregation-mode is-prefill-worker is-decode-worker endpoint namespace component migration-limit
connector dump-config-to request-plane event-plane store-kv use-vllm-tokenizer custom-jinja-template
dyn-tool-call-parser dyn-reasoning-parser dyn-endpoint-types durable-kv-events enable-local-indexer
multimodal-processor multimodal-encode-worker multimodal-worker multimodal-decode-worker
multimodal-encode-prefill-worker mm-prompt-template device-ids kv-cache-block-size-bytes
enable-rerank
"""

ALIASES: dict[str, str] = {
    "tp": "tensor-parallel-size", "pp": "pipeline-parallel-size", "dp": "data-parallel-size",
    "dpl": "data-parallel-size-local", "dpr": "data-parallel-rank", "dpa": "data-parallel-address",
    "dpp": "data-parallel-rpc-port", "dpb": "data-parallel-backend", "dph": "data-parallel-hybrid-lb",
    "dpe": "data-parallel-external-lb", "dcp": "decode-context-parallel-size",
    "pcp": "prefill-context-parallel-size", "asc": "api-server-count", "q": "quantization",
    "O": "compilation-config", "ac": "attention-config", "cc": "compilation-config",
    # shorthands that set one field of --speculative-config
    "spec-method": "speculative-config.method", "spec-model": "speculative-config.model",
    "spec-tokens": "speculative-config.num_speculative_tokens",
}


# Flags vLLM no longer parses (argparse then fails with "unrecognized arguments").
REMOVED: tuple[Removed, ...] = (
    Removed("cuda-graph-sizes", "0.13.0", "max-cudagraph-capture-size",
            "added 2025-05 (#17201), deprecated 2025-10 (#26016), removed 2025-12-11 (#30396)"),
    Removed("disable-log-requests", "0.17.0", "no-enable-log-requests",
            "deprecated 2025-07 by #21739; request logging is off by default"),
    Removed("num-scheduler-steps", "0.11.0", None, "V0 multi-step scheduling, gone with the V0 engine"),
    Removed("multi-step-stream-outputs", "0.11.0", None, "V0 multi-step scheduling"),
    Removed("use-v2-block-manager", "0.7.0", None, "V0 block manager flag"),
    Removed("max-seq-len-to-capture", "0.11.0", "max-cudagraph-capture-size", "CUDA graph sizing moved"),
    Removed("disable-async-output-proc", "0.11.0", None, "V0 output processing"),
    Removed("enable-prompt-adapter", "0.10.0", None, "prompt adapters were removed"),
    Removed("speculative-model", "0.8.0", "speculative-config", "speculative flags moved into one JSON"),
    Removed("num-speculative-tokens", "0.8.0", "speculative-config", "use speculative-config JSON"),
    Removed("tokenizer-pool-size", "0.9.0", None, "tokenizer pools were removed"),
    Removed("guided-decoding-backend", "0.12.0", "structured-outputs-config",
            "renamed to structured outputs"),
)

TABLE = FlagTable((*_ENGINE.split(), *_SERVER.split(), *_DYNAMO.split()), REMOVED, ALIASES)


def known_flags() -> frozenset[str]:
    """Every flag vLLM and ``dynamo.vllm`` accept (snake_case)."""
    return TABLE.names


def classify(name: str) -> FlagStatus:
    """Is ``name`` (as written in a recipe: kebab or snake, maybe ``no-``-prefixed) a vLLM flag?"""
    return TABLE.classify(name)


def closest(name: str) -> str | None:
    """The known flag spelled most like ``name`` (kebab-case, ``no-`` kept if it was there)."""
    return TABLE.closest(name)
