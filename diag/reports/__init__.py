"""Report writers over :class:`rules.finding.Finding` lists, shared by ``diag check`` and ``diag tail``.

``render(fmt, findings, ...)`` dispatches to ``text`` (ruff-like lines + summary), ``json``,
``sarif`` (2.1.0) and ``github`` (workflow annotations).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from diag.rules.finding import Finding

from .common import Summary, sort_findings, summarize
from .github import render_github
from .jsonout import render_json
from .sarif import build_sarif, render_sarif
from .text import render_text

FORMATS = ("text", "json", "sarif", "github")


def render(fmt: str, findings: Iterable[Finding], *, files: int | None = None, suppressed: int = 0,
           notes: Sequence[str] = ()) -> str:
    """One report as a string (no trailing newline handling needed by callers: ends with one)."""
    items = sort_findings(findings)
    if fmt == "text":
        return render_text(items, files=files, suppressed=suppressed)
    if fmt == "json":
        return render_json(items, files=files, suppressed=suppressed, notes=notes)
    if fmt == "sarif":
        return render_sarif(items)
    if fmt == "github":
        return render_github(items)
    raise ValueError(f"unknown format {fmt!r} (one of {', '.join(FORMATS)})")


__all__ = ["FORMATS", "Summary", "build_sarif", "render", "render_github", "render_json", "render_sarif",
           "render_text", "sort_findings", "summarize"]
