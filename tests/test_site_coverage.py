"""The site-classification checker (tools/site_coverage.py): precedence and schema checks on a small inline
catalog, and the committed vLLM catalog (engines/vllm/catalog/sites.toml) against the extracted vLLM sites."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location("site_coverage_tool", ROOT / "tools" / "site_coverage.py")
assert _spec and _spec.loader
site_coverage = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = site_coverage
_spec.loader.exec_module(site_coverage)

CATALOG = '''\
[[site]]
id = "aaaaaaaaaaaa"
class = "oom"
phase = "startup"
severity = "error"
why = "the one site"

[[scope]]
name = "nixl-failures"
files = ["vllm/distributed/kv_transfer/**"]
levels = ["error", "exception"]
patterns = ["(?i)failed"]
class = "kv_connector"
phase = "serving"
severity = "error"
why = "connector failures"

[[scope]]
name = "rest-of-kv-transfer"
files = ["vllm/distributed/kv_transfer/**"]
class = "config"
phase = "startup"
severity = "error"
why = "connector set-up"

[[scope]]
name = "bad"
files = ["vllm/nothing/**"]
class = "explosion"
phase = "startup"
severity = "error"
'''


def _site(sid: str, file: str, level: str, pattern: str) -> object:
    return site_coverage.Site(id=sid, engine="vllm", package="vllm", release="0", file=file, line=1,
                              function="Worker.step", level=level, exception=None, exc_info=False, pattern=pattern,
                              holes=[], format="", extractor="ast")


def test_precedence_and_schema(tmp_path: Path) -> None:
    path = tmp_path / "sites.toml"
    path.write_text(CATALOG, encoding="utf-8")
    by_id, scopes, problems = site_coverage.read_catalog(path)
    kv = "vllm/distributed/kv_transfer/kv_connector/v1/nixl_connector.py"
    by_name = {s: site_coverage.classify(_site(*s), by_id, scopes) for s in [
        ("aaaaaaaaaaaa", kv, "error", "NIXL transfer failed"),  # the [[site]] wins over every scope
        ("bbbbbbbbbbbb", kv, "error", "NIXL transfer failed"),  # first scope whose every selector matches
        ("cccccccccccc", kv, "raise", "NIXL transfer failed"),  # level not selected: the next scope
        ("dddddddddddd", "vllm/v1/engine/core.py", "error", "failed"),  # no scope names the file
    ]}
    assert [e.name if e else None for e in by_name.values()] == [
        "aaaaaaaaaaaa", "nixl-failures", "rest-of-kv-transfer", None]
    assert sorted(problems) == ["scope bad: class = 'explosion' is not one of the schema's", "scope bad: no why"]


def test_vllm_catalog_covers_the_extracted_sites() -> None:
    by_id, scopes, problems = site_coverage.read_catalog(ROOT / site_coverage.CATALOGS["vllm"])
    assert problems == []
    sites = {s.id: s for p in sorted(site_coverage.DATA.glob("vllm-*.jsonl")) for s in site_coverage.load(p)}
    assert set(by_id) <= set(sites), "a [[site]] names an id the extractor never wrote"
    errors = [s for s in sites.values() if s.level != "warning"]
    classified = sum(site_coverage.classify(s, by_id, scopes) is not None for s in errors)
    assert classified / len(errors) >= 0.95
