"""The emitter family: every output of diag, rendered from what ``diag.pipeline.analyze`` computed (a
:class:`diag.report.Report`, the findings of ``check``, the sweep document of ``report``). Emitters render;
they compute nothing, and they format figures only through :mod:`diag.rules.present`.

========  ================================================  ==========================
format    for                                                commands
========  ================================================  ==========================
text      people: rich text sized to the terminal           tail, check, report, index, runs
json      one document, schema-checked (``diag/schemas/``)  tail, check, report, index, runs
csv       the rows of a table                                runs
jsonl     a stream of records, findings, heartbeats          tail
sarif     SARIF 2.1.0 (code scanning, IDE viewers)           tail, check
github    GitHub Actions workflow annotations               tail, check
markdown  a postmortem to paste into an issue (GFM, bounded)  tail
html      one self-contained page                           report
========  ================================================  ==========================

Every JSON document and the first JSONL line carry the same envelope: ``tool``, ``version`` and ``schema``
(the name of the JSON Schema the output validates against).
"""

from __future__ import annotations

import json
from typing import Any

from diag import __version__

TAIL_SCHEMA = "diag-tail-1"
JSONL_SCHEMA = "diag-tail-jsonl-1"
CHECK_SCHEMA = "diag-check-1"
RULES_SCHEMA = "diag-rules-1"

FORMATS: dict[str, tuple[str, ...]] = {
    "tail": ("text", "json", "jsonl", "sarif", "github", "markdown"),
    "check": ("text", "json", "sarif", "github"),
    "report": ("text", "json", "html"),
    "index": ("text", "json"),
    "runs": ("text", "json", "csv"),
}


def envelope(schema: str) -> dict[str, str]:
    return {"tool": "diag", "version": __version__, "schema": schema}


def dumps(obj: Any, indent: int | None = None) -> str:
    """JSON as every emitter writes it (times as ISO strings, UTF-8 kept)."""
    return json.dumps(obj, default=str, ensure_ascii=False, indent=indent)
