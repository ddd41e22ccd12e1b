"""Findings: what a rule reports, with the evidence that tripped it and where it points."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from .proposal import Proposal

SEVERITIES = ("info", "warning", "error")


def severity_rank(sev: str) -> int:
    """info < warning < error; unknown names rank below info."""
    try:
        return SEVERITIES.index(sev)
    except ValueError:
        return -1


@dataclass(frozen=True, slots=True)
class Location:
    path: str
    line: int | None = None
    col: int | None = None
    end_line: int | None = None
    end_col: int | None = None

    def __str__(self) -> str:
        parts = [self.path]
        if self.line is not None:
            parts.append(str(self.line))
            if self.col is not None:
                parts.append(str(self.col))
        return ":".join(parts)


@dataclass(frozen=True, slots=True)
class Finding:
    code: str
    name: str
    severity: str
    message: str
    endpoint: str | None = None
    location: Location | None = None
    first_ts: datetime | None = None
    last_ts: datetime | None = None
    open: bool = False
    evidence: dict[str, Any] = field(default_factory=dict, hash=False, compare=False)
    fix: str | None = None
    caused_by: tuple[dict[str, Any], ...] = field(default=(), hash=False, compare=False)  # config findings
    explains: tuple[dict[str, Any], ...] = field(default=(), hash=False, compare=False)   # runtime findings
    advice: tuple[Proposal, ...] = field(default=(), hash=False, compare=False)  # what ``fix`` proposes

    def to_dict(self) -> dict[str, Any]:
        loc = self.location
        return {
            "code": self.code,
            "name": self.name,
            "severity": self.severity,
            "endpoint": self.endpoint,
            "message": self.message,
            "first_ts": self.first_ts.isoformat() if self.first_ts else None,
            "last_ts": self.last_ts.isoformat() if self.last_ts else None,
            "open": self.open,
            "evidence": self.evidence,
            "location": None if loc is None else {
                "path": loc.path, "line": loc.line, "col": loc.col,
                "end_line": loc.end_line, "end_col": loc.end_col,
            },
            "fix": self.fix,
            "caused_by": list(self.caused_by),
            "explains": list(self.explains),
        }
