"""Neutral knobs and an engine's knowledge through its adapter: catalog texts name knobs as placeholders that
each engine renders in its own spelling (vLLM's is today's text), the run's engine comes from its recipe, and
what core asked of rules/knowledge.py about vLLM builds it now asks the vLLM adapter."""

from __future__ import annotations

import re
from pathlib import Path

from diag.parsers import engines
from diag.parsers.engine import KNOBS, SAYS, render_knobs, render_text
from diag.parsers.recipe import Recipe
from diag.rules import knowledge
from diag.rules.catalog import catalog, engine_catalog
from diag.rules.endpoints import engine_index
from diag.rules.runmodel import Run, recipe_engine

TEXT = "raise {knob.prefill_token_budget}; facts {knob_key.api_servers}"


def test_a_knob_renders_as_each_engine_spells_it() -> None:
    vllm, sglang = engines.get("vllm"), engines.get("sglang")
    assert render_knobs(TEXT, vllm) == "raise max-num-batched-tokens; facts api_server_count"
    # SGLang has no API-server knob: its text says what the knob is
    assert render_knobs(TEXT, sglang) == f"raise chunked-prefill-size; facts {KNOBS['api_servers']}"
    assert render_knobs(TEXT, None) == f"raise {KNOBS['prefill_token_budget']}; facts {KNOBS['api_servers']}"


def test_a_phrase_renders_as_each_engine_says_it_else_neutrally() -> None:
    """``{says.X}`` quotes the engine's own line (phrases may name knobs), else a neutral text."""
    vllm, sglang = engines.get("vllm"), engines.get("sglang")
    assert vllm is not None and sglang is not None
    text = "prints {says.capacity_line}; {says.stats_lines}"
    assert render_text(text, vllm).startswith('prints "Maximum concurrency for L tokens per request: Mx"; vLLM prints')
    assert "AsyncLLM created with api_server_count more than 1" in render_text(text, vllm)
    assert render_text(text, sglang).startswith('prints "max_total_num_tokens=T, ..., context_len=L" (T / L); SGLang')
    assert render_text(text, None) == f"prints {SAYS['capacity_line']}; " + render_knobs(SAYS["stats_lines"], None)
    assert sglang.says("context_too_long") == SAYS["context_too_long"] and sglang.says("kv_expiry_note") == ""
    for a in engines.adapters():
        assert set(a.phrases) <= set(SAYS), a.name


def test_every_catalog_text_renders_without_a_placeholder_left() -> None:
    placeholder = re.compile(r"\{(knob|says)")
    for engine in (*engines.names(), None):
        for rule in engine_catalog(engine).values():
            assert not placeholder.search(repr(rule)), (engine, rule.code)
    assert catalog() == engine_catalog(engines.default().name)
    # the stats rule's advice sets the API-server knob for vLLM; for SGLang the same entry names the knob
    stats = next(r for r in catalog().values() if any("api-server-count" in str(a) for a in r.advice))
    assert any("chunked-prefill-size" in str(r.advice) for r in engine_catalog("sglang").values())
    assert "api-server-count" not in str(engine_catalog("sglang")[stats.code].advice)


def test_the_runs_engine_is_its_recipes_backend_else_the_default() -> None:
    def recipe(data: dict) -> Recipe:
        return Recipe("r.yaml", "job", None, "v1", data)  # type: ignore[arg-type]

    assert recipe_engine(recipe({"backend": {"type": "sglang"}})).name == "sglang"
    assert recipe_engine(recipe({"engine": {"type": "vllm"}})).name == "vllm"
    assert recipe_engine(recipe({})) is engines.default()   # srtctl's own default is not evidence
    assert Run(Path("."), (), (), {}, jobs=(recipe({"backend": {"type": "sglang"}}),)).engine.display == "SGLang"
    assert Run(None, (), (), {}).engine.display == "vLLM"


def test_vllm_knowledge_answers_through_its_adapter() -> None:
    vllm = engines.get("vllm")
    assert vllm is not None
    budget = vllm.hook("default_prefill_budget")
    assert budget is not None and budget(knowledge.gpu("gb200")) == 16384 and budget(knowledge.gpu("a100")) == 2048
    assert vllm.launch()["defaults"]["stream_interval"] == 1
    assert "45357" in vllm.hook("fixes")()       # its fixes, through its hooks
    assert engine_index("EngineCore_DP3") == "3" and engine_index("APIServer") is None


def test_every_startup_fact_is_cores_or_its_engines() -> None:
    """A start-up fact a format's sample parses to is keyed by core's neutral keys or its engine's own."""
    import diag.parsers.ingest  # noqa: F401  (imports every format module)
    from diag.parsers.formats import REGISTRY
    from diag.parsers.records import STARTUP_KEYS, StartupFact

    from helpers import parse_text

    seen: set[str] = set()
    for fmt in REGISTRY.values():
        own = adapter.fact_keys if (adapter := engines.get(fmt.engine)) is not None else ()
        for sample in fmt.samples:
            for r in parse_text(sample):
                if isinstance(r, StartupFact):
                    assert r.key in (*STARTUP_KEYS, *own), (fmt.name, r.key)
                    seen.add(r.key)
    assert {"api_server_count", "max_concurrency"} <= seen


def test_one_process_judges_each_run_in_its_own_engines_words() -> None:
    """A vLLM run, then an SGLang run, then the vLLM run again in one process (the TUI, MCP and the index
    do this): each run's texts name its own engine's knobs, nothing cached from the run before."""
    from conftest import ROOT
    from loading import report_of

    def fixes(run: str) -> str:
        return " ".join(f.fix or "" for f in report_of(ROOT / "samples" / "runs" / run).findings)

    before = fixes("kv-exhaustion")
    sglang = fixes("sglang-kv-capacity")
    assert "mem-fraction-static" in sglang and "gpu-memory-utilization" not in sglang
    assert fixes("kv-exhaustion") == before and "mem-fraction-static" not in before
