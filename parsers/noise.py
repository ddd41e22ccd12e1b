"""Noise: lines that are counted, never parsed into records (and never counted as requests)."""

from __future__ import annotations

from .clean import PROGRESS
from .formats import LineFormat, declare, formats

REQUEST = declare(
    "dynamo-request-noise", "noise", r"request (?:received|completed)|(?:Received|Added|Finished) request \S",
    samples=[
        "2026-08-06T12:40:01.001234Z  INFO dynamo_runtime::pipeline::network::ingress::push_handler: request received "
        "request_id=\"9f1c\" component=backend endpoint=generate",
        "2026-08-06T12:40:03.551234Z  INFO metrics: request completed request_id=\"9f1c\" ttft_ms=812.4 "
        "elapsed_ms=9120.7 input_tokens=8192 output_tokens=1024 status=\"success\"",
        "INFO 05-15 05:04:29 logger.py:37] Received request cmpl-36975907203a4d04b34c0d0a3882830c-0: prompt: 'Hi, "
        "how are you ?', params: SamplingParams(n=1, presence_penalty=0.0)",
    ],
    emits="request",
)
HTTP_PROBE = declare(
    "http-probe-noise", "noise",
    r'http response sent.*(?:/health|/metrics|/live|/ready)|"GET /(?:health|metrics|ping|live|ready|v1/models)\S* HTTP',
    samples=[
        "2026-08-06T12:40:02.000100Z  INFO http-request: dynamo_llm::http::service::service_v2: http response sent "
        "latency_ms=0 status=200 method=GET uri=/health",
        "(APIServer pid=1) INFO:     10.250.5.33:50840 - \"GET /metrics HTTP/1.1\" 200 OK",
    ],
    emits="http-probe",
)
ACCESS = declare(
    "http-access-noise", "noise",
    r'"(?:POST|GET|PUT|DELETE) /\S* HTTP/[\d.]+" \d{3}|http response sent',
    samples=[
        "(APIServer pid=1) INFO:     10.250.3.7:48614 - \"POST /v1/chat/completions HTTP/1.1\" 200 OK",
        "2026-08-06T12:40:02.000100Z  INFO http-request: dynamo_llm::http::service::service_v2: http response sent "
        "latency_ms=8120 status=200 method=POST uri=/v1/completions",
    ],
    emits="access-log",
)
SELECTOR = declare(
    "router-selector-noise", "noise", r"selector: |Selected worker|Formula for worker_id",
    samples=[
        "2026-08-06T12:40:01.000900Z  INFO dynamo_llm::kv_router::scheduling::selector: Selected worker: "
        "worker_type=prefill, worker_id=7587889162158917001, dp_rank=1, logit=0.000",
        "2026-08-06T12:40:01.000950Z  INFO dynamo_llm::kv_router::scheduling::selector: Formula for worker_id=75878 "
        "dp_rank=0 with 0 effective cached blocks: 0.000",
    ],
    emits="router-selector",
)
NCCL_RAY = declare(
    "nccl-ray-noise", "noise",
    r"NCCL INFO|\[repeated \d+x across cluster\]|ncclCommInitRank|NCCL version \d",
    samples=[
        "(EngineCore pid=925) (RayWorkerProc pid=8272) node64:8272:8272 [7] NCCL INFO Using network IB [repeated 32x "
        "across cluster]",
        "gb200-r07-n13:1234:1290 [2] NCCL INFO Channel 00/24 : 0 1 2 3 4 5 6 7",
    ],
    emits="nccl-ray",
)

# Order matters: the first category that matches a line names it (an engine's own noise, all requests
# served, comes right after Dynamo's requests).
NOISE: tuple[LineFormat, ...] = (REQUEST, *(f for f in formats("noise") if f.engine), HTTP_PROBE, ACCESS, SELECTOR,
                                 NCCL_RAY, PROGRESS)
