"""The engine-adapter contract, per adapter: its formats carry its engine and a namespaced name with samples,
its catalogs name core's stages and fault classes, its metrics module has core's shape, detection picks it on
its own lines and not on another engine's, and its stats cadence is what the rules read."""

from __future__ import annotations

import dataclasses
import importlib
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from loading import report_of

from diag.parsers import engines, faults, prom_vocab, stages
from diag.parsers.clean import logical_lines
from diag.parsers.formats import REGISTRY, LineFormat, formats
from diag.parsers.headers import parse_header
from diag.parsers.records import StatsSample

SGLANG = engines.get("sglang")
VLLM_HEAD = (
    "(EngineCore_DP0 pid=4577) INFO 08-27 18:13:03 [core.py:101] Initializing a V1 LLM engine (v0.26.1) with config: "
    "model='/model'\n"
    "(APIServer pid=1) INFO 08-12 14:05:14 [loggers.py:271] Engine 000: Avg prompt throughput: 0.0 tokens/s, Avg "
    "generation throughput: 1055.3 tokens/s, Running: 18 reqs, Waiting: 43 reqs, GPU KV cache usage: 95.9%\n")


# ---------------------------------------------------------------- SGLang
def test_sglang_formats_are_its_own() -> None:
    assert SGLANG is not None
    own = [f for f in formats() if f.engine == "sglang"]
    assert {"sglang-record", "sglang-prefill-batch", "sglang-decode-batch", "sglang-retract"} <= {f.name for f in own}
    for f in own:
        assert f.name.startswith("sglang-") and len(f.samples) >= 2, f.name
    for module in SGLANG.format_modules:   # every format its modules declare carries its tag
        mod = importlib.import_module(module)
        assert all(v.engine == "sglang" for v in vars(mod).values() if type(v).__name__ == "LineFormat")


def test_sglang_catalogs_use_core_vocabulary() -> None:
    core_classes = set(faults.CLASSES)
    own = [c for c in faults.TAXONOMY if c.engine == "sglang"]
    assert {"sglang_kv_transfer", "sglang_process_died"} <= {c.name for c in own}
    assert all(c.cls in core_classes for c in own)
    stage_lines = [f for f in formats("record") if f.engine == "sglang" and f.emits == "stage"]
    assert {f.name.split("-")[2] for f in stage_lines} <= set(stages.BY_NAME)
    assert {f.name.split("-")[2] for f in stage_lines} >= {"weights", "kv_cache", "cuda_graphs", "ready"}


@pytest.mark.parametrize("name", [a.name for a in engines.adapters() if a.metrics_module])
def test_metrics_modules_have_core_shape(name: str) -> None:
    adapter = engines.get(name)
    assert adapter is not None and adapter.metrics_module and adapter.metric_prefixes
    metrics = importlib.import_module(adapter.metrics_module)
    stats_fields = {f.name for f in dataclasses.fields(StatsSample)}
    assert set(metrics.FIELDS) <= set(prom_vocab.FIELDS) | stats_fields
    for kind, sources in metrics.FIELDS.values():
        assert kind in ("gauge", "counter") and sources
        assert all(name.startswith(adapter.metric_prefixes) for name, _ in sources)
    assert set(metrics.KV_SIGNALS) <= set(prom_vocab.KV_SIGNALS)
    assert set(metrics.KV_COUNTS) <= set(prom_vocab.KV_COUNTS)
    assert set(metrics.LATENCY) == set(prom_vocab.LATENCY)
    assert all(fam.startswith(adapter.metric_prefixes) for fam in metrics.LATENCY.values())
    assert metrics.PRESENCE.startswith(adapter.metric_prefixes) and metrics.PRESENCE in prom_vocab.PRESENCE


@pytest.mark.parametrize("head", [
    "python3 -m dynamo.sglang --model-path /model --disaggregation-mode decode --tp-size 8\n",
    "python3 -m sglang.launch_server --model-path /model --port 30000\n",
    "[2025-05-20 09:58:00] server_args=ServerArgs(model_path='/model', tokenizer_path='/model', tp_size=8)\n",
    "[2026-08-12 14:00:00] server_args={'model_path': '/model', 'tp_size': 8}\n",
    "[2026-08-12 14:01:02 DP0 TP0 EP0] Load weight begin. avail mem=178.21 GB\n",
])
def test_sglang_is_told_from_its_log_head(head: str) -> None:
    assert engines.from_text(head) is SGLANG


def test_sglang_samples_pick_sglang_and_vllm_lines_do_not() -> None:
    own = [s for f in formats() if f.engine == "sglang" and f.kind in ("header", "record") for s in f.samples]
    assert all(engines.from_text(s) in (SGLANG, None) for s in own)
    assert engines.from_text("\n".join(own)) is SGLANG
    assert engines.from_text(VLLM_HEAD) is not SGLANG


def _decode_log(path: Path, stalled_s: int) -> Path:
    """An SGLang decode rank: 12 s of ramp-up (a batch line every 0.5 s, the first after idle at 0.5 tok/s),
    then two minutes at 5,120 tok/s, then ``stalled_s`` seconds at 100 tok/s with 128 requests running."""
    t, lines = datetime(2026, 8, 12, 14, 0, 0), ["[2026-08-12 13:59:50] The server is fired up and ready to roll!"]

    def batch(running: int, tps: float) -> str:
        return (f"[{t:%Y-%m-%d %H:%M:%S} DP0 TP0 EP0] Decode batch, #running-req: {running}, #token: 9000, token usage: "
                f"0.30, cuda graph: True, gen throughput (token/s): {tps:.2f}, #queue-req: 0")
    for i in range(24):
        t += timedelta(seconds=0.5)
        lines.append(batch(i + 1, 0.5 if i == 0 else 40.0 * (i + 1)))
    for _ in range(240):
        t += timedelta(seconds=0.5)
        lines.append(batch(128, 5120.0))
    for _ in range(stalled_s * 2):
        t += timedelta(seconds=0.5)
        lines.append(batch(128, 100.0))
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.mark.parametrize(("stalled_s", "fires"), [(0, False), (45, True)])
def test_per_batch_cadence_judges_stalls_in_time(tmp_path: Path, stalled_s: int, fires: bool) -> None:
    """SGLang logs a batch line every few steps (no clock): a ramp-up of a few seconds is many lines but no
    stall; 45 s of collapsed throughput with requests running is one."""
    assert SGLANG.stats_cadence_s is None and engines.by_stats_variant("sglang-decode") is SGLANG
    report = report_of([str(_decode_log(tmp_path / "decode.log", stalled_s))])
    assert [f.code for f in report.findings if f.code == "DIAG-B004"] == (["DIAG-B004"] if fires else [])


# ---------------------------------------------------------------- vLLM

def declared(name: str) -> list[LineFormat]:
    engines.adapters()
    return [f for f in REGISTRY.values() if f.engine == name]


def check_declarations(name: str) -> None:
    adapter = engines.get(name)
    assert adapter is not None and adapter.format_modules, name
    fmts = declared(name)
    assert fmts, f"{name} declares no line format"
    for fmt in fmts:
        assert fmt.name.startswith(f"{name}-"), fmt.name
        assert len(fmt.samples) >= 2, fmt.name
    # its own modules declare its formats; core's catalog loaders declare its catalogs' lines on its behalf
    owned = {f.__module__ for f in (fmt.parse for fmt in fmts) if f is not None}
    assert owned <= {*adapter.format_modules, "diag.parsers.faults", "diag.parsers.stages"}, owned


# ------------------------------------------------------------------ vLLM
def test_vllm_declarations() -> None:
    check_declarations("vllm")


def test_vllm_heads_parse_as_its_header_classes() -> None:
    """Every head vLLM declares parses its samples as a header class the registry maps back to vLLM."""
    vllm = engines.get("vllm")
    heads = [f for f in declared("vllm") if f.kind == "header"]
    assert {f.name for f in heads} >= {"vllm-record", "vllm-proc-line", "vllm-file-tag"}
    for fmt in heads:
        assert engines.by_header(fmt.emits) is vllm, fmt.name
        for sample in fmt.samples:
            assert parse_header(logical_lines(sample)[0][0]).cls == fmt.emits, sample


def test_vllm_samples_are_read_as_vllm() -> None:
    """A sample of a vLLM line under an engine's head is under vLLM's (other heads: UCX's, bare messages)."""
    vllm = engines.get("vllm")
    for fmt in declared("vllm"):
        for sample in fmt.samples:
            owner = engines.by_header(parse_header(logical_lines(sample)[0][0]).cls)
            assert owner in (None, vllm), (fmt.name, sample)


def test_vllm_evidence_picks_vllm() -> None:
    """A worker log's head holding vLLM's version lines tells vLLM from every other engine."""
    head = "\n".join(REGISTRY["vllm-version"].samples)
    assert engines.from_text(head) is engines.get("vllm"), head


def test_vllm_fast_paths_are_adapter_data() -> None:
    adapter = engines.get("vllm")
    assert adapter is not None
    assert {s.kind for s in adapter.columns} == {"stats", "kv_transfer"}
    assert all(s.literal and s.patterns and next(iter(s.groups)) == "md" for s in adapter.columns)
    assert adapter.plain_head and adapter.tz_probe and adapter.connector_paths
    assert adapter.role_from_text is not None
    assert adapter.role_from_text("KVTransferConfig(kv_connector='NixlConnector', kv_role='kv_producer')") == "prefill"
    assert adapter.role_from_text("'kv_role': 'kv_both'") is None


# ---------------------------------------------------------------- which engine a run used
@pytest.mark.parametrize(("run", "engine"), [("sglang-kv-capacity", "sglang"), ("kv-exhaustion", "vllm")])
def test_a_run_without_its_recipe_is_told_by_its_logs(tmp_path: Path, run: str, engine: str) -> None:
    """The recipe's backend.type decides; without the recipe, the worker logs' own lines do (batch and
    live read the same head)."""
    import shutil

    from conftest import ROOT

    from diag.pipeline import Pipeline
    from diag.rules.settings import Settings
    from diag.sources import FollowSource

    src = ROOT / "samples" / "runs" / run
    assert report_of(src).run.engine_name == engine and report_of(src).run.engine_by == "recipe"
    bare = tmp_path / run
    shutil.copytree(src / "logs", bare / "logs")
    batch = report_of(bare).run
    assert (batch.engine_name, batch.engine_by, batch.engine.name) == (engine, "logs", engine)
    pipeline = Pipeline(FollowSource([str(bare)]), Settings())
    pipeline.step()
    live = pipeline.finish().report
    assert live is not None and (live.run.engine_name, live.run.engine_by) == (engine, "logs")


def test_a_plug_in_that_fails_to_import_is_skipped_and_named(monkeypatch: pytest.MonkeyPatch) -> None:
    """A broken engine package costs its own engine only: the others load, and load_errors names it."""
    monkeypatch.setattr(engines, "BUNDLED", (*engines.BUNDLED, "diag.engines.no_such_engine"))
    monkeypatch.setattr(engines, "_ERRORS", [])
    engines.adapters.cache_clear()
    try:
        assert engines.names() == ("vllm", "sglang", "trtllm")
        assert [e.split(":")[0] for e in engines.load_errors()] == ["diag.engines.no_such_engine"]
    finally:
        engines.adapters.cache_clear()
