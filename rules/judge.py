"""The findings step of the one pipeline: the runtime rules on a run and the config rules on what ran,
the settings applied (thresholds, selection, suppressions), linked symptom -> cause, sorted.

``diag.pipeline.analyze`` builds its report on these findings; the catalog's examples
(:func:`rules.examples.example_findings`) are judged by the same function.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from .catalog import Rule
from .effective import config_findings
from .engine import evaluate, sort_findings
from .finding import Finding
from .links import link
from .runmodel import Run
from .settings import Settings

RUNTIME_SCOPES = ("run", "endpoint", "engine")


def judge(run: Run, settings: Settings, *, runtime: Iterable[Rule] | None = None,
          shown: Callable[[Finding], bool] | None = None) -> list[Finding]:
    """The findings on ``run``. ``runtime``: the runtime rules to evaluate (default: the settings'
    enabled ones); ``shown`` keeps a live report's findings to the settled ones."""
    rules = list(runtime) if runtime is not None else list(settings.rules(*RUNTIME_SCOPES).values())
    raw = evaluate(run, rules) + config_findings(run, settings.rules("recipe"))
    roles = {ep.id: ep.role for ep in run.endpoints.values()}
    findings = sort_findings(link(settings.apply(raw, report_unused=False), roles))
    return [f for f in findings if shown(f)] if shown is not None else findings


__all__ = ["RUNTIME_SCOPES", "judge"]
