"""A judged run's outcome and whether it fails ``--fail-on``: the one exit-status table of every command
that judges runs (``tail``, ``tail -f``, ``watch``, ``watch --once``, ``report``, ``index``). README's
"Exit status" shows it; tests/test_consistency.py checks the two agree.

The outcome is the run verdict's: each class names its own (``outcome`` in rules/catalog/verdicts.toml).
``invalid``: the measurement cannot be used; ``startup-stuck``: the run never served; ``bottleneck``: a
side limits the run (every benchmark pushed to its limit ends at one, so only ``--fail-on warning``
fails it); ``healthy``: nothing limits but the client; ``unknown``: no verdict decides (a log excerpt
without stats), so the run's findings do, as ``diag check``'s do. A finding weighs on the exit status
through the verdict it decides, never beside it: two runs with one verdict exit alike.
"""

from __future__ import annotations

from collections.abc import Iterable

from .finding import severity_rank
from .verdict_catalog import verdict_catalog

FAIL_ON = ("error", "warning", "info", "never")   # --fail-on's levels, the default first
BY_FINDINGS = "findings"
# how severe each outcome (verdict_catalog.OUTCOMES) is on the findings' scale: --fail-on LEVEL fails the
# outcomes at LEVEL or above (None: none; BY_FINDINGS: the run's most severe finding)
SEVERITY: dict[str, str | None] = {"invalid": "error", "startup-stuck": "error", "bottleneck": "warning",
                                   "healthy": None, "unknown": BY_FINDINGS}


def outcome_of(verdict_class: str | None) -> str:
    """The outcome of a verdict class (no verdict: ``unknown``)."""
    if verdict_class is None:
        return "unknown"
    return verdict_catalog().get(verdict_class).outcome


def worst_severity(severities: Iterable[str]) -> str | None:
    """The most severe of the findings' severities (None without one)."""
    return max(severities, key=severity_rank, default=None)


def fails(outcome: str, worst: str | None, fail_on: str) -> bool:
    """Whether a run of ``outcome`` (``worst``: the severity of its most severe finding, None without
    one) fails ``--fail-on fail_on``; ``never`` fails nothing."""
    if fail_on == "never":
        return False
    level = SEVERITY[outcome]
    if level == BY_FINDINGS:
        level = worst
    return level is not None and severity_rank(level) >= severity_rank(fail_on)


__all__ = ["BY_FINDINGS", "FAIL_ON", "SEVERITY", "fails", "outcome_of", "worst_severity"]
