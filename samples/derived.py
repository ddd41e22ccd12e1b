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
        manifest.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n", encoding="utf-8")
