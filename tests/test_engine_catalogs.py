"""Engine catalogs merged with core's: fault causes by rank, then core before the engines, then file order;
start-up lines under core's stages; Prometheus tables with Dynamo's series last (parsers.faults, parsers.stages,
parsers.prom_vocab)."""

from __future__ import annotations

from pathlib import Path

import pytest

from diag.parsers import engines, faults, prom_vocab, stages

CAUSE = """
[[cause]]
name = "{name}"
why = "a test engine's own death wording, no extracted site"
class = "death"
rank = {rank}
text = "a test engine's process died"
death = true
triggers = ["{name} died"]
pattern = '{name} died'
samples = ["{name} died", "[2026-01-10 09:00:00] {name} died"]
"""


def _with_engine(monkeypatch: pytest.MonkeyPatch, kind: str, path: Path) -> None:
    """The registry's catalogs of ``kind``, plus ``path`` as a second engine's (SGLang's adapter stands in)."""
    real = engines.catalog_files(kind)
    sglang = engines.get("sglang")
    assert sglang is not None
    monkeypatch.setattr(engines, "catalog_files", lambda k: (*real, (sglang, path)) if k == kind else real)


def test_the_taxonomy_is_ranked_and_names_its_engine() -> None:
    ranks = [c.rank for c in faults.TAXONOMY]
    assert ranks == sorted(ranks)
    assert faults.CAUSES["engine_dead"].engine == "vllm" and faults.CAUSES["oom"].engine is None
    assert faults.CAUSES["transport"].label == "transport (NIXL/UCX) error(s)"


def test_a_second_engine_s_causes_merge_by_rank(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    catalog = tmp_path / "faults.toml"
    catalog.write_text(CAUSE.format(name="early", rank=10) + CAUSE.format(name="late", rank=60), encoding="utf-8")
    _with_engine(monkeypatch, "faults", catalog)
    names = [c.name for c in faults._load_taxonomy()]
    assert names.index("host_oom") < names.index("early") < names.index("no_kv_memory")   # rank 10, after core's
    assert names.index("engine_dead") < names.index("late") < names.index("mooncake_transfer")   # 60, after vLLM's
    assert faults._load_taxonomy()[names.index("late")].engine == "sglang"


def test_a_cause_declared_twice_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    catalog = tmp_path / "faults.toml"
    catalog.write_text(CAUSE.format(name="oom", rank=10), encoding="utf-8")
    _with_engine(monkeypatch, "faults", catalog)
    with pytest.raises(ValueError, match="declared twice: oom"):
        faults._load_taxonomy()


def test_engine_stage_lines_follow_core_s_within_a_stage(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    names = [name for _, name, _, _ in stages._LINES]
    assert names.index("stage-registration-1") < names.index("vllm-stage-registration-0") < names.index("stage-ready-0")
    catalog = tmp_path / "startup.toml"
    catalog.write_text('[[stage]]\nname = "no_such_stage"\n', encoding="utf-8")
    _with_engine(monkeypatch, "startup", catalog)
    with pytest.raises(ValueError, match="no_such_stage"):
        stages._load()


def test_prometheus_tables_merge_with_dynamo_s_series_last() -> None:
    merged = prom_vocab._fields([{"running": ("gauge", (("a:running", None),))},
                                 {"running": ("gauge", (("b:running", None),))}, prom_vocab.DYNAMO_FIELDS])
    assert [m for m, _ in merged["running"][1]] == ["a:running", "b:running", "dynamo_frontend_inflight_requests"]
    with pytest.raises(ValueError, match="is a gauge and a counter"):
        prom_vocab._fields([{"running": ("gauge", ())}, {"running": ("counter", ())}])
    assert prom_vocab.any_series(("a:up",)) == "a:up"
    assert prom_vocab.any_series(("a:up", "b:up")) == '{__name__=~"a:up|b:up"}'
