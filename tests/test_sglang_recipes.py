"""SGLang's recipe checks on real recipes: no error on any, and each check caught on a minimal one.

Every recipe with ``sglang_config`` in the recipe test set (tests/data/recipes, from NVIDIA/srt-slurm) and in
../shared/samples/recipes goes through ``diag check``; none may get an error but the certain oversized sweep
points of DIAG-C013 (tests/test_recipe_set.py), and none at all from SGLang's checks (certain-only).
The catalog's examples (engines/sglang/catalog/config.toml) are run by tests/test_check.py; the cases here
pin what the examples cannot: the release an image names, and what argparse makes of a flag.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from diag.check_cmd import check_file
from diag.engines.sglang import flags

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data" / "recipes"


def _sglang(folder: Path) -> list[Path]:
    return sorted(p for p in folder.glob("*.yaml") if "sglang_config" in p.read_text())


def _oversized_sweep_point(code: str, message: str) -> bool:
    return code == "DIAG-C013" and "GPUs per worker but the worker gets" in message and "jobs" in message


def _errors(paths: list[Path]) -> dict[str, list[str]]:
    out = {p.name: [f"{f.code} {f.message}" for f in check_file(p)
                    if f.severity == "error" and not _oversized_sweep_point(f.code, f.message)] for p in paths}
    return {name: found for name, found in out.items() if found}


def test_no_error_on_any_sglang_recipe_of_the_set() -> None:
    paths = _sglang(DATA)
    assert len(paths) >= 30
    assert not _errors(paths)


def test_no_error_on_the_shared_sglang_recipes(real_recipes: Path) -> None:
    paths = _sglang(real_recipes)
    assert paths
    assert not _errors(paths)


@pytest.mark.parametrize(("image", "version"), [
    ("lmsysorg/sglang:v0.5.8-cu130", "0.5.8"), ("v0.5.7", "0.5.7"), ("0.5.6.post2", "0.5.6.post2"),
    ("sglang-v0.5.11-cu130", "0.5.11"), ("lmsysorg/sglang:v0.5.8-runtime", "0.5.8"), ("dev", None),
    ("dynamo-sglang", None), ("lmsysorg/sglang:nightly-dev-20260527-14f81a67", None),
    ("nvcr.io/nvidia/ai-dynamo/sglang-runtime:1.2.0-sglang-deepseek-v4-b200-dev.1", None)])
def test_the_release_an_image_names(image: str, version: str | None) -> None:
    assert flags.image_version(image) == version


def test_flags_as_argparse_reads_them() -> None:
    assert flags.releases() == ("0.4.6.post5", "0.5.8", "0.5.23")
    assert flags.classify("cuda-graph-max-bs", "0.5.8", dynamo=True).status == "known"
    amb = flags.classify("cuda-graph-max-bs", "0.5.23", dynamo=True)
    assert amb.status == "ambiguous" and amb.matches == ("cuda-graph-max-bs-decode", "cuda-graph-max-bs-prefill")
    assert flags.classify("speculative-algo", "0.5.23", dynamo=False).flag == "speculative-algorithm"
    assert flags.classify("enable-flashmla", "0.4.6.post5", dynamo=False).status == "rejected"
    assert flags.classify("request-plane", "0.5.8", dynamo=True).status == "known"
    assert flags.classify("request-plane", "0.5.8", dynamo=False).status == "unknown"
    typo = flags.classify("mem-fracton-static", "0.5.23", dynamo=True)
    assert typo.status == "unknown" and typo.suggestion == "mem-fraction-static"
    assert flags.removed_since("nsa-decode-backend", "0.5.23") == "0.5.8"
    assert flags.deprecated("0.5.23")["enable-dp-attention"] == "--attn-dp-size <dp-size>"


def test_the_flag_lists_are_what_the_generator_reads_from_the_wheels() -> None:
    spec = importlib.util.spec_from_file_location("sglang_flags_tool", ROOT / "tools" / "sglang_flags.py")
    assert spec and spec.loader
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)
    if not all(p.is_dir() for p in (*tool.SGLANG.values(), tool.DYNAMO[1])):
        pytest.skip("the unpacked wheels (tools/sglang_flags.py SGLANG, DYNAMO) are not on this machine")
    assert tool.render(tool.SGLANG, tool.DYNAMO) == (ROOT / "engines" / "sglang" / "data" / "flags.toml").read_text()
