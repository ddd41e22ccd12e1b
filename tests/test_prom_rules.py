"""`diag rules export --format prometheus`: a rule file promtool accepts, built from the catalog's data."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from diag.rules.catalog import catalog
from diag.rules.promrules import export

ROOT = Path(__file__).resolve().parents[1]


def _diag(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "diag", *args], capture_output=True, text=True, cwd=ROOT,
                          timeout=60)


def test_export_passes_promtool(tmp_path: Path) -> None:
    res = _diag("rules", "export", "--format", "prometheus")
    assert res.returncode == 0, res.stderr
    doc = yaml.safe_load(res.stdout)
    alerts = {r["labels"]["code"]: r for r in doc["groups"][1]["rules"]}
    assert set(alerts) == {"DIAG-K001", "DIAG-K002", "DIAG-L001", "DIAG-B004"}
    k001 = alerts["DIAG-K001"]
    assert (k001["for"], k001["keep_firing_for"], k001["labels"]["severity"]) == ("60s", "60s", "error")
    assert "diag:vllm_kv_usage:percent >= 95" in k001["expr"]
    assert "$labels" in k001["annotations"]["description"] and "$value" in k001["annotations"]["description"]
    assert "# Not expressible in PromQL:\n#   DIAG-A001" in res.stdout
    record = {r["record"]: r["expr"] for r in doc["groups"][0]["rules"]}
    assert "vllm:gpu_cache_usage_perc" in record["diag:vllm_kv_usage:percent"]  # the renamed metric too
    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.skip("promtool is not installed (Debian's prometheus package ships it)")
    (tmp_path / "rules.yml").write_text(res.stdout)
    check = subprocess.run([promtool, "check", "rules", str(tmp_path / "rules.yml")], capture_output=True,
                           text=True, timeout=60)
    assert check.returncode == 0, check.stdout + check.stderr


def test_a_catalog_threshold_changes_the_export() -> None:
    k001 = catalog()["DIAG-K001"]
    assert "percent >= 90 " in export([k001.with_params({"kv_usage": 90})])
    assert "for: 120s" in export([k001.with_params({"for": 120})])
    one = _diag("rules", "export", "--format", "prometheus", "--select", "K002")
    assert one.returncode == 0 and one.stdout.count("alert:") == 1
    for args in (("rules", "export"), ("rules", "--format", "prometheus"), ("rules", "nope"),
                 ("rules", "export", "--format", "prometheus", "--select", "Z9")):
        bad = _diag(*args)
        assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1, bad.stderr
