"""Upstream vocabulary snapshot: the format strings diag reads, taken from the released wheels.

    python tools/upstream_vocab.py [--wheels DIR] [--out tests/data/upstream] [PKG==VER ...]

For each pinned release (:data:`PINS`, or the ``PKG==VER`` arguments) the script runs ``pip download
--no-deps PKG==VER`` into ``--wheels`` (kept between runs), opens the wheel and looks up every
:data:`VOCAB` entry of that package: in Python modules, every string literal (logger format strings,
``raise`` messages, stats-line segments, tqdm ``desc``; f-strings with ``{}`` for their fields), in
the Dynamo runtime's compiled library (``dynamo/_core*.so``), a ``strings``-like scan of its bytes.
It writes one snapshot per package and version, ``<out>/<package>-<version>.json``: for each entry
found, the file, the line (the byte offset in a binary), the format string as released and what diag
must make of it (``expect``: record kind, stage, fact, fault cause or stats field); entries a release
does not have are listed under ``absent`` (a wording that was removed or not yet added).

``tests/test_upstream_vocab.py`` builds a realistic log line from every snapshot entry (vLLM's
standard prefix, plausible values for ``%s`` / ``%d`` / ``%.1f`` / ``{}``) and asserts diag makes of
it what ``expect`` says. A new release is one command plus a diff: add its pin, run the script,
review the new snapshot (a changed wording shows as an entry moved to ``absent`` or a new format).

    python tools/upstream_vocab.py --call-sites [--wheels DIR]

writes ``engines/vllm/catalog/call_sites.toml`` (the vLLM adapter's call-site catalog) from the vLLM releases of :data:`CALL_SITE_PINS`: every
logging call that logs a traceback in the modules of the VOCAB entries logged with one (``core.py``,
``multiproc_executor.py``), as the log prefix shows it (``core.py:1330``), with its message and releases.
diag names a traceback cut before its exception line by that call site (``parsers/callsites.py``).
"""

from __future__ import annotations

import argparse
import ast
import json
import re
import subprocess
import sys
import zipfile
from dataclasses import dataclass
from fnmatch import fnmatch
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
PINS = ("vllm==0.31.0", "vllm==0.33.0", "ai-dynamo==1.5.1", "ai-dynamo==1.6.1",
        "ai-dynamo-runtime==1.5.1", "ai-dynamo-runtime==1.6.1", "sglang==0.5.23", "lmcache==0.5.6")
# A stats segment is logged inside the whole stats line: its rendered text goes where {fmt} is.
STATS_HEAD = ("Avg prompt throughput: 120.5 tokens/s, Avg generation throughput: 2210.3 tokens/s, "
              "Running: 64 reqs, Waiting: 2 reqs")


@dataclass(frozen=True)
class Vocab:
    """One wording diag reads: where it lives (package, file glob), how to find it (``needle``, a
    regex over the released string), how a log line carries it and what diag must make of it."""

    id: str
    package: str
    files: str
    needle: str
    expect: dict[str, Any]
    values: tuple[str, ...] = ()       # %s / {} values, in order (default: a plausible word)
    context: str = "{fmt}"            # the whole message around the rendered string
    binary: bool = False
    prefix: str = "vllm"              # vllm | dynamo | none: the head the test gives the line
    traceback: bool = False           # logged with logger.exception: a traceback follows
    notes: str = ""


_V = "vllm"
_D = "ai-dynamo"
_R = "ai-dynamo-runtime"
_MODEL = "Qwen/Qwen3-30B-A3B"
VOCAB: tuple[Vocab, ...] = (
    # --- the stats line, one segment at a time (vllm/v1/metrics/loggers.py) --------------------------------
    Vocab("stats-head", _V, "vllm/v1/metrics/loggers.py", r"^Avg prompt throughput: %\.1f tokens/s$",
          {"kind": "stats", "field": "prompt_tps", "value": 12.3},
          context="{fmt}, Avg generation throughput: 2210.3 tokens/s, Running: 64 reqs, Waiting: 2 reqs, "
                  "GPU KV cache usage: 41.0%"),
    Vocab("stats-deferred", _V, "vllm/v1/metrics/loggers.py", r"^Deferred: %d reqs$",
          {"kind": "stats", "field": "deferred", "value": 3},
          context=STATS_HEAD + ", {fmt}, GPU KV cache usage: 41.0%"),
    Vocab("stats-kv-fetch", _V, "vllm/v1/metrics/loggers.py", r"^KV fetch: %d waiting to start",
          {"kind": "stats", "field": "kv_fetch_waiting", "value": 3},
          context=STATS_HEAD + ", {fmt}, GPU KV cache usage: 41.0%",
          notes="vLLM >= 0.32: every P/D decode engine while a KV load is pending"),
    Vocab("stats-preemptions", _V, "vllm/v1/metrics/loggers.py", r"^Preemptions: %d$",
          {"kind": "stats", "field": "preemptions", "value": 3},
          context=STATS_HEAD + ", {fmt}, GPU KV cache usage: 41.0%"),
    Vocab("stats-kv-usage", _V, "vllm/v1/metrics/loggers.py", r"^%s KV cache usage: %\.1f%%$",
          {"kind": "stats", "field": "kv_usage", "value": 12.3}, values=("XPU",), context=STATS_HEAD + ", {fmt}",
          notes="the device name is the KV cache's device: GPU on CUDA, else the device type (XPU, CPU)"),
    Vocab("stats-prefix-hit", _V, "vllm/v1/metrics/loggers.py", r"^Prefix cache hit rate: %\.1f%%$",
          {"kind": "stats", "field": "prefix_hit", "value": 12.3},
          context=STATS_HEAD + ", GPU KV cache usage: 41.0%, {fmt}"),
    Vocab("stats-corrupted", _V, "vllm/v1/metrics/loggers.py", r"^Corrupted: %d reqs$",
          {"kind": "stats", "field": "corrupted", "value": 3},
          context=STATS_HEAD + ", GPU KV cache usage: 41.0%, {fmt}"),
    Vocab("stats-ext-hit", _V, "vllm/v1/metrics/loggers.py", r"^External prefix cache hit rate: %\.1f%%$",
          {"kind": "stats", "field": "ext_hit", "value": 12.3},
          context=STATS_HEAD + ", GPU KV cache usage: 41.0%, {fmt}"),
    Vocab("stats-mm-hit", _V, "vllm/v1/metrics/loggers.py", r"^MM cache hit rate: %\.1f%%$",
          {"kind": "stats", "field": "mm_hit", "value": 12.3},
          context=STATS_HEAD + ", GPU KV cache usage: 41.0%, {fmt}"),
    Vocab("stats-aggregated", _V, "vllm/v1/metrics/loggers.py", r"^\{\} Engines Aggregated: $",
          {"kind": "stats", "field": "n_aggregated", "value": 8}, values=("8",),
          context="{fmt}" + STATS_HEAD + ", GPU KV cache usage: 41.0%"),
    # --- start-up stages -------------------------------------------------------------------------------------
    Vocab("compile-start", _V, "vllm/compilation/monitor.py", r"Starting torch\.compile$",
          {"kind": "stage", "stage": "compile", "mark": "start"}),
    Vocab("compile-done", _V, "vllm/compilation/monitor.py", r"torch\.compile took %\.2f s in total$",
          {"kind": "stage", "stage": "compile", "mark": "done"},
          notes="0.2x said 'torch.compile takes'"),
    Vocab("compile-warmup-done", _V, "vllm/compilation/decorators.py",
          r"torch\.compile and initial profiling/warmup run together took",
          {"kind": "stage", "stage": "compile", "mark": "done"}),
    Vocab("compile-range", _V, "vllm/compilation/backends.py", r"Compiling a graph for compile range %s takes",
          {"kind": "stage", "stage": "compile", "mark": "start"}, values=("(1, 8192)",)),
    Vocab("compile-cache-dir", _V, "vllm/compilation/backends.py", r"Using cache directory: %s for vLLM's torch",
          {"kind": "stage", "stage": "compile", "mark": "start"},
          values=("/root/.cache/vllm/torch_compile_cache/3f1c/rank_0_0/backbone")),
    Vocab("compile-bytecode", _V, "vllm/compilation/backends.py", r"Dynamo bytecode transform time: %\.2f s",
          {"kind": "stage", "stage": "compile", "mark": "start"}),
    Vocab("weights-start", _V, "vllm/v1/worker/gpu_model_runner.py", r"^Starting to load model %s\.\.\.$",
          {"kind": "stage", "stage": "weights", "mark": "start"}, values=(_MODEL,)),
    Vocab("weights-shards", _V, "vllm/model_executor/model_loader/weight_utils.py",
          r"^Loading safetensors checkpoint shards$",
          {"kind": "stage", "stage": "weights", "mark": "progress"},
          context="{fmt}:  60% Completed | 57/95 [00:27<00:18,  2.08it/s]", prefix="proc"),
    Vocab("weights-shards-eager", _V, "vllm/model_executor/model_loader/weight_utils.py", r"^ \(eager\)$",
          {"kind": "stage", "stage": "weights", "mark": "progress"},
          context="Loading safetensors checkpoint shards{fmt}:  40% Completed | 2/5 [00:03<00:04,  1.41s/it]",
          prefix="proc", notes="appended to the tqdm description when shards load eagerly"),
    Vocab("weights-done", _V, "vllm/model_executor/model_loader/default_loader.py", r"^Loading weights took %\.2f",
          {"kind": "stage", "stage": "weights", "mark": "done"}),
    Vocab("model-loaded", _V, "vllm/v1/worker/gpu_model_runner.py", r"^Model loading took %s GiB memory and",
          {"kind": "stage", "stage": "model_loaded", "mark": "done"}, values=("58.14",)),
    Vocab("kv-memory", _V, "vllm/v1/worker/gpu_worker.py", r"^Available KV cache memory: %(?:\.2f|s) GiB$",
          {"kind": "fact", "key": "kv_memory_gib", "value": 61.73}, values=("61.73",)),
    Vocab("kv-size", _V, "vllm/v1/core/kv_cache_utils.py", r"^%s KV cache size: %s tokens",
          {"kind": "fact", "key": "kv_cache_tokens", "value": 1312768}, values=("GPU", "1,312,768", "9,216")),
    Vocab("kv-size-host", _V, "vllm/v1/core/kv_cache_utils.py", r"^%s KV cache size: %s tokens",
          {"kind": "fact", "key": "kv_cache_tokens", "value": 1312768}, values=("GPU + host", "1,312,768", "9,216"),
          notes="'GPU + host' when the hisparse host pool is on"),
    Vocab("graphs-done", _V, "vllm/v1/worker/gpu_model_runner.py", r"^Graph capturing finished in %\.0f secs",
          {"kind": "stage", "stage": "cuda_graphs", "mark": "done"}),
    Vocab("init-engine", _V, "vllm/v1/engine/core.py", r"^init engine \(profile, create kv cache, warmup model\) took",
          {"kind": "stage", "stage": "cuda_graphs", "mark": "done"}),
    Vocab("nixl-register", _V, "vllm/distributed/kv_transfer/kv_connector/v1/nixl/*.py",
          r"^Registering KV_Caches\. use_mla: %s, kv_buffer_device",
          {"kind": "stage", "stage": "kv_connector", "mark": "done"}, values=("False", "cuda", "False")),
    Vocab("version-plain", _V, "vllm/entrypoints/**", r"^vLLM server version %s, serving model %s$",
          {"kind": "fact", "key": "version", "value": "0.33.0", "model": _MODEL}, values=("0.33.0", _MODEL)),
    Vocab("version-logo", _V, "vllm/entrypoints/**", r"\$\{w\}%s\$\{r\}\n.*model",
          {"kind": "fact", "key": "version", "value": "0.33.0", "model": _MODEL}, values=("0.33.0", _MODEL),
          notes="the default `vllm serve` logo: version and model rows below the record's head"),
    Vocab("async-scheduling", _V, "vllm/config/*.py", r"^Asynchronous scheduling is",
          {"kind": "fact", "key": "async_scheduling"},
          notes="removed between 0.26 and 0.30: async scheduling is on by default since 0.14 unless disabled"),
    Vocab("serving", _V, "vllm/entrypoints/**", r"^Starting vLLM (?:API )?server (?:%d |\{\} )?on",
          {"kind": "stage", "stage": "registration", "mark": "start"}, values=("http://0.0.0.0:8000",)),
    # --- deaths ------------------------------------------------------------------------------------------------
    Vocab("worker-failed", _V, "vllm/v1/executor/multiproc_executor.py", r"^WorkerProc failed\.$",
          {"kind": "fault", "cause": "worker_died"}, traceback=True),
    Vocab("worker-failed-start", _V, "vllm/v1/executor/multiproc_executor.py", r"^WorkerProc failed to start\.$",
          {"kind": "fault", "cause": "worker_died"}, traceback=True),
    Vocab("worker-died", _V, "vllm/v1/executor/multiproc_executor.py", r"^Worker proc %s died unexpectedly",
          {"kind": "fault", "cause": "worker_died"}, values=("VllmWorker-1", "1")),
    Vocab("process-died", _V, "vllm/v1/utils.py", r"^Process \{\} \(PID: \{\}\) died with exit code \{\}$",
          {"kind": "fault", "cause": "engine_dead"}, values=("EngineCore_DP0", "4577", "1"),
          context="RuntimeError: {fmt}", notes="raised by the API-server process monitor"),
    Vocab("engine-proc-died", _V, "vllm/v1/utils.py", r"^Engine core process \{\} died unexpectedly\.$",
          {"kind": "fault", "cause": "engine_dead"}, values=("EngineCore_DP0",), context="RuntimeError: {fmt}"),
    Vocab("frontend-failed", _V, "vllm/v1/engine/utils.py", r"^Frontend process failed during engine core init",
          {"kind": "fault", "cause": "engine_failed_start"}, values=("{'ApiServer_0': 1}",),
          context="RuntimeError: {fmt}"),
    Vocab("core-init-failed", _V, "vllm/v1/engine/utils.py", r"^Engine core initialization failed\. ",
          {"kind": "fault", "cause": "engine_failed_start"}, values=("{'EngineCore_DP0': 1}", ""),
          context="RuntimeError: {fmt}"),
    Vocab("engine-failed-start", _V, "vllm/v1/engine/core.py", r"^EngineCore failed to start\.$",
          {"kind": "fault", "cause": "engine_failed_start"}, traceback=True),
    Vocab("engine-fatal", _V, "vllm/v1/engine/core.py", r"^EngineCore encountered a fatal error\.$",
          {"kind": "fault", "cause": "engine_core_fatal"}, traceback=True),
    # --- KV transfer (NIXL push mode) ------------------------------------------------------------------------
    Vocab("nixl-push-unrecognized", _V, "vllm/distributed/kv_transfer/kv_connector/v1/nixl/push_worker.py",
          r"^Unrecognized request %s notif \(may have expired\)\.$",
          {"kind": "nixl_failure", "ftype": "notification_unrecognized"}, values=("cmpl-7f3a-0",)),
    Vocab("nixl-push-timeout", _V, "vllm/distributed/kv_transfer/kv_connector/v1/nixl/push_scheduler.py",
          r"^NixlPushConnector: registration for request %s timed out",
          {"kind": "nixl_failure", "ftype": "push_timeout"}, values=("cmpl-7f3a-0",)),
    # --- SGLang (sglang/srt/managers/scheduler_components/metrics_reporter.py) -------------------------------
    Vocab("sglang-prefill", "sglang", "sglang/srt/managers/**", r"^Prefill batch\{\}, #new-seq: ",
          {"kind": "stats", "field": "waiting", "value": 41}, values=("", "18", "16384", "0", "token usage: 0.12, ",
                                                                        "3", "41", "0"),
          context="{fmt}cuda graph: False, input throughput (token/s): 15873.20", prefix="sglang"),
    Vocab("sglang-decode", "sglang", "sglang/srt/managers/**", r"^Decode batch\{\}, #running-req: \{\}, \{\}$",
          {"kind": "stats", "field": "running", "value": 64}, values=("", "64", "#token: 120000, token usage: 0.91, "),
          context="{fmt}cuda graph: True, gen throughput (token/s): 2301.10, #queue-req: 0", prefix="sglang"),
    # --- LMCache (lmcache/integration/vllm/vllm_v1_adapter.py) ---------------------------------------------------
    Vocab("lmcache-short-retrieve", "lmcache", "lmcache/integration/vllm/*.py",
          r"^(?:Request %s)?The number of retrieved tokens is less than the",
          {"kind": "fault", "cause": "kv_connector"}, values=("cmpl-9",), prefix="lmcache",
          notes="0.5.x glues the request id to the sentence: 'Request cmpl-9The number of ...'"),
    Vocab("lmcache-load-failed", "lmcache", "lmcache/integration/vllm/*.py",
          r"^Request %s failed to load %d tokens? across", {"kind": "fault", "cause": "kv_connector"},
          values=("cmpl-9",), prefix="lmcache"),
    # --- Dynamo (python) -----------------------------------------------------------------------------------------
    Vocab("dynamo-ready", _D, "dynamo/vllm/main.py", r"^(?:Vllm)?[Ww]orker for \{\} has been initialized$",
          {"kind": "stage", "stage": "ready", "mark": "done"}, values=(_MODEL,), prefix="dynamo",
          notes="ai-dynamo <= 1.5: 'VllmWorker for ...', >= 1.6: 'worker for ...'"),
    # --- Dynamo runtime (Rust, compiled) -------------------------------------------------------------------------
    Vocab("dynamo-register-start", _R, "dynamo/_core*.so", r"Registering endpoint with request plane server",
          {"kind": "stage", "stage": "registration", "mark": "start"}, binary=True, prefix="dynamo"),
    Vocab("dynamo-registered", _R, "dynamo/_core*.so", r"Registered endpoint '",
          {"kind": "stage", "stage": "registration", "mark": "done"}, binary=True, prefix="dynamo",
          context="{fmt}generate' with shared TCP server on 10.0.11.12:30768"),
    Vocab("dynamo-tcp-server", _R, "dynamo/_core*.so", r"TCP request plane server started",
          {"kind": "stage", "stage": "registration", "mark": "start"}, binary=True, prefix="dynamo"),
)


# --------------------------------------------------------------------------------------------- extraction

def _literal(node: ast.AST) -> str | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):  # f-string: its fields as {}
        parts = []
        for v in node.values:
            if isinstance(v, ast.Constant) and isinstance(v.value, str):
                parts.append(v.value)
            else:
                parts.append("{}")
        return "".join(parts)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = _literal(node.left), _literal(node.right)
        if left is not None and right is not None:
            return left + right
    return None


def python_strings(source: str) -> list[tuple[int, str]]:
    """(line, text) of every string literal of a module, outermost concatenations first."""
    out: list[tuple[int, str]] = []
    seen: set[int] = set()
    for node in ast.walk(ast.parse(source)):
        if id(node) in seen:
            continue
        text = _literal(node)
        if text is not None and isinstance(node, ast.JoinedStr | ast.BinOp | ast.Constant):
            out.append((node.lineno, text))
            seen.update(id(n) for n in ast.walk(node))
    return sorted(out)


def binary_strings(data: bytes, min_len: int = 8) -> list[tuple[int, str]]:
    """(offset, text) of the printable runs of a binary, as ``strings`` lists them."""
    return [(m.start(), m.group().decode("utf-8", "replace"))
            for m in re.finditer(rb"[\x20-\x7e\t\n\xc2-\xf4\x80-\xbf]{%d,}" % min_len, data)]


_TAG = re.compile(r"%s[A-Z]|%storch")


def _matches(v: Vocab, name: str) -> bool:
    return fnmatch(name, v.files) or (v.files.endswith("/**") and name.startswith(v.files[:-2]))


def snapshot(package: str, version: str, wheel: Path) -> dict[str, Any]:
    """The snapshot of one wheel: every VOCAB entry of the package, found or absent."""
    entries, absent = [], []
    vocab = [v for v in VOCAB if v.package == package]
    with zipfile.ZipFile(wheel) as zf:
        names = zf.namelist()
        cache: dict[str, list[tuple[int, str]]] = {}
        for v in vocab:
            rx = re.compile(v.needle, re.S)
            hits = []
            for name in names:
                if not _matches(v, name) or not (name.endswith(".py") or v.binary):
                    continue
                if name not in cache:
                    raw = zf.read(name)
                    cache[name] = binary_strings(raw) if v.binary else python_strings(raw.decode("utf-8", "replace"))
                for line, text in cache[name]:
                    m = rx.search(text)
                    if m is None:
                        continue
                    fmt = m.group() if v.binary else text
                    hit: dict[str, Any] = {"file": name, ("offset" if v.binary else "line"): line, "format": fmt}
                    if _TAG.match(fmt):  # vLLM >= 0.32 puts the compile tag ("[tag] " or "") first
                        hit["values"] = ["", *v.values]
                    hits.append(hit)
                    break
            record = {"id": v.id, "expect": v.expect}
            for key in ("values", "context", "prefix", "traceback", "notes"):
                val = getattr(v, key)
                if val != Vocab.__dataclass_fields__[key].default:
                    record[key] = list(val) if isinstance(val, tuple) else val
            if hits:
                entries.extend({**record, **h} for h in hits[:1])
            else:
                absent.append({"id": v.id, "files": v.files, "needle": v.needle, "notes": v.notes})
    return {"package": package, "version": version, "wheel": wheel.name,
            "generated_by": "tools/upstream_vocab.py", "entries": entries, "absent": absent}


# --------------------------------------------------------------------------------------------- call sites

# The vLLM releases whose logging call sites diag knows: the snapshot's pins and the vLLM each Dynamo 1.x
# release pins (ai-dynamo 1.0: 0.16.0, 1.1: 0.19.0, 1.4: 0.26.0, 1.5: 0.28.0, 1.6: 0.31.0), plus 0.30 and 0.34.
CALL_SITE_PINS = ("vllm==0.16.0", "vllm==0.19.0", "vllm==0.26.0", "vllm==0.28.0", "vllm==0.30.0", "vllm==0.31.0",
                  "vllm==0.33.0", "vllm==0.34.0")
CALL_SITES = ROOT / "engines" / "vllm" / "catalog" / "call_sites.toml"


def _site_basenames() -> set[str]:
    """The modules whose tracebacks diag must name: those of the VOCAB entries logged with a traceback."""
    return {v.files.rsplit("/", 1)[-1] for v in VOCAB if v.package == _V and v.traceback}


def traceback_calls(source: str) -> list[tuple[int, str]]:
    """(line, message) of every logging call of a module that logs a traceback: ``logger.exception``,
    or ``error`` / ``critical`` / ``warning`` with ``exc_info``; the line is the one the log record shows."""
    out = []
    for node in ast.walk(ast.parse(source)):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.args):
            continue
        name = node.func.attr
        if name != "exception" and not (name in ("error", "critical", "warning")
                                        and any(k.arg == "exc_info" for k in node.keywords)):
            continue
        text = _literal(node.args[0])
        if text is not None:
            out.append((node.lineno, text))
    return sorted(out)


def call_sites(wheel: Path) -> set[tuple[str, str]]:
    """(``file:line``, message) of every traceback-logging call in the wheel's modules named like one of
    :func:`_site_basenames`; the file is the basename, as vLLM's log prefix shows it (two modules of one
    name may log at one line: both are kept, and diag takes such a site as undecided)."""
    names = _site_basenames()
    out: set[tuple[str, str]] = set()
    with zipfile.ZipFile(wheel) as zf:
        for name in zf.namelist():
            base = name.rsplit("/", 1)[-1]
            if base in names and name.startswith("vllm/"):
                out.update((f"{base}:{line}", text)
                           for line, text in traceback_calls(zf.read(name).decode("utf-8", "replace")))
    return out


def _toml_str(text: str) -> str:
    return json.dumps(text, ensure_ascii=False)  # a JSON string is a valid TOML basic string


def write_call_sites(wheels: Path, out: Path = CALL_SITES) -> int:
    """The call-site table (``engines/vllm/catalog/call_sites.toml``): per ``file:line``, the message logged there
    and the releases it is logged in. diag names a traceback cut before its exception line by its call site."""
    table: dict[tuple[str, str], list[str]] = {}
    versions = []
    for spec in CALL_SITE_PINS:
        version = spec.partition("==")[2]
        versions.append(version)
        for at, text in call_sites(download(spec, wheels)):
            table.setdefault((at, text), []).append(version)
    lines = ["# Generated by tools/upstream_vocab.py --call-sites: do not edit. Where vLLM logs a traceback",
             "# (logger.exception, or exc_info) in the modules whose tracebacks diag names, per release: the",
             "# log prefix's file:line and the message logged there. parsers/callsites.py reads it.",
             f"versions = [{', '.join(_toml_str(v) for v in versions)}]", ""]
    def key(item: tuple[tuple[str, str], list[str]]) -> tuple[str, int, str]:
        (at, text), _ = item
        base, _, line = at.rpartition(":")
        return base, int(line), text

    for (at, text), vs in sorted(table.items(), key=key):
        lines += ["[[site]]", f"at = {_toml_str(at)}", f"message = {_toml_str(text)}",
                  f"versions = [{', '.join(_toml_str(v) for v in vs)}]", ""]
    out.write_text("\n".join(lines), encoding="utf-8")
    print(f"{out.relative_to(ROOT) if out.is_relative_to(ROOT) else out}: {len(table)} call sites, "
          f"{len(versions)} releases")
    return len(table)


def download(spec: str, wheels: Path) -> Path:
    name, _, version = spec.partition("==")
    stem = name.replace("-", "_")
    found = sorted(wheels.glob(f"{stem}-{version}-*.whl"))
    if not found:
        subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "-q", "--only-binary=:all:",
                        "--python-version", "3.12", "--platform", "manylinux_2_28_x86_64",
                        "--platform", "manylinux_2_31_x86_64", "--platform", "manylinux_2_34_x86_64", "--platform", "any", spec, "-d", str(wheels)],
                       check=True)
        found = sorted(wheels.glob(f"{stem}-{version}-*.whl"))
    if not found:
        raise SystemExit(f"upstream_vocab: no wheel for {spec} in {wheels}")
    return found[0]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("specs", nargs="*", default=list(PINS), help="PKG==VER (default: the pinned set)")
    ap.add_argument("--wheels", type=Path, default=Path("/tmp/upstream-wheels"))
    ap.add_argument("--out", type=Path, default=ROOT / "tests" / "data" / "upstream")
    ap.add_argument("--call-sites", action="store_true",
                    help=f"write {CALL_SITES.relative_to(ROOT)} from the releases of CALL_SITE_PINS instead")
    args = ap.parse_args(argv)
    args.wheels.mkdir(parents=True, exist_ok=True)
    if args.call_sites:
        write_call_sites(args.wheels)
        return 0
    args.out.mkdir(parents=True, exist_ok=True)
    for spec in args.specs:
        package, _, version = spec.partition("==")
        snap = snapshot(package, version, download(spec, args.wheels))
        path = args.out / f"{package}-{version}.json"
        path.write_text(json.dumps(snap, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
        print(f"{path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}: "
              f"{len(snap['entries'])} entries, {len(snap['absent'])} absent")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
