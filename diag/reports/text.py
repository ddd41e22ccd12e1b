"""Human output, ruff-like: ``path:line:col: CODE [severity] message``, a fix line, a summary."""

from __future__ import annotations

from collections.abc import Sequence

from diag.rules.finding import Finding

from .common import summarize, where


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def render_text(findings: Sequence[Finding], *, files: int | None = None, suppressed: int = 0,
                show_fix: bool = True, summary: bool = True) -> str:
    lines: list[str] = []
    for f in findings:
        lines.append(f"{where(f)}: {f.code} [{f.severity}] {f.message}")
        if show_fix and f.fix:
            lines.append(f"    fix: {f.fix}")
    if summary:
        s = summarize(findings, files, suppressed)
        scope = f" in {_plural(files, 'file')}" if files is not None else ""
        hidden = f" ({suppressed} suppressed)" if suppressed else ""
        if s.total == 0:
            lines.append(f"All checks passed{scope}.{hidden}")
        else:
            parts = ", ".join(_plural(n, sev) for sev, n in s.by_severity.items() if n)
            lines.append(f"Found {_plural(s.total, 'finding')} ({parts}){scope}.{hidden}")
    return "\n".join(lines) + "\n"
