"""SARIF 2.1.0 output (GitHub code scanning, IDE viewers).

One run; ``tool.driver.rules`` describes every rule a result refers to (from the catalog, or a stub
for codes it does not know) and each result points at it by ``ruleId``/``ruleIndex``. Relative
paths are expressed against ``%SRCROOT%`` (the current directory); absolute ones as file URIs.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path, PurePosixPath
from typing import Any
from urllib.parse import quote

from diag import __version__
from diag.rules.catalog import Rule, catalog
from diag.rules.finding import Finding

SCHEMA_URI = "https://json.schemastore.org/sarif-2.1.0.json"


def _information_uri() -> str:
    """The project's home page from the installed metadata, else its package index page."""
    try:
        from importlib.metadata import metadata

        meta = metadata("diag")
        for entry in meta.get_all("Project-URL") or []:
            return str(entry.split(",", 1)[-1].strip())
        if meta.get("Home-page"):
            return str(meta["Home-page"])
    except Exception:  # not installed (running from a checkout)
        pass
    return "https://pypi.org/project/diag/"


INFORMATION_URI = _information_uri()
LEVELS = {"error": "error", "warning": "warning", "info": "note"}


def _descriptor(code: str, rule: Rule | None) -> dict[str, Any]:
    if rule is None:
        return {"id": code, "shortDescription": {"text": code}}
    help_text = rule.remediation + (f"\n\n{rule.docs}" if rule.docs else "")
    return {
        "id": rule.code,
        "name": rule.name,
        "shortDescription": {"text": rule.summary},
        "fullDescription": {"text": rule.why},
        "help": {"text": help_text, "markdown": f"**{rule.name}**: {rule.summary}\n\n{rule.why}\n\n"
                                                f"**Fix:** {rule.remediation}"},
        "defaultConfiguration": {"level": LEVELS.get(rule.severity, "warning")},
        "properties": {"tags": [rule.scope], "severity": rule.severity},
    }


def _artifact(path: str) -> dict[str, Any]:
    p = Path(path)
    if p.is_absolute():
        return {"uri": p.as_uri()}
    return {"uri": quote(PurePosixPath(p.as_posix()).as_posix()), "uriBaseId": "%SRCROOT%"}


def _result(f: Finding, index: int) -> dict[str, Any]:
    text = f.message + (f" Fix: {f.fix}" if f.fix else "")
    res: dict[str, Any] = {"ruleId": f.code, "ruleIndex": index, "level": LEVELS.get(f.severity, "warning"),
                           "message": {"text": text}}
    if f.location is not None:
        phys: dict[str, Any] = {"artifactLocation": _artifact(f.location.path)}
        if f.location.line:
            region: dict[str, Any] = {"startLine": f.location.line}
            if f.location.col:
                region["startColumn"] = f.location.col
            if f.location.end_line:
                region["endLine"] = f.location.end_line
            if f.location.end_col:
                region["endColumn"] = f.location.end_col
            phys["region"] = region
        res["locations"] = [{"physicalLocation": phys}]
    props: dict[str, Any] = {"severity": f.severity}
    if f.endpoint:
        props["endpoint"] = f.endpoint
    if f.fix:
        props["fix"] = f.fix
    if f.evidence:
        props["evidence"] = json.loads(json.dumps(f.evidence, default=str))
    res["properties"] = props
    return res


def build_sarif(findings: Sequence[Finding], rules: Mapping[str, Rule] | Iterable[Rule] | None = None, *,
                information_uri: str = INFORMATION_URI, src_root: Path | None = None) -> dict[str, Any]:
    """The SARIF log as a dict. ``rules`` (default: the catalog) supplies the rule descriptors."""
    known = dict(rules) if isinstance(rules, Mapping) else (
        {r.code: r for r in rules} if rules is not None else catalog())
    codes = list(dict.fromkeys(f.code for f in findings))
    index = {code: i for i, code in enumerate(codes)}
    root = (src_root or Path.cwd()).resolve()
    run = {
        "tool": {"driver": {"name": "diag", "version": __version__, "semanticVersion": __version__,
                            "informationUri": information_uri,
                            "rules": [_descriptor(c, known.get(c)) for c in codes]}},
        "originalUriBaseIds": {"%SRCROOT%": {"uri": root.as_uri().rstrip("/") + "/"}},
        "columnKind": "unicodeCodePoints",
        "results": [_result(f, index[f.code]) for f in findings],
    }
    return {"$schema": SCHEMA_URI, "version": "2.1.0", "runs": [run]}


def render_sarif(findings: Sequence[Finding], rules: Mapping[str, Rule] | Iterable[Rule] | None = None) -> str:
    return json.dumps(build_sarif(findings, rules), indent=2) + "\n"
