"""TensorRT-LLM's recipe checks on real recipes: no error on any, each warning the one reviewed.

The sweep reads every ``backend.type: trtllm`` recipe of NVIDIA/srt-slurm's ``recipes/`` (335 at c88ef73) from a
git mirror of the repository (``DIAG_SRT_SLURM_GIT``, default the workplace's mirror; skipped without one),
extracted once per session, and ../shared's. The catalog's examples (engines/trtllm/catalog/config.toml) run in
tests/test_check.py; the cases here pin the build an image names.
"""

from __future__ import annotations

import io
import os
import subprocess
import tarfile
from collections import Counter
from pathlib import Path

import pytest
import yaml

from diag.check_cmd import check_file
from diag.engines.trtllm.recipe import parse_build

MIRROR = Path(os.environ.get("DIAG_SRT_SLURM_GIT", "/work/.mirror/NVIDIA+srt-slurm/repo"))
# what the sweep finds beyond errors (none), reviewed: C025 print_iter_log off on five recipes; C028 info on the
# H200 8k1k recipes, whose prefill buffer (32768) is twice decode's (16384)
REVIEWED = {"DIAG-C025:warning": 5, "DIAG-C028:info": 18}
NEW = ("DIAG-C013", "DIAG-C025", "DIAG-C026", "DIAG-C027", "DIAG-C028", "DIAG-C029")


def _trtllm(paths: list[Path]) -> list[Path]:
    out = []
    for p in paths:
        text = p.read_text()
        if "trtllm" in text and ((yaml.safe_load(text) or {}).get("backend") or {}).get("type") == "trtllm":
            out.append(p)
    return out


@pytest.fixture(scope="session")
def srt_slurm_recipes(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    if not (MIRROR / "HEAD").exists():
        pytest.skip(f"no git mirror of NVIDIA/srt-slurm at {MIRROR} (DIAG_SRT_SLURM_GIT)")
    tar = subprocess.run(["git", "--git-dir", str(MIRROR), "archive", "HEAD", "recipes"], check=True,
                         capture_output=True).stdout
    root = tmp_path_factory.mktemp("srt-slurm")
    with tarfile.open(fileobj=io.BytesIO(tar)) as tf:
        tf.extractall(root, filter="data")
    return _trtllm(sorted((root / "recipes").rglob("*.yaml")))


def _counts(paths: list[Path]) -> tuple[Counter[str], list[str]]:
    counts: Counter[str] = Counter()
    errors = []
    for p in paths:
        for f in check_file(p):
            if f.code in NEW:
                counts[f"{f.code}:{f.severity}"] += 1
            if f.severity == "error":
                errors.append(f"{p.name}: {f.code} {f.message}")
    return counts, errors


def test_no_error_and_only_the_reviewed_findings_on_srt_slurms_trtllm_recipes(srt_slurm_recipes: list[Path]) -> None:
    assert len(srt_slurm_recipes) >= 335
    counts, errors = _counts(srt_slurm_recipes)
    assert not errors
    assert dict(counts) == REVIEWED


def test_no_error_on_the_shared_trtllm_recipes(real_recipes: Path) -> None:
    paths = _trtllm(sorted(real_recipes.glob("*.yaml")))
    assert paths
    counts, errors = _counts(paths)
    assert not errors and not counts


@pytest.mark.parametrize(("image", "kind", "version", "runtime"), [
    ("nvcr.io/nvidia/tensorrt-llm/release:1.3.0rc18", "release", "1.3.0rc18", None),
    ("nvcr.io/nvidia/tensorrt-llm/release:1.2.0", "release", "1.2.0", None),
    ("nvcr.io#nvidia/ai-dynamo/tensorrtllm-runtime:0.8.1.post1", "unknown", None, "0.8.1.post1"),
    ("nvcr.io/nvidia/ai-dynamo/tensorrtllm-runtime:1.1.0-dev.3", "unknown", None, "1.1.0-dev.3"),
    ("dynamo-trtllm", "unknown", None, None)])
def test_the_build_an_image_names(image: str, kind: str, version: str | None, runtime: str | None) -> None:
    b = parse_build(image)
    assert (b.kind, b.version, b.runtime_tag, b.engine) == (kind, version, runtime, "TensorRT-LLM")
    assert "vLLM" not in b.label
