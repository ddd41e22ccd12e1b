"""Issue 12: one test per class of false or missing finding, on real recipes from tests/data/recipes."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from diag.check_cmd import check_file
from diag.cli import app

DATA = Path(__file__).resolve().parent / "data" / "recipes"
ROOT = Path(__file__).resolve().parents[1]
R = "srt-slurm-recipes__recipes__"
MULTI = ('{"kv_connector":"MultiConnector","kv_role":"kv_both","kv_connector_extra_config":{"connectors":['
         '{"kv_connector":"NixlConnector","kv_role":"kv_both","kv_load_failure_policy":"fail"},'
         '{"kv_connector":"MooncakeStoreConnector","kv_role":"kv_both"}]}}')  # srt-slurm docs/mooncake-kv-store.md


def _codes(name: str, code: str, path: Path | None = None) -> list:
    return [f for f in check_file(path or DATA / name) if f.code == f"DIAG-{code}"]


def test_c014_spec_aliases_are_vllm_flags() -> None:
    assert not _codes(f"{R}single-node__NVIDIA-Nemotron-3-Ultra__H200__vllm__8k1k-mtp.yaml", "C014")


def test_c014_removed_flag_on_a_runtime_older_than_the_table_is_fine() -> None:
    assert not _codes("srt-slurm__recipes__vllm__qwen3-32b__disagg-kv-router.yaml", "C014")


def test_c013_tp_only_sweep_reports_one_grouped_error_for_the_oversized_points() -> None:
    (f,) = _codes(f"{R}single-node__Kimi-K2.5__B200__vllm__1k1k.yaml", "C013")
    assert f.severity == "error" and sorted(f.evidence["per_job"]) == [
        "sweep[tp2_pp8]", "sweep[tp4_pp4]", "sweep[tp4_pp8]", "sweep[tp8_pp2]", "sweep[tp8_pp4]", "sweep[tp8_pp8]"]


def test_c015_multiconnector_wrapping_nixl_talks_to_nixl(tmp_path: Path) -> None:
    name = f"{R}multi-node__MiniMax-M2.5__GB200__1k1k__disagg-gb200-1p1d-tp4.yaml"
    text = (DATA / name).read_text().replace(
        "kv-transfer-config: '{\"kv_connector\": \"NixlConnector\", \"kv_role\": \"kv_both\"}'",
        f"kv-transfer-config: '{MULTI}'", 1)
    (tmp_path / name).write_text(text)
    assert not [f for f in _codes(name, "C015", tmp_path / name) if f.severity == "error"]


def test_c015_kv_both_is_not_deprecated_before_v0_23() -> None:
    assert not _codes(f"{R}multi-node__Kimi-K2.5__GB200__vllm__8k1k-sa__disagg-gb200-1p4d-dep4-tep4.yaml", "C015")


def test_c002_needs_a_kv_consumer_and_warns_on_an_unidentified_runtime() -> None:
    found = _codes(f"{R}multi-node__MiniMax-M2.5__GB200__1k1k__disagg-gb200-1p1d-tp4.yaml", "C002")
    assert [(f.endpoint, f.severity) for f in found] == [("decode", "warning")]  # vllm-runtime:1.2.0, no flag
    assert "vLLM >= v0.19.0" in found[0].message


def test_c005_reads_the_capture_size_inside_compilation_config() -> None:
    assert not _codes(f"{R}single-node__DeepSeek-R1__B300__vllm__1k1k-mtp.yaml", "C005")


def test_c008_covers_sglang_stream_interval() -> None:
    (f,) = _codes(f"{R}single-node__DeepSeek-R1__B300__sglang__1k1k-mtp.yaml", "C008")
    assert "stream-interval 30" in f.message


def test_c009_no_dynamo_advice_without_dynamo() -> None:
    assert not _codes(f"{R}single-node__Qwen3.5__B300__sglang__agg-tp2-mtp-1k1k.yaml", "C009")


def test_c017_wrong_types_are_located_errors_and_stop_the_other_checks(tmp_path: Path) -> None:
    name = "srt-slurm__recipes__qwen3.5__fp8__agg__stp_prefix_off__tp4.yaml"
    src = DATA / "srt-slurm__recipes__vllm__nemotron-super-120b__b200-fp4__1k1k__agg-tp1.yaml"
    text = src.read_text().replace("tensor-parallel-size: 1", 'tensor-parallel-size: "eight"', 1)
    (tmp_path / name).write_text(text)
    found = check_file(tmp_path / name)
    assert found and all(f.code == "DIAG-C017" for f in found)
    assert found[0].location.line == text[:text.index('"eight"')].count("\n") + 1


def test_zero_recipes_is_an_error_unless_allowed(tmp_path: Path) -> None:
    runner = CliRunner()
    res = runner.invoke(app, ["check", str(tmp_path)])
    assert res.exit_code == 2 and f"diag check: no recipes diag understands in {tmp_path} (pass --allow-empty" in res.output
    assert runner.invoke(app, ["check", "--allow-empty", str(tmp_path)]).exit_code == 0


def test_parse_errors_are_findings_in_json(tmp_path: Path) -> None:
    (tmp_path / "r.yaml").write_bytes(b"name: x\nmodel: {path: a}\x00\n")
    res = CliRunner().invoke(app, ["check", "--format", "json", str(tmp_path / "r.yaml")])
    assert res.exit_code == 2
    doc = json.loads(res.stdout[res.stdout.index("{"):])
    assert doc["summary"]["files"] == 1 and doc["findings"][0]["code"] == "DIAG-C017"


def test_every_type_error_of_a_recipe_is_reported_at_once(tmp_path: Path) -> None:
    """Not only the first (gpus_per_node), then isl after that is fixed: both, each at its line."""
    text = (ROOT / "samples" / "runs" / "healthy" / "config.yaml").read_text()
    text = text.replace("gpus_per_node: 4", 'gpus_per_node: "four"', 1).replace("  isl: 8192", '  isl: "long"', 1)
    (tmp_path / "r.yaml").write_text(text)
    res = CliRunner().invoke(app, ["check", str(tmp_path / "r.yaml"), "--format", "json"])
    assert res.exit_code == 2
    got = [(f["message"], f["location"]["line"]) for f in json.loads(res.stdout)["findings"]]
    assert got == [("parse error: `resources.gpus_per_node` must be an integer >= 1, not 'four'",
                    text[:text.index('"four"')].count("\n") + 1),
                   ("parse error: `benchmark.isl` must be an integer >= 1, not 'long'",
                    text[:text.index('"long"')].count("\n") + 1)]


def test_a_recipe_over_the_size_limit_is_not_parsed(tmp_path: Path, monkeypatch) -> None:
    import diag.parsers.recipe

    def never(*_a: object, **_k: object) -> None:
        raise AssertionError("parsed a recipe over the size limit")

    monkeypatch.setattr(diag.parsers.recipe, "load_yaml_file", never)
    big = tmp_path / "big.yaml"
    big.write_text("model: {path: x}\n" + "# pad\n" * 400)
    (tmp_path / "diag.toml").write_text("max-recipe-bytes = 1000\n")
    res = CliRunner().invoke(app, ["check", str(big), "--config", str(tmp_path / "diag.toml")])
    assert res.exit_code == 2
    assert res.stderr == f"{big}: 2,417 bytes, over the recipe size limit of 1,000 (max-recipe-bytes in diag.toml); not read\n"


def test_c017_nested_unknown_keys_are_flagged_at_their_line_with_the_nearest_field(tmp_path: Path) -> None:
    """srtctl's marshmallow schema rejects an unknown key at every level, not only the top one."""
    text = (ROOT / "samples" / "runs" / "healthy" / "config.yaml").read_text()
    text = text.replace("  isl: 8192\n", "  isl: 8192\n  bogus_key: 1\n  isll: 3\n", 1)
    text = text.replace("  gpus_per_node: 4\n", "  gpus_per_node: 4\n  bogus: 1\n", 1)
    (tmp_path / "r.yaml").write_text(text)
    found = [f for f in check_file(tmp_path / "r.yaml") if f.code == "DIAG-C017"]
    messages = sorted(f.message for f in found)
    assert messages == [
        "unknown key `benchmark.bogus_key` (not an srtctl recipe field; typo?)",
        "unknown key `benchmark.isll` (not an srtctl recipe field; did you mean `benchmark.isl`?)",
        "unknown key `resources.bogus` (not an srtctl recipe field; typo?)",
    ]
    lines = text.splitlines()
    assert {f.severity for f in found} == {"warning"}
    assert sorted(lines[f.location.line - 1].strip() for f in found) == ["bogus: 1", "bogus_key: 1", "isll: 3"]


def test_c017_backend_keys_are_those_of_the_backend_type(tmp_path: Path) -> None:
    text = (ROOT / "samples" / "runs" / "healthy" / "config.yaml").read_text()
    assert "  type: vllm\n" in text and "vllm_config:" in text
    (tmp_path / "r.yaml").write_text(text.replace("  type: vllm\n", "  type: vllm\n  conector: nixl\n", 1))
    (f,) = [f for f in check_file(tmp_path / "r.yaml") if f.code == "DIAG-C017"]
    assert f.message.endswith("did you mean `backend.connector`?)")
    (tmp_path / "r.yaml").write_text(text.replace("  type: vllm\n", "  type: sglang\n", 1))
    assert "unknown key `backend.vllm_config`" in " ".join(
        f.message for f in check_file(tmp_path / "r.yaml") if f.code == "DIAG-C017")


def test_each_engine_types_its_own_numeric_flags_and_owns_its_backend_fields() -> None:
    """A config block's integer flags are core's and its engine adapter's (integer_flags); srtctl's backend
    fields of an engine come from its adapter's data, merged with core's."""
    from diag.parsers.recipe_schema import srtctl_fields, validate
    from diag.parsers.recipe_yaml import load_yaml

    def typed(engine: str, flags: str) -> list[str]:
        doc = load_yaml(f"model: {{path: /m}}\nbackend:\n  type: {engine}\n  {engine}_config:\n    decode: {{{flags}}}\n")
        return sorted(str(v.path[-1]) for v in validate(doc) if v.severity == "error")

    assert typed("vllm", "max-num-seqs: many, stream-interval: x, dp-size: y") == ["max-num-seqs", "stream-interval"]
    assert typed("sglang", "dp-size: eight, max-num-seqs: many, tp-size: '4'") == ["dp-size"]
    backends = srtctl_fields()["backend"]
    assert {"vllm", "sglang", "trtllm", "mocker"} <= set(backends) and "vllm_config" in backends["vllm"]
    assert srtctl_fields()["backend_sections"]["sglang.sglang_config"] == ["aggregated", "decode", "prefill"]


def test_srtctl_field_lists_name_their_source_and_every_real_recipe_fits_them(real_recipes: Path) -> None:
    """The field lists come from srt-slurm's schema (tools/srtctl_fields.py); no real recipe trips them."""
    from diag.parsers.recipe import load_recipes
    from diag.parsers.recipe_schema import srtctl_fields, validate

    source = srtctl_fields()["source"]
    assert source["repo"] == "NVIDIA/srt-slurm" and len(source["commit"]) == 40
    assert "src/srtctl/core/schema.py" in source["paths"]
    assert {"isl", "osl", "concurrencies", "sweep"} <= set(srtctl_fields()["sections"]["benchmark"])
    files = sorted(real_recipes.glob("*.yaml")) + sorted(DATA.glob("*.yaml"))
    assert len(files) >= 39 + 70
    unknown = [(p.name, v.message) for p in files for job in load_recipes(p) for v in validate(job.data)]
    assert not unknown
