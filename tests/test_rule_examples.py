"""Every runtime rule's declared examples fire (or pass) as declared; the catalog is well formed."""

from __future__ import annotations

import pytest

from diag.rules import runtime
from diag.rules.catalog import catalog
from diag.rules.engine import runtime_rules
from diag.rules.examples import example_findings

RULES = runtime_rules()
CASES = [(r, i, ex) for r in RULES for i, ex in enumerate(r.examples)]


def test_runtime_catalog_is_complete() -> None:
    codes = {r.code for r in RULES}
    assert codes == {"DIAG-B001", "DIAG-B002", "DIAG-B003", "DIAG-B004", "DIAG-K001", "DIAG-K002", "DIAG-K003", "DIAG-K004",
                     "DIAG-L001", "DIAG-L002", "DIAG-E001", "DIAG-E002", "DIAG-E003", "DIAG-E004", "DIAG-E005",
                     "DIAG-E006", "DIAG-A001", "DIAG-D001", "DIAG-S001", "DIAG-V001", "DIAG-V002",
                     "DIAG-V003"}
    for r in RULES:
        assert r.template in runtime.TEMPLATES, r.code
        assert r.why and r.remediation and r.summary, r.code
        expects = {ex["expect"] for ex in r.examples}
        assert expects == {"fire", "pass"}, f"{r.code} needs positive and negative examples"


def test_codes_are_unique_and_stable_format() -> None:
    for code, rule in catalog().items():
        assert code.startswith("DIAG-") and len(code) == 9, code
        assert rule.name == rule.name.lower() and " " not in rule.name


@pytest.mark.parametrize("case", CASES, ids=[f"{r.code}-{i}-{ex['expect']}" for r, i, ex in CASES])
def test_example(case) -> None:
    rule, _, ex = case
    found = example_findings(rule, ex.get("run", {}))  # assembled and judged like a real run
    if ex["expect"] == "fire":
        assert found, f"{rule.code} did not fire on its positive example"
        assert all(f.message and f.evidence for f in found)
    else:
        assert not found, f"{rule.code} fired on its negative example: {found[0].message}"
