"""Machine output: one JSON object with the findings (``Finding.to_dict``) and a summary."""

from __future__ import annotations

import json
from collections.abc import Sequence

from diag import __version__
from diag.rules.finding import Finding

from .common import summarize


def render_json(findings: Sequence[Finding], *, files: int | None = None, suppressed: int = 0,
                notes: Sequence[str] = ()) -> str:
    doc = {
        "tool": "diag",
        "version": __version__,
        "schema": "diag-check-1",
        "summary": summarize(findings, files, suppressed).to_dict(),
        "findings": [f.to_dict() for f in findings],
        "notes": list(notes),
    }
    return json.dumps(doc, indent=2, default=str) + "\n"
