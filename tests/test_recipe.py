"""The recipe model: grammars, safe YAML with marks, override/zip/sweep jobs, schema 2, builds, flags."""

from __future__ import annotations

from pathlib import Path

import pytest

from diag.engines.vllm.flags import classify
from diag.engines.vllm.knowledge import build_facts, fixes, nightly_fixes
from diag.engines.vllm.recipe import parse_build
from diag.parsers.flags import (
    FlagSyntaxError,
    normalize_flag,
    parse_command,
    parse_concurrencies,
    parse_flag_string,
    render_template,
    template_fields,
)
from diag.parsers.recipe import NotARecipe, RecipeError, build_recipe, load_recipes
from diag.parsers.recipe_variants import expand_jobs
from diag.parsers.recipe_yaml import MAX_ALIASES, deep_merge, load_yaml, mark_of
from diag.rules.knowledge import family_for, parse_version

QWEN = "srt-slurm-recipes__recipes__multi-node__Qwen3.5__GB200__8k1k__vllm__disagg__4xdep2-1xdep8.yaml"


def _write(tmp_path: Path, text: str, name: str = "r.yaml") -> Path:
    p = tmp_path / name
    p.write_text(text, encoding="utf-8")
    return p


# --- flag grammar ---------------------------------------------------------------------------------------

def test_flag_string_normalises_spellings_negations_and_values() -> None:
    flags = parse_flag_string('--a 1 --b --no-c "x y" --max_num_seqs=8 --kv-transfer-config '
                              '\'{"kv_connector": "NixlConnector"}\' --ratio 0.5 --neg -1 --a 2')
    assert flags == {"a": [1, 2], "b": True, "c": False, "max_num_seqs": 8,
                     "kv_transfer_config": '{"kv_connector": "NixlConnector"}', "ratio": 0.5, "neg": -1}


def test_command_line_keeps_positionals_and_aliases() -> None:
    cmd = parse_command("python3 -m dynamo.vllm --model /m -tp 4 \\\n  --enforce-eager -O3",
                        aliases={"tp": "tensor-parallel-size", "O": "compilation-config"})
    assert cmd.positionals == ["python3"]
    assert cmd.flags == {"m": "dynamo.vllm", "model": "/m", "tensor_parallel_size": 4, "enforce_eager": True,
                         "compilation_config": 3}
    assert cmd.spelled["enforce_eager"] == "--enforce-eager"


def test_command_lines_as_logged_keep_unquoted_json_whole() -> None:
    line = ('python3 -m dynamo.vllm --kv-transfer-config {"kv_connector": "NixlConnector", "kv_role": "kv_both", '
            '"kv_connector_extra_config": {"a": [1, 2]}} --compilation-config {"mode":0} --served-model-name {node}')
    flags = parse_flag_string(line)
    assert flags["kv_transfer_config"].endswith('{"a": [1, 2]}}') and flags["compilation_config"] == '{"mode":0}'
    assert flags["served_model_name"] == "{node}"
    assert parse_flag_string('--a "truncated --b 2', strict=False) == {"a": '"truncated', "b": 2}


def test_flag_string_errors_carry_a_column() -> None:
    with pytest.raises(FlagSyntaxError) as err:
        parse_flag_string('--a "unterminated')
    assert err.value.col is not None


@pytest.mark.parametrize(("name", "want"), [
    ("--max-num-seqs", ("max_num_seqs", False)), ("max_num_seqs", ("max_num_seqs", False)),
    ("no-enable-prefix-caching", ("enable_prefix_caching", True)), ("--No-Async-Scheduling", ("async_scheduling", True)),
    ("compilation-config.mode", ("compilation_config.mode", False)),
])
def test_normalize_flag(name: str, want: tuple[str, bool]) -> None:
    assert normalize_flag(name) == want


def test_concurrency_syntax() -> None:
    assert parse_concurrencies("64x128x256") == [64, 128, 256]
    assert parse_concurrencies("4096") == [4096]
    assert parse_concurrencies([1, "2x4", 8.0]) == [1, 2, 4, 8]
    assert parse_concurrencies(None) == []
    for bad in ("{conc}", "64xx128", True, {"a": 1}):
        with pytest.raises(FlagSyntaxError):
            parse_concurrencies(bad)


def test_templates_leave_json_and_unknown_fields_alone() -> None:
    assert template_fields('/logs/{node}/{node_id} {"kv_role": "x"}') == ["node", "node_id"]
    assert render_template("{tp}", {"tp": 8}) == 8
    assert render_template("/x/{node}-{tp}", {"tp": 8}) == "/x/{node}-8"
    assert render_template('{"a": 1}', {"a": 2}) == '{"a": 1}'


# --- YAML -----------------------------------------------------------------------------------------------

def test_every_key_has_a_mark_and_aliases_keep_theirs() -> None:
    doc = load_yaml("a: &x\n  b: 1\n  c: [1, 2]\nd: *x\ne:\n  <<: *x\n  f: 3\n")
    assert doc.marks == {"a": (1, 1), "d": (4, 1), "e": (5, 1)}
    assert mark_of(doc, ("a", "c")) == (3, 3)
    assert mark_of(doc, ("e", "f")) == (7, 3)
    assert mark_of(doc, ("a", "missing")) == (1, 1)  # falls back to the parent key
    assert doc["e"] == {"b": 1, "c": [1, 2], "f": 3}


@pytest.mark.parametrize(("text", "line"), [
    ("a: [1\n", 2), ("a: b: c\n", 1), ("a: !!python/object/apply:os.system [ls]\n", 1), ('a: "x\n', 2),
])
def test_bad_yaml_raises_with_position(text: str, line: int) -> None:
    with pytest.raises(RecipeError) as err:
        load_yaml(text)
    assert err.value.line == line and err.value.col


def test_alias_bombs_are_refused() -> None:
    lines = ["a: &a [x, x, x, x, x, x, x, x, x]"]
    for i in range(8):
        prev, cur = chr(97 + i), chr(98 + i)
        lines.append(f"{cur}: &{cur} [" + ", ".join([f"*{prev}"] * 9) + "]")
    with pytest.raises(RecipeError, match="alias bomb"):
        load_yaml("\n".join(lines) + "\n")
    many = "a: &a 1\nb: [" + ", ".join(["*a"] * (MAX_ALIASES + 1)) + "]\n"
    with pytest.raises(RecipeError, match="aliases"):
        load_yaml(many)


def test_deep_merge_semantics_and_marks() -> None:
    base = load_yaml("x:\n  s: 1\n  keep: k\n  gone: g\n  l: [1, 2]\n")
    over = load_yaml("x:\n  s: 2\n  gone: null\n  l: [3]\n  new: n\n")
    merged = deep_merge(base, over)
    assert merged == {"x": {"s": 2, "keep": "k", "l": [3], "new": "n"}}
    assert merged["x"].marks["keep"] == (3, 3) and merged["x"].marks["s"] == (2, 3)
    assert merged["x"].marks["new"] == (5, 3)
    assert base["x"]["s"] == 1  # inputs untouched


# --- layouts and jobs -------------------------------------------------------------------------------------

def test_v1_recipe_model(real_recipes: Path) -> None:
    (r,) = load_recipes(real_recipes / QWEN)
    assert (r.layout, r.backend, r.disaggregated, r.gpu_type, r.gpus_per_node) == ("v1", "vllm", True, "gb200", 4)
    assert r.build.kind == "nightly" and r.build.commit == "d223c900d85224c02f2162ee2c757a769e99f519"
    p, d = r.roles["prefill"], r.roles["decode"]
    assert (p.nodes, p.workers, p.gpus, d.nodes, d.workers, d.gpus) == (2, 4, 2, 2, 1, 8)
    assert p.value("enable-prefix-caching") is False and d.value("data_parallel_size") == 8
    assert p.flag("no-enable-prefix-caching").key == "no-enable-prefix-caching"
    assert d.env_value("VLLM_SSM_CONV_STATE_LAYOUT") == "DS"
    assert p.kv is not None and (p.kv.connector, p.kv.role, p.kv.failure_policy) == ("NixlConnector", "kv_both", "fail")
    assert (r.benchmark.type, r.benchmark.isl, r.benchmark.osl) == ("sa-bench", 8192, 1024)
    assert r.benchmark.concurrencies == [64, 128, 256, 512, 1024, 2048, 3072]
    text = (real_recipes / QWEN).read_text().splitlines()
    line, _col = d.flag("mamba-ssm-cache-dtype").mark
    assert "mamba-ssm-cache-dtype" in text[line - 1]
    assert family_for(*r.model_names).name == "qwen3.5"


def test_schema2_normalises_to_the_same_roles(real_recipes: Path) -> None:
    (r,) = load_recipes(real_recipes / "SemiAnalysisAI-srt-slurm__examples__vllm__dynamo-disagg.yaml")
    assert (r.layout, r.backend, r.disaggregated, r.connector) == ("schema2", "vllm", True, "nixl")
    d = r.roles["decode"]
    assert d.colocated and d.gpus == 1 and d.workers == 1
    assert d.value("gpu-memory-utilization") == 0.5 and d.env_value("PYTHONUNBUFFERED") == "1"
    assert d.kv is not None and d.kv.source == "connector" and d.kv.connector == "NixlConnector"
    assert ".".join(d.flags_path) == "roles.decode.args"
    (s,) = load_recipes(real_recipes / "SemiAnalysisAI-srt-slurm__examples__sglang__dynamo-disagg.yaml")
    assert s.backend == "sglang" and s.roles["prefill"].kv is None


def test_schema2_extra_args_and_shared_environment(tmp_path: Path) -> None:
    p = _write(tmp_path, """schema: 2
name: x
model: {path: m, container: vllm}
environment: {DYN_LOG: error}
engine: {type: vllm, connector: null}
roles:
  agg:
    nodes: 1
    workers: 1
    gpus: 4
    env: {A: "1"}
    args: {tensor-parallel-size: 4}
    extra_args: "--no-enable-prefix-caching --max-num-seqs 64"
""")
    (r,) = load_recipes(p)
    agg = r.roles["agg"]
    assert agg.value("enable-prefix-caching") is False and agg.value("max-num-seqs") == 64
    assert agg.flag("max-num-seqs").source == "extra_args" and agg.flag("max-num-seqs").mark == (13, 5)
    assert agg.env_value("DYN_LOG") == "error" and agg.env["DYN_LOG"].shared and agg.env_value("A") == "1"


def test_override_file_expands_to_one_job_per_variant(real_recipes: Path) -> None:
    jobs = load_recipes(real_recipes / "srt-slurm__examples__example-override.yaml")
    assert [j.variant for j in jobs] == ["override_tp64", "override_small", "zip_override_tp_sweep[0]",
                                          "zip_override_tp_sweep[1]", "zip_override_tp_sweep[2]"]
    assert [j.job for j in jobs] == ["disagg-fp8-benchmark_tp64", "disagg-fp8-benchmark_small",
                                      "disagg-fp8-benchmark-tp16", "disagg-fp8-benchmark-tp32",
                                      "disagg-fp8-benchmark-tp64"]
    tp64, small, z0, z1, _z2 = jobs
    assert tp64.roles["prefill"].value("tp-size") == 64 and tp64.roles["prefill"].value("trust-remote-code") is True
    assert tp64.roles["prefill"].flag("tp-size").mark == (66, 9)  # the override's line, not the base's
    assert small.roles["decode"].workers == 4 and small.benchmark.concurrencies == [4096]
    assert z0.roles["prefill"].nodes == 1 and z1.roles["prefill"].nodes == 2
    assert z0.roles["decode"].value("mem-fraction-static") == 0.85  # length-1 list broadcasts
    assert z1.benchmark.concurrencies == [4096, 8192, 10240]      # list of lists: literal per variant


def test_sweep_file_expands_the_grid_and_substitutes(real_recipes: Path) -> None:
    jobs = load_recipes(real_recipes / "srt-slurm__examples__example-sweep.yaml")
    assert [j.job for j in jobs] == [
        "example-sweep_chunked_prefill_size4096_max_total_tokens8192",
        "example-sweep_chunked_prefill_size4096_max_total_tokens16384",
        "example-sweep_chunked_prefill_size8192_max_total_tokens8192",
        "example-sweep_chunked_prefill_size8192_max_total_tokens16384"]
    assert jobs[1].roles["prefill"].value("max-total-tokens") == 16384
    (glm,) = load_recipes(real_recipes / "srt-slurm-recipes__recipes__multi-node__GLM-5__GB300__sglang__"
                                         "glm5-nvfp4-8k1k-maxtpt0-c2048.yaml")
    assert glm.benchmark.concurrencies == [2048]


def test_sweep_zip_mode_and_mismatched_zip(tmp_path: Path) -> None:
    body = "name: s\nmodel: {path: m}\nresources: {gpu_type: h100}\nbenchmark: {isl: '{i}', concurrencies: '{c}'}\n"
    jobs = expand_jobs(load_yaml(body + "sweep: {mode: zip, parameters: {i: [1, 2], c: [8, 16]}}\n"))
    assert [j.name for j in jobs] == ["s_i1_c8", "s_i2_c16"] and jobs[1].data["benchmark"]["isl"] == 2
    with pytest.raises(RecipeError, match="equal-length"):
        expand_jobs(load_yaml(body + "sweep: {mode: zip, parameters: {i: [1, 2], c: [8]}}\n"))
    bad = "base: {name: b, model: {path: m}, resources: {}}\nzip_override_g:\n  resources: {a: [1, 2], b: [1, 2, 3]}\n"
    with pytest.raises(RecipeError, match="different lengths") as err:
        expand_jobs(load_yaml(bad))
    assert err.value.line == 2


def test_not_a_recipe_and_structural_errors(tmp_path: Path) -> None:
    with pytest.raises(NotARecipe):
        load_recipes(_write(tmp_path, "jobs:\n  - a\n"))
    with pytest.raises(RecipeError) as err:
        load_recipes(_write(tmp_path, "name: x\nmodel: {path: m}\nresources:\n  prefill_nodes: two\n"))
    assert (err.value.line, err.value.col) == (4, 3)


@pytest.mark.parametrize(("image", "declared", "kind", "version", "commit"), [
    ("vllm/vllm-openai:v0.26.1", None, "release", "0.26.1", None),
    ("vllm/vllm-openai:0.26.1", None, "release", "0.26.1", None),
    ("vllm/vllm-openai:v0.20.0-ubuntu2404@sha256:46da02", None, "release", "0.20.0", None),
    ("vllm/vllm-openai:v0.26.0rc2", None, "release", "0.26.0", None),
    ("vllm/vllm-openai:nightly-d223c900d85224c02f2162ee2c757a769e99f519", None, "nightly", None,
     "d223c900d85224c02f2162ee2c757a769e99f519"),
    ("vllm/vllm-openai:minimax-m3-perf-arm64-13.0.1-7a67223", None, "unknown", None, None),
    ("nvcr.io/nvidia/ai-dynamo/vllm-runtime:1.1.1", "0.19.0", "release", "0.19.0", None),
    ("lmsysorg/sglang:v0.5.7-cu130-runtime", None, "unknown", None, None),
    ("vllm", None, "unknown", None, None),
    (None, None, "unknown", None, None),
])
def test_container_to_vllm_build(image: str | None, declared: str | None, kind: str, version: str | None,
                                 commit: str | None) -> None:
    b = parse_build(image, declared)
    assert (b.kind, b.version, b.commit) == (kind, version, commit)


def test_version_table_knows_the_pd_fixes() -> None:
    assert fixes()["45357"].first_release == (0, 24, 0)
    assert fixes()["48481"].first_release == (0, 26, 0)
    assert nightly_fixes("d223c900d85224c02f2162ee2c757a769e99f519") == {"45357", "48481"}
    assert nightly_fixes("d223c90") == {"45357", "48481"} and nightly_fixes("abcdef0") is None
    v024 = build_facts("release", parse_version("v0.24.0"), None, None, "x")
    assert v024.has("45357") is True and v024.has("48481") is False
    assert build_facts("unknown", None, None, None, "x").has("45357") is None
    runtime = build_facts("unknown", None, None, "1.1.1", "x")
    assert runtime.version == (0, 19, 0) and runtime.has("45357") is False


@pytest.mark.parametrize(("name", "family", "hybrid"), [
    ("hf:nvidia/Qwen3.5-397B-A17B-NVFP4", "qwen3.5", True), ("Qwen/Qwen3-Next-80B-A3B-Instruct", "qwen3-next", True),
    ("nvidia/NVIDIA-Nemotron-3-Ultra-550B-A55B-NVFP4", "nemotron-h", True),
    ("ibm-granite/granite-4.0-h-small", "granite-4-h", True), ("qwen3-32b-fp8", "qwen3", False),
    ("hf:deepseek-ai/DeepSeek-V4-Pro", "deepseek-v4", False), ("nvidia/Kimi-K2.5-NVFP4", "kimi-k2.5", False),
])
def test_model_families(name: str, family: str, hybrid: bool) -> None:
    fam = family_for(name)
    assert fam is not None and fam.name == family and fam.hybrid is hybrid


@pytest.mark.parametrize(("flag", "status", "suggestion"), [
    ("async-scheduling", "known", None), ("no-async-scheduling", "known", None),
    ("async_scheduling", "known", None), ("async-scheduleing", "unknown", "async-scheduling"),
    ("cuda-graph-sizes", "removed", "max-cudagraph-capture-size"), ("disaggregation-mode", "known", None),
    ("compilation-config.mode", "known", None), ("tp", "known", None),
])
def test_vllm_flag_table(flag: str, status: str, suggestion: str | None) -> None:
    st = classify(flag)
    assert st.status == status and st.suggestion == suggestion


def test_every_flag_in_the_real_vllm_recipes_is_known(real_recipes: Path) -> None:
    seen = set()
    for path in sorted(real_recipes.glob("*.yaml")):
        for r in load_recipes(path):
            if r.backend == "vllm":
                seen |= {f.key for role in r.roles.values() for f in role.flags.values()}
    unknown = {k for k in seen if classify(k).status == "unknown"}
    assert not unknown and len(seen) > 40


def test_build_recipe_from_a_document() -> None:
    doc = load_yaml("name: a\nmodel: {path: x, container: 'vllm/vllm-openai:v0.25.0'}\n"
                    "resources: {gpu_type: B200, gpus_per_node: 8, agg_nodes: 1, agg_workers: 2}\n"
                    "backend: {type: vllm, vllm_config: {aggregated: {tensor-parallel-size: 4}}}\n")
    r = build_recipe(doc, "a.yaml")
    assert r.gpu_type == "b200" and not r.disaggregated and r.roles["agg"].gpus == 4
    assert r.connector == "nixl" and r.roles["agg"].kv is None  # the connector only matters for P/D
