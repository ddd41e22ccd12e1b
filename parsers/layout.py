"""What a file in an srt-slurm run directory is, from its name (srt-dynamo.md §3.1, §3.2).

Prefill vs decode is known only from the worker log's file name ``<node>_<mode>_w<i>.out``; node
names contain ``_`` and ``-``, so names are parsed from the right. :func:`role_from_content` recovers
the role of a worker log whose name has none, from the engine's ``kv_role`` or the
``--disaggregation-mode`` flag in its first lines.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from pathlib import Path

__all__ = ["KINDS", "ROLES", "VOCABULARY", "FileInfo", "classify_path", "holds_vocabulary", "role_from_content"]

KINDS = ("worker", "frontend", "orchestrator", "benchmark", "sa-bench-result", "rollup", "job-json", "recipe",
         "prometheus-capture", "tachometer", "aiperf-metrics", "fingerprint", "config-dump", "unknown")
ROLES = ("prefill", "decode", "agg", "frontend")


@dataclass(frozen=True, slots=True)
class FileInfo:
    """The classification of one path. ``index`` is the worker/frontend index (``w<i>``), ``node``
    the host the process ran on, ``job_id`` the SLURM job for orchestrator logs and job JSONs,
    ``concurrency`` the run of an sa-bench result file."""

    path: Path
    kind: str
    role: str | None = None
    index: int | None = None
    node: str | None = None
    job_id: str | None = None
    concurrency: int | None = None


_WORKER = re.compile(
    r"^(?P<node>.+)_(?P<role>prefill|decode|agg|aggregated)_w?(?P<idx>\d+)\.(?:out|err|log)$")
_FRONTEND = re.compile(r"^(?P<node>.+)_(?:frontend|router)_(?P<idx>\d+)\.(?:out|err|log)$")
_TRTLLM_SERVE = re.compile(r"^(?P<node>.+)_trtllm_serve_orchestrator\.(?:out|err|log)$")
_SWEEP = re.compile(r"^(?:sweep_(?P<a>\d+)\.log|slurm-(?P<b>\d+)(?:_\d+)?\.out)$")
_FINGERPRINT = re.compile(r"^fingerprint_(?P<role>prefill|decode|agg|aggregated)_w(?P<idx>\d+)\.json$")
_CONFIG_DUMP = re.compile(r"^(?P<node>.+)_config\.json$")
_RESULT = re.compile(
    r"^(?:results_)?(?:isl_\d+_osl_\d+_)?concurrency_(?P<c>\d+)(?:_[\w.]*)?(?<!\.pytorch)\.json$")
_AIPERF_METRICS = re.compile(r"^(?:server_metrics_export|.+_server_metrics)\.(?:jsonl|parquet)$")
_OLD_RUN_DIR = re.compile(r"^\d+_\d+P_\d+D_")


def _role(mode: str) -> str:
    return "agg" if mode == "aggregated" else mode


def classify_path(path: Path | str) -> FileInfo:
    """Classify one file of a run directory by its name (and, for a few names, its parent's)."""
    p = Path(path)
    name = p.name
    m = _WORKER.match(name)
    if m:
        return FileInfo(p, "worker", _role(m["role"]), int(m["idx"]), m["node"])
    m = _FRONTEND.match(name)
    if m:
        return FileInfo(p, "frontend", "frontend", int(m["idx"]), m["node"])
    m = _TRTLLM_SERVE.match(name)
    if m:
        return FileInfo(p, "frontend", "frontend", 0, m["node"])
    m = _SWEEP.match(name)
    if m:
        return FileInfo(p, "orchestrator", job_id=m["a"] or m["b"])
    if name in ("log.out", "log.err") and _OLD_RUN_DIR.match(p.parent.name):
        return FileInfo(p, "orchestrator", job_id=p.parent.name.split("_", 1)[0])
    if name in ("benchmark.out", "benchmark.err"):
        return FileInfo(p, "benchmark")
    if name in ("benchmark-rollup.json", "benchmark-rollup.csv"):
        return FileInfo(p, "rollup")
    if name in ("config.yaml", "recipe.lock.yaml"):
        return FileInfo(p, "recipe")
    if name == "raw_prometheus.jsonl":
        return FileInfo(p, "prometheus-capture")
    if name.endswith(".parquet") and "tachometer" in p.parts[:-1]:
        return FileInfo(p, "tachometer")
    if _AIPERF_METRICS.match(name):
        return FileInfo(p, "aiperf-metrics")
    m = _FINGERPRINT.match(name)
    if m:
        return FileInfo(p, "fingerprint", _role(m["role"]), int(m["idx"]))
    m = _RESULT.match(name)
    if m and (name.startswith("results_") or p.parent.name.startswith("sa-bench")):
        return FileInfo(p, "sa-bench-result", concurrency=int(m["c"]))
    if re.fullmatch(r"\d+\.json", name):
        return FileInfo(p, "job-json", job_id=name[:-5])
    m = _CONFIG_DUMP.match(name)
    if m and not name.startswith(("fingerprint_", "mooncake_", "benchmark")):
        return FileInfo(p, "config-dump", node=m["node"])
    return FileInfo(p, "unknown")


_DISAGG_MODE = re.compile(
    r"""(?:--disaggregation[-_]mode[= ]|disaggregation_mode['"]?\s*[:=]\s*)['"<]?(?:\w+\.)?"""
    r"""(?P<m>prefill|decode|agg\w*|encode)\b""", re.I)


def role_from_content(head_text: str) -> str | None:
    """Role of a worker log from its first lines, for files whose name carries none.

    An engine's own evidence decides first (its adapter's ``role_from_text``: vLLM's one-sided
    ``kv_role`` or Dynamo's old prefill flag); otherwise the ``--disaggregation-mode prefill|decode`` flag
    decides; otherwise None.
    """
    from . import engines

    for adapter in engines.adapters():
        role = adapter.role_from_text(head_text) if adapter.role_from_text else None
        if role:
            return role
    mode = _DISAGG_MODE.search(head_text)
    if mode:
        val = mode["m"].lower()
        if val in ("prefill", "decode"):
            return val
        if val.startswith("agg"):
            return "agg"
    return None


_PROM_LINE = re.compile(r"^(?:> ?)?(?:#? ?(?:HELP|TYPE) \S+.*|[a-zA-Z_:][\w:]*(?:\{[^}]*\})? [-+]?[\d.eE+]+|"
                        r"[a-zA-Z_:][\w:]*(?:\{[^}]*\})? (?:NaN|[+-]?Inf))\s*$")


def sniff_kind(head_text: str) -> str:
    """What a file with an uninformative name holds, from its first lines: ``orchestrator`` (srtctl's
    ``YYYY-MM-DD HH:MM:SS [LEVEL]`` lines), ``prometheus-text`` (exposition format, also pasted with
    ``> `` quotes), ``worker`` (any recognised record: a vLLM / Dynamo / SGLang / LMCache / router line, a record
    trigger, a request or access line) or ``unknown``."""
    from .clean import PROGRESS, logical_lines
    from .headers import parse_header
    from .lineparser import TRIGGERS
    from .noise import NOISE

    served = [f.regex for f in NOISE if f is not PROGRESS]

    counts = {"orchestrator": 0, "worker": 0, "prom": 0, "lines": 0, "triggers": 0}
    for raw in head_text.splitlines()[:400]:
        if not raw.strip():
            continue
        counts["lines"] += 1
        if _PROM_LINE.match(raw.strip()):
            counts["prom"] += 1
            continue
        if TRIGGERS.search(raw):
            counts["triggers"] += 1
        for text, _, _ in logical_lines(raw)[:1]:
            cls = parse_header(text).cls
            if cls == "orchestrator":
                counts["orchestrator"] += 1
            elif cls != "unknown" or any(r.search(text) for r in served):
                counts["worker"] += 1
    if counts["lines"] and counts["prom"] * 2 >= counts["lines"]:
        return "prometheus-text"
    if counts["orchestrator"] >= 3 and counts["orchestrator"] > counts["worker"]:
        return "orchestrator"
    if counts["worker"] or counts["triggers"]:
        return "worker"
    return "unknown"


# What a file must hold one line of to be read (the refusal names it).
VOCABULARY = ("engine stats, iteration, start-up, KV-transfer or fault lines, Dynamo or srtctl log lines, "
              "benchmark results or Prometheus text")


@functools.cache
def _vocabulary_literals() -> list[str]:
    """The record triggers that say a file is a log: a literal of three characters says nothing ('UCX' is in 1 %
    of 200 kB of random bytes; a real UCX line holds a longer one, its level)."""
    from .lineparser import trigger_literals

    return [t for t in trigger_literals() if len(t) >= 4]


def holds_vocabulary(block: bytes) -> bool:
    """Whether any line of a block holds a record trigger, also where escape sequences split one: the
    test that keeps a file whose head says nothing (a paste, a log after a long preamble, one with a
    stray NUL) from being refused. One native multi-literal pass, not a regex per line."""
    import polars as pl

    from .lineparser import ANSI_PATTERN

    text = pl.Series([block.decode("utf-8", errors="replace")])
    if b"\x1b" in block:
        text = text.str.replace_all(ANSI_PATTERN, "")
    return bool(text.str.contains_any(_vocabulary_literals()).item())
