"""What the finding emitters share: where a finding is, and the counts of the summary (the order is
:func:`diag.rules.engine.sort_findings`)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field

from diag.rules.finding import SEVERITIES, Finding


def where(f: Finding) -> str:
    """``path:line:col`` when there is a location, else the endpoint (or ``-``)."""
    if f.location is not None:
        loc = f.location
        parts = [loc.path, str(loc.line or 1), str(loc.col or 1)]
        return ":".join(parts)
    return f.endpoint or "-"


@dataclass(frozen=True)
class Summary:
    total: int
    by_severity: dict[str, int] = field(default_factory=dict)
    by_code: dict[str, int] = field(default_factory=dict)
    files: int | None = None
    files_with_findings: int = 0
    suppressed: int = 0

    def to_dict(self) -> dict[str, object]:
        return {"total": self.total, "by_severity": self.by_severity, "by_code": self.by_code,
                "files": self.files, "files_with_findings": self.files_with_findings,
                "suppressed": self.suppressed}


def summarize(findings: Iterable[Finding], files: int | None = None, suppressed: int = 0) -> Summary:
    items = list(findings)
    sev = Counter(f.severity for f in items)
    return Summary(len(items), {s: sev.get(s, 0) for s in reversed(SEVERITIES)},
                   dict(sorted(Counter(f.code for f in items).items())), files,
                   len({f.location.path for f in items if f.location}), suppressed)
