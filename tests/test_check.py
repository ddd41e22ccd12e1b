"""`diag check`: the 39 real recipes (every error/warning expected), one real mutation per code, the
catalog's examples, and the command line (formats, exit codes, parse errors)."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import typer
from schemas import validate
from typer.testing import CliRunner

from diag.check_cmd import check, check_file
from diag.parsers.recipe import build_recipe
from diag.parsers.recipe_yaml import YMap, load_yaml
from diag.rules.catalog import bases, by_scope, catalog
from diag.rules.recipe_checks import run_checks

Q = "srt-slurm-recipes__recipes__multi-node__Qwen3.5__GB200__8k1k__vllm__disagg__"
QWEN = f"{Q}4xdep2-1xdep8.yaml"
QWEN_CC5120 = f"{Q}4xdep2-1xdep8-cc5120.yaml"
QWEN_FAMILY = [f"{Q}{n}.yaml" for n in (
    "4xdep2-1xdep8", "4xdep2-1xdep8-acc", "4xdep2-1xdep8-cc4096", "4xdep2-1xdep8-cc5120", "5xdep2-1xdep8",
    "6xdep2-1xdep8", "7xdep2-1xdep8", "8xdep2-1xdep8", "8xdep2-1xdep8-cc5120")]
MEGAMOE = "srt-slurm-recipes__recipes__multi-node__DeepSeek-V4-Pro__GB200__vllm__8k1k-sa__disagg-gb200-max-tpt-megamoe.yaml"
NEMOTRON = "srt-slurm-recipes__recipes__single-node__NVIDIA-Nemotron-3-Ultra__B300__vllm__8k1k.yaml"
OVERRIDE = "srt-slurm__examples__example-override.yaml"

# Every finding on the real recipes, as {file: {"CODE:severity": count}}. Errors and warnings are
# explained next to their file; the infos are advice (log env, stream-interval, kv_both, ...). The exact
# findings (messages and positions) are pinned in tests/data/recipes/expected.json (test_recipe_set.py).
PD_DP = {"C006:warning": 2}  # DP>1 prefill and decode without api-server-count: 1 (no recipe sets it)
ITL = {"C008:info": 1}       # stream-interval > 1 on decode/agg with a benchmark that reports ITL (any engine)
EXPECTED: dict[str, dict[str, int]] = {
    # the nightly is dated after the kv_both deprecation (v0.23.0): the kv_both infos stay
    **{f: {**PD_DP, "C015:info": 2, **ITL} for f in QWEN_FAMILY},
    f"{Q}4xdep2-1xdep8-acc.yaml": {**PD_DP, "C015:info": 2},  # gsm8k: no ITL/TPOT, so no C008
    # vLLM v0.20.0, async scheduling on by default on the kv_both decode, #45357 missing (non-hybrid: warning);
    # v0.20.0 predates the kv_both deprecation, so no C015 info
    MEGAMOE: {"C002:warning": 1, **PD_DP, **ITL, "C009:info": 2},
    "srt-slurm__recipes__vllm__deepseek-v4-pro__GB200__8k1k__disagg-gb200-3p1d-dep8-dep16-c4096-offload.yaml":
        {"C002:warning": 1, **PD_DP, **ITL, "C009:info": 2},
    # vLLM v0.21.0: async scheduling set on decode, lacks #45357; the kv_both prefill never loads KV (no C002)
    "srt-slurm-recipes__recipes__multi-node__Kimi-K2.5__GB200__vllm__8k1k-sa__disagg-gb200-3p1d-dep4-dep16.yaml":
        {"C002:warning": 1, **PD_DP, **ITL, "C009:info": 2, "C010:info": 2},
    # vllm-runtime:1.2.0 ships at least v0.19 (async on by default) but cannot be dated past #45357: warning
    "srt-slurm-recipes__recipes__multi-node__MiniMax-M2.5__GB200__1k1k__disagg-gb200-2p1d-dep8.yaml":
        {"C002:warning": 1, **PD_DP, **ITL, "C009:info": 2},
    # an unidentified minimax-m3 image: async scheduling assumed on, fix unverifiable: warning
    "srt-slurm-recipes__recipes__multi-node__MiniMax-M3__GB300__vllm__8k1k__2p1d-dep2-dep8-8k1k.yaml":
        {"C002:warning": 1, **PD_DP, **ITL, "C009:info": 2},
    # aggregated DP8 endpoint: same stats-logging warning
    "srt-slurm-recipes__recipes__single-node__Qwen3.5__B200__vllm__8k1k.yaml":
        {"C006:warning": 1, "C007:info": 1, **ITL, "C009:info": 1},
    "srt-slurm-recipes__recipes__multi-node__DeepSeek-V4-Pro__GB200__vllm__8k1k-sa__agg-gb200-low-latency-mtp2.yaml":
        {"C009:info": 1},
    NEMOTRON: {"C007:info": 1, "C009:info": 1},
    # `disable-log-requests` was removed in vLLM v0.17.0; Dynamo 0.8.0 predates 0.9.0 (vLLM 0.14.1): still valid
    "srt-slurm__recipes__vllm__qwen3-32b__agg-round-robin.yaml": {"C009:info": 1},
    # unidentified `vllm` image: async scheduling assumed on for the kv_both decode: warning
    "SemiAnalysisAI-srt-slurm__examples__vllm__dynamo-disagg.yaml": {"C002:warning": 1, "C007:info": 1, "C009:info": 2},
    # The upstream example sets tp-size 16/32/64 but gives each worker one 8-GPU node: one grouped finding per
    # role for the zip sweep and one per role for override_tp64
    OVERRIDE: {"C013:error": 4, "C009:info": 2},
    "srt-slurm__recipes__mocker__agg.yaml": {},
    **{f: {"C009:info": 2} for f in (
        "SemiAnalysisAI-srt-slurm__examples__sglang__dynamo-disagg.yaml",
        "srt-slurm__examples__example-sweep.yaml")},
    # SGLang decode capped at 256 running (32 per DP rank) under 512 requests: an info (DIAG-C021)
    "srt-slurm-recipes__recipes__multi-node__DeepSeek-R1__GB200__128k8k__sglang__fp4__stp__"
    "maxthroughput-ctx3_pp4_gen1_dep8_batch32_eplb0_mtp0.yaml": {**ITL, "C009:info": 2, "C021:info": 1},
    **{f: {**ITL, "C009:info": 2} for f in (
        "srt-slurm-recipes__recipes__multi-node__DeepSeek-R1__GB200__1k1k__sglang__1k1k-max-tpt.yaml",
        "srt-slurm-recipes__recipes__multi-node__DeepSeek-R1__GB300__1k1k__trtllm__fp4__stp__"
        "ctx2_gen1_dep8_batch1024_eplb0_mtp0.yaml",
        "srt-slurm-recipes__recipes__multi-node__DeepSeek-V4-Pro__GB300__8k1k__sglang__disagg__disagg-4p1d-dep4-dep16.yaml",
        "srt-slurm-recipes__recipes__multi-node__GLM-5__GB300__sglang__glm5-nvfp4-8k1k-maxtpt0-c2048.yaml",
        "srt-slurm-recipes__recipes__multi-node__Qwen3.5__GB300__8k1k__trtllm__disagg__ctx1dep2_gen1tep16_mtp3_c48.yaml",
        "srt-slurm-recipes__recipes__multi-node__Qwen3.5__GB300__8k1k__trtllm__disagg__ctx2dep2_gen15tp4_mtp3_c90.yaml",
        "srt-slurm-recipes__recipes__multi-node__Qwen3.5__GB300__8k1k__trtllm__disagg__ctx4dep2_gen1dep16_mtp3_c384.yaml",
        "srt-slurm__recipes__qwen3.5__fp8__disagg__mooncake__stp_prefix_off__wideep-2p1d-dep16-dpep-cc2048x4096.yaml",
        "srt-slurm__recipes__qwen3.5__fp8__disagg__nixl__stp_prefix_off__1p1d-tp4-nixl.yaml")},
    # `frontend.type: sglang` / `trtllm_serve`: workers run without Dynamo, so no DYN_* advice
    **{f: {**ITL} for f in (
        "srt-slurm-recipes__recipes__single-node__Qwen3.5__B200__sglang__8k1k.yaml",
        "srt-slurm-recipes__recipes__single-node__Qwen3.5__B300__sglang__agg-tp2-ep-mtp-8k1k.yaml",
        "srt-slurm__recipes__qwen3.5__nvfp4__disagg__mtp_radix_off__1p1d-dep8-dpep-mtp-1k1k-gb300.yaml")},
    "srt-slurm__examples__trtllm-rc23-qwen3.5-moe-aggregate.yaml": {},
    **{f: {**ITL, "C009:info": 1} for f in (
        "srt-slurm-recipes__recipes__single-node__Qwen3.5__H200__sglang__8k1k-mtp.yaml",
        "srt-slurm__recipes__qwen3.5__nvfp4__agg__stp_prefix_off__dep4.yaml")},
}


def _counts(findings: list[Any]) -> dict[str, int]:
    return dict(Counter(f"{f.code.removeprefix('DIAG-')}:{f.severity}" for f in findings))


@pytest.fixture(scope="module")
def real_findings(real_recipes: Path) -> dict[str, list[Any]]:
    return {p.name: check_file(p) for p in sorted(real_recipes.glob("*.yaml"))}


def test_all_39_real_recipes_are_checked_and_every_finding_is_expected(real_findings: dict[str, list[Any]]) -> None:
    assert len(real_findings) == 39 and set(EXPECTED) == set(real_findings)
    diff = {name: (_counts(found), EXPECTED[name]) for name, found in real_findings.items()
            if _counts(found) != EXPECTED[name]}
    assert not diff, diff


def test_the_qwen35_family_has_no_error(real_findings: dict[str, list[Any]]) -> None:
    for name in QWEN_FAMILY:
        assert not [f for f in real_findings[name] if f.severity == "error"], name


def test_non_vllm_recipes_get_no_engine_flag_findings(real_recipes: Path, real_findings: dict[str, list[Any]]) -> None:
    # Dynamo log env, stream-interval and GPU arithmetic apply to every backend
    generic = {"DIAG-C008", "DIAG-C009", "DIAG-C013"}
    sglang = {f"DIAG-C{i:03d}" for i in range(18, 25)}  # SGLang's own checks (engines/sglang/catalog)
    for name, found in real_findings.items():
        text = (real_recipes / name).read_text()
        if "type: vllm" in text or "engine:\n  type: vllm" in text:
            continue
        assert {f.code for f in found} <= generic | (sglang if "sglang_config" in text else set()), name


def test_findings_point_into_the_file_and_carry_a_fix(real_recipes: Path, real_findings: dict[str, list[Any]]) -> None:
    for name, found in real_findings.items():
        lines = (real_recipes / name).read_text().splitlines()
        for f in found:
            assert f.location and f.location.path.endswith(name) and f.fix and f.message
            assert 1 <= f.location.line <= len(lines) and f.location.col >= 1


# --- one real mutation per code ---------------------------------------------------------------------------

def _nth_replace(text: str, old: str, new: str, nth: int) -> str:
    idx = -1
    for _ in range(nth + 1):
        idx = text.index(old, idx + 1)
    return text[:idx] + new + text[idx + len(old):]


def _line_of(text: str, needle: str, nth: int = 0) -> int:
    idx = -1
    for _ in range(nth + 1):
        idx = text.index(needle, idx + 1)
    return text.count("\n", 0, idx) + 1


DS = '    VLLM_SSM_CONV_STATE_LAYOUT: "DS"\n'
NIGHTLY = "nightly-d223c900d85224c02f2162ee2c757a769e99f519"
KV = '      kv-transfer-config: \'{"kv_connector": "NixlConnector", "kv_role": "kv_both", "kv_load_failure_policy": "fail"}\'\n'
# code, recipe, [(old, new, nth)], role, (text on the expected line, nth), fix fragment, severity
MUTATIONS = [
    ("C001", QWEN, [(DS, "", 1)], "decode", ("  decode_environment:", 0),
     'VLLM_SSM_CONV_STATE_LAYOUT: "DS"` in `backend.decode_environment', "error"),
    ("C002", QWEN, [(NIGHTLY, "v0.24.0", 0)], "decode", ("      async-scheduling: true", 1),
     "no-async-scheduling: true` in `backend.vllm_config.decode", "error"),
    ("C003", QWEN, [('      mamba-ssm-cache-dtype: "bfloat16"\n', "", 1)], "decode", ("    decode:", 0),
     'mamba-ssm-cache-dtype: "bfloat16"` in `backend.vllm_config.decode', "warning"),
    ("C004", QWEN, [("max-num-batched-tokens: 16384", "max-num-batched-tokens: 4096", 0)], "prefill",
     ("max-num-batched-tokens: 4096", 0), "max-num-batched-tokens: 16384", "warning"),
    ("C005", QWEN_CC5120, [("      max-cudagraph-capture-size: 768\n", "", 0)], "decode", ("    decode:", 0),
     "max-cudagraph-capture-size: 768` in `backend.vllm_config.decode", "warning"),
    ("C006", NEMOTRON, [("tensor-parallel-size: 8", "tensor-parallel-size: 1\n      data-parallel-size: 8", 0)],
     "agg", ("data-parallel-size: 8", 0), "api-server-count: 1` in `backend.vllm_config.aggregated", "warning"),
    ("C007", QWEN, [("      no-enable-prefix-caching: true\n", "", 0)], "prefill", ("    prefill:", 0),
     "no-enable-prefix-caching: true` in `backend.vllm_config.prefill", "info"),
    ("C008", NEMOTRON, [("max-num-seqs: 512\n", "max-num-seqs: 512\n      stream-interval: 10\n", 0)], "agg",
     ("stream-interval: 10", 0), "stream-interval: 1`", "info"),
    ("C009", QWEN, [('    DYN_LOG: "error"\n', "", 1)], "decode", ("  decode_environment:", 0),
     'DYN_LOG: "error"` in `backend.decode_environment', "info"),
    ("C010", QWEN, [("      language-model-only: true\n", "", 1)], "decode", ("    decode:", 0),
     "language-model-only: true` in `backend.vllm_config.decode", "info"),
    ("C011", QWEN, [("max-num-batched-tokens: 16384\n", "max-num-batched-tokens: 16384\n      gdn-prefill-backend: triton\n",
                     0)], "prefill", ("gdn-prefill-backend: triton", 0), 'gdn-prefill-backend: "flashinfer"', "warning"),
    ("C012", MEGAMOE, [("block-size: 256", "block-size: 64", 1)], "decode", ("block-size: 64", 0),
     "block-size: 256` in `backend.vllm_config.decode", "error"),
    ("C013", QWEN, [("data-parallel-size: 8", "data-parallel-size: 16", 0)], "decode",
     ("      tensor-parallel-size: 1", 1), "multiply to 8", "error"),
    ("C014", QWEN, [("      async-scheduling: true", "      async-scheduleing: true", 1)], "decode",
     ("async-scheduleing", 0), "rename `async-scheduleing` to `async-scheduling`", "error"),
    ("C015", QWEN, [(KV, "", 1)], "decode", ("    decode:", 0),
     "kv-transfer-config: '{\"kv_connector\": \"NixlConnector\", \"kv_role\": \"kv_consumer\"}'", "error"),
    ("C016", MEGAMOE, [('kv-cache-dtype: "fp8"', 'kv-cache-dtype: "auto"', 1)], "decode",
     ('kv-cache-dtype: "auto"', 0), 'kv-cache-dtype: "fp8"` in `backend.vllm_config.decode', "error"),
]


@pytest.mark.parametrize("case", MUTATIONS, ids=[m[0] for m in MUTATIONS])
def test_mutating_a_real_recipe_trips_each_code(case: tuple[Any, ...], real_recipes: Path, tmp_path: Path) -> None:
    code, name, edits, role, (needle, nth), fix, severity = case
    text = (real_recipes / name).read_text()
    before = [f for f in check_file(real_recipes / name)
              if f.code == f"DIAG-{code}" and f.endpoint == role and f.severity == severity]
    for old, new, k in edits:
        text = _nth_replace(text, old, new, k)
    path = tmp_path / name
    path.write_text(text)
    found = [f for f in check_file(path) if f.code == f"DIAG-{code}" and f.endpoint == role
             and f.severity == severity]
    assert len(found) == len(before) + 1, [f.message for f in found]
    new = [f for f in found if f not in before] or found
    f = new[-1]
    assert f.location.line == _line_of(text, needle, nth), (f.location, f.message)
    assert fix in (f.fix or ""), f.fix
    assert catalog()[f.code].name == f.name


def test_removed_flag_is_an_error_on_a_dated_build(real_recipes: Path, tmp_path: Path) -> None:
    text = (real_recipes / QWEN).read_text().replace("      stream-interval: 100\n",
                                                     "      stream-interval: 100\n      cuda-graph-sizes: 512\n", 1)
    (tmp_path / "r.yaml").write_text(text)
    (f,) = [f for f in check_file(tmp_path / "r.yaml") if f.code == "DIAG-C014"]
    assert f.severity == "error" and "max-cudagraph-capture-size" in f.fix
    assert f.location.line == _line_of(text, "cuda-graph-sizes")


def test_override_findings_point_at_the_override_and_name_the_job(real_findings: dict[str, list[Any]]) -> None:
    tp64 = [f for f in real_findings[OVERRIDE] if f.code == "DIAG-C013" and "override_tp64" in f.evidence["jobs"]]
    assert {(f.endpoint, f.location.line) for f in tp64} == {("prefill", 66), ("decode", 68)}
    assert all(f.message.endswith("[jobs: override_tp64]") for f in tp64)


def test_findings_shared_by_all_jobs_are_reported_once(real_findings: dict[str, list[Any]]) -> None:
    sweep = real_findings["srt-slurm__examples__example-sweep.yaml"]
    assert len(sweep) == 2 and all(len(f.evidence["jobs"]) == 4 and "[jobs" not in f.message for f in sweep)


def test_sweep_points_with_different_numbers_group_into_one_finding(real_findings: dict[str, list[Any]]) -> None:
    zipped = [f for f in real_findings[OVERRIDE] if f.code == "DIAG-C013" and "override_tp64" not in f.evidence["jobs"]]
    assert len(zipped) == 2 and all(len(f.evidence["per_job"]) == 3 for f in zipped)
    assert all("and 2 more of the 5 jobs with other values" in f.message for f in zipped)


# --- the catalog's own examples -----------------------------------------------------------------------------

def _example(ex: dict[str, Any]) -> Any:
    doc = load_yaml(bases()[ex["base"]])
    for dotted in ex.get("delete", []):
        *parents, last = dotted.split(".")
        node = doc
        for p in parents:
            node = node[p]
        del node[last]
    for dotted, value in ex.get("set", {}).items():
        *parents, last = dotted.split(".")
        node = doc
        for p in parents:
            node = node.setdefault(p, YMap())
        node[last] = value
    return build_recipe(doc, f"{ex['base']}.yaml")


CONFIG_RULES = [r for r in by_scope("recipe") if r.code.startswith("DIAG-C")]
CASES = [(r, i, ex) for r in CONFIG_RULES for i, ex in enumerate(r.examples)]


def test_config_catalog_is_complete() -> None:
    assert [r.code for r in CONFIG_RULES] == [f"DIAG-C{i:03d}" for i in range(1, 30)]
    for r in CONFIG_RULES:
        assert r.why and r.remediation and r.summary and r.scope == "recipe"
        assert {ex["expect"] for ex in r.examples} == {"fire", "pass"}, r.code


def test_bases_are_clean() -> None:
    for name in bases():
        found = [f for f in run_checks(_example({"base": name})) if f.severity != "info"]
        assert not found, (name, [f.message for f in found])


@pytest.mark.parametrize("case", CASES, ids=[f"{r.code}-{i}-{ex['expect']}" for r, i, ex in CASES])
def test_catalog_example(case: tuple[Any, int, dict[str, Any]]) -> None:
    rule, _, ex = case
    found = [f for f in run_checks(_example(ex), [rule]) if f.code == rule.code]
    if ex["expect"] == "fire":
        assert found, f"{rule.code} did not fire on {ex}"
        if "severity" in ex:
            assert any(f.severity == ex["severity"] for f in found), [f.severity for f in found]
        assert all(f.fix and f.location and f.location.line for f in found)
    else:
        assert not found, found[0].message


# --- command line -------------------------------------------------------------------------------------------

APP = typer.Typer()
APP.command()(check)
RUN = CliRunner()


def _cli(*args: str) -> Any:
    return RUN.invoke(APP, list(args))


def test_registered_in_the_diag_cli() -> None:
    from diag.cli import app

    assert "check" in {c.name for c in app.registered_commands}


def test_cli_exit_codes_and_thresholds(real_recipes: Path) -> None:
    qwen = str(real_recipes / QWEN)
    assert _cli(qwen).exit_code == 0                           # warnings only, default fail-on error
    assert _cli(qwen, "--fail-on", "warning").exit_code == 1
    assert _cli(qwen, "--fail-on", "warning", "--exit-zero").exit_code == 0
    assert _cli(qwen, "--fail-on", "info", "--ignore", "C006,C008", "--ignore", "DIAG-C015").exit_code == 0
    res = _cli(str(real_recipes / OVERRIDE), "--select", "C013")
    assert res.exit_code == 1 and "DIAG-C013" in res.stdout and "DIAG-C009" not in res.stdout
    assert _cli(str(real_recipes / OVERRIDE), "--select", "C0", "--ignore", "C013").exit_code == 0


def test_cli_text_output_groups_by_file(real_recipes: Path) -> None:
    res = _cli(str(real_recipes / MEGAMOE), "--select", "C002")
    path, first, fix, blank, summary = res.stdout.splitlines()
    assert path == str(real_recipes / MEGAMOE) and blank == ""
    assert first.startswith("  99:5    DIAG-C002 warning decode: async scheduling")
    assert fix.startswith("          fix: ") and summary == "Found 1 finding (1 warning) in 1 file."


def test_cli_text_worst_first_and_path_once(real_recipes: Path) -> None:
    """Across a directory: each file's path once, its findings under it by severity (errors first)."""
    res = _cli(str(real_recipes))
    lines = res.stdout.splitlines()
    rank = {"error": 2, "warning": 1, "info": 0}
    groups: dict[str, list[int]] = {}
    current = None
    for line in lines[:-1]:
        if line and not line.startswith(" "):
            assert line not in groups, line            # a file's path is written once
            current = line
            groups[current] = []
        elif line.startswith("  ") and "DIAG-" in line and not line.lstrip().startswith("fix:"):
            sev = line.split("DIAG-", 1)[1].split()[1]
            groups[current].append(rank[sev])
    assert len(groups) > 5 and all(g == sorted(g, reverse=True) for g in groups.values())
    worst = [max(g) for g in groups.values() if g]
    assert worst == sorted(worst, reverse=True)        # the file with the worst finding first


def test_cli_scans_directories_and_notes_non_recipes(real_recipes: Path, tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "r.yml").write_text((real_recipes / QWEN).read_text())
    (tmp_path / "other.yaml").write_text("jobs: [a, b]\n")
    (tmp_path / "notes.txt").write_text("not yaml")
    res = _cli(str(tmp_path), "--format", "json")
    assert res.exit_code == 0
    doc = json.loads(res.stdout)
    validate(doc, "check")
    assert doc["summary"]["files"] == 1 and doc["summary"]["by_code"]["DIAG-C006"] == 2
    assert "other.yaml: not an srt-slurm recipe" in res.stderr


def test_bad_yaml_is_a_positioned_parse_error_not_a_traceback(tmp_path: Path, real_recipes: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: x\nmodel:\n  path: [unclosed\nresources: {}\n")
    res = _cli(str(bad), str(real_recipes / QWEN))
    assert res.exit_code == 2 and "Traceback" not in res.output
    assert res.stderr.splitlines()[0].startswith(f"{bad}:4:")
    assert ": parse error: " in res.stderr
    assert "DIAG-C006" in res.stdout  # the good file is still reported
    missing = _cli(str(tmp_path / "nope.yaml"))
    assert missing.exit_code == 2 and "no such file" in missing.stderr


@pytest.mark.parametrize("fmt", ["json", "sarif", "github"])
def test_cli_machine_formats(fmt: str, real_recipes: Path) -> None:
    res = _cli(str(real_recipes / QWEN), "--format", fmt, "--select", "C006")
    assert res.exit_code == 0
    if fmt == "github":
        lines = res.stdout.splitlines()
        assert len(lines) == 2 and all(ln.startswith("::warning file=") for ln in lines)
    elif fmt == "json":
        validate(json.loads(res.stdout), "check")
    else:
        assert json.loads(res.stdout)["version"] == "2.1.0"  # test_sarif validates against the OASIS schema


def test_version_table_is_documented_in_explain() -> None:
    from helpers import versions_markdown

    docs = catalog()["DIAG-C002"].docs
    assert versions_markdown() in docs, "re-generate the docs of DIAG-C002 from rules/data/versions.toml"


def test_family_table_is_documented_in_explain() -> None:
    from helpers import families_markdown

    assert families_markdown() in catalog()["DIAG-C001"].docs, "re-generate DIAG-C001 docs from models.toml"


def _paths(node: Any, pre: tuple[Any, ...] = ()) -> Any:
    items = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else ()
    for k, v in items:
        yield (*pre, k)
        yield from _paths(v, (*pre, k))


@pytest.mark.parametrize("name", [QWEN, "SemiAnalysisAI-srt-slurm__examples__vllm__dynamo-disagg.yaml", OVERRIDE])
def test_structural_mutations_never_crash(name: str, real_recipes: Path) -> None:
    """Delete or retype every key of a real recipe: the result is findings or a RecipeError, never a crash."""
    from diag.parsers.recipe import RecipeError
    from diag.parsers.recipe_variants import expand_jobs, looks_like_recipe
    from diag.parsers.recipe_yaml import copy_tree, load_yaml_file

    base = load_yaml_file(real_recipes / name)
    for path in list(_paths(base)):
        for repl in ("DEL", None, "x", [1], {}, 0, -3, True, "{node}"):
            doc = copy_tree(base)
            node = doc
            for part in path[:-1]:
                node = node[part]
            if repl == "DEL":
                node.pop(path[-1])
            else:
                node[path[-1]] = repl
            if not looks_like_recipe(doc):
                continue
            try:
                for job in expand_jobs(doc):
                    run_checks(build_recipe(job.data, "x.yaml", job.name, job.variant))
            except RecipeError as exc:
                assert exc.line is None or exc.line >= 1
