"""Neutral knobs and an engine's knowledge through its adapter: catalog texts name knobs as placeholders that
each engine renders in its own spelling (vLLM's is today's text), the run's engine comes from its recipe, and
what core asked of rules/knowledge.py about vLLM builds it now asks the vLLM adapter."""

from __future__ import annotations

import re
from pathlib import Path

from diag.parsers import engines
from diag.parsers.engine import KNOBS, render_knobs
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


def test_every_catalog_text_renders_without_a_placeholder_left() -> None:
    placeholder = re.compile(r"\{knob")
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
    assert "45357" in knowledge.fixes()          # forwarded for the modules that still import it from rules
    assert engine_index("EngineCore_DP3") == "3" and engine_index("APIServer") is None
