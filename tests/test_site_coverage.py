"""The site classifications (issue 36's schema) through tools/site_catalog.py: precedence and schema checks on a
small inline catalog, and every committed classification file against the extracted sites (schema-clean, only
extracted ids, >= 95 % of each engine's error-class sites classified)."""

from __future__ import annotations

from pathlib import Path

import pytest

from helpers import load_tool

site_catalog = load_tool("site_catalog")

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
    return site_catalog.Site(id=sid, engine="vllm", package="vllm", release="0", file=file, line=1,
                             function="Worker.step", level=level, exception=None, exc_info=False, pattern=pattern,
                             holes=[], format="", extractor="ast")


def test_precedence_and_schema(tmp_path: Path) -> None:
    path = tmp_path / "sites.toml"
    path.write_text(CATALOG, encoding="utf-8")
    rules = site_catalog.Classification(path)
    kv = "vllm/distributed/kv_transfer/kv_connector/v1/nixl_connector.py"
    got = [rules.verdict(_site(*s)) for s in [
        ("aaaaaaaaaaaa", kv, "error", "NIXL transfer failed"),  # the [[site]] wins over every scope
        ("bbbbbbbbbbbb", kv, "error", "NIXL transfer failed"),  # first scope whose every selector matches
        ("cccccccccccc", kv, "raise", "NIXL transfer failed"),  # level not selected: the next scope
        ("dddddddddddd", "vllm/v1/engine/core.py", "error", "failed"),  # no scope names the file
    ]]
    assert [v.source if v else None for v in got] == ["site", "nixl-failures", "rest-of-kv-transfer", None]
    assert [(v.cls, v.phase) for v in got if v] == [("oom", "startup"), ("kv_connector", "serving"),
                                                    ("config", "startup")]
    assert sorted(rules.problems) == ["scope bad: class = 'explosion' is not one of the schema's", "scope bad: no why"]


@pytest.mark.parametrize("engine", site_catalog.ENGINES)
def test_a_classification_covers_its_extracted_sites(engine: str) -> None:
    rules = site_catalog.Classification(site_catalog.classification_file(engine))
    assert rules.problems == []
    sites = {s.id: s for p in sorted(site_catalog.OUT.glob(f"{engine}-*.jsonl")) for s in site_catalog.load(p)}
    assert set(rules.sites) <= set(sites), "a [[site]] names an id the extractor never wrote"
    errors = [s for s in sites.values() if s.level in site_catalog.ERROR_LEVELS]
    assert sum(rules.verdict(s) is not None for s in errors) / len(errors) >= 0.95
