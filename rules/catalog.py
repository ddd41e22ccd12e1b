"""The rule catalog: rules are data (TOML files in ``rules/catalog/``) over a few coded templates.

Each ``[[rule]]`` entry has ``code`` (stable, part of the interface), kebab ``name``,
``severity``, ``scope`` (run | endpoint | engine | recipe), ``template`` and its ``params``,
optional ``for`` / ``keep_firing_for`` windows (seconds), ``summary`` (one line), ``why``,
``remediation``, the fix (``fix`` words, or ``[[rule.advice]]`` proposals :mod:`rules.advice` checks
against what ran) and ``examples`` (inputs with the expected outcome, run by the tests).
"""

from __future__ import annotations

import dataclasses
import tomllib
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from importlib.abc import Traversable
from typing import Any

from diag.parsers import engines
from diag.parsers.engine import render_all

from .finding import SEVERITIES
from .proposal import ENTRY_KEYS, catalog_errors

SCOPES = ("run", "endpoint", "engine", "recipe")


@dataclass(frozen=True)
class Rule:
    code: str
    name: str
    severity: str
    scope: str
    template: str
    summary: str
    why: str
    remediation: str
    params: dict[str, Any] = field(default_factory=dict, hash=False, compare=False)
    for_s: float = 0.0
    keep_firing_for_s: float = 0.0
    examples: tuple[dict[str, Any], ...] = field(default=(), hash=False, compare=False)
    docs: str = ""
    health: str | None = None                # endpoint health a finding of this rule implies
    consequence_of: tuple[str, ...] = ()     # rules whose earlier finding elsewhere explains this one
    caused_by: tuple[dict[str, Any], ...] = field(default=(), hash=False, compare=False)  # config causes
    fix: str = ""                            # one line a finding prints as its fix, when it has no own fix
    advice: tuple[dict[str, Any], ...] = field(default=(), hash=False, compare=False)  # checked proposals (rules.advice)
    owner: str | None = None                 # who owns the fix of a root cause it names (rules.postmortem)

    def with_params(self, overrides: dict[str, Any]) -> Rule:
        """A copy with thresholds overridden (``for``/``keep_firing_for`` included)."""
        params = dict(self.params)
        for_s, keep = self.for_s, self.keep_firing_for_s
        for k, v in overrides.items():
            if k == "for":
                for_s = float(v)
            elif k == "keep_firing_for":
                keep = float(v)
            elif k == "severity":
                continue
            else:
                params[k] = v
        sev = overrides.get("severity", self.severity)
        return dataclasses.replace(self, severity=sev, params=params, for_s=for_s, keep_firing_for_s=keep)


class CatalogError(ValueError):
    pass


def _load_rule(entry: dict[str, Any], source: str) -> Rule:
    missing = [k for k in ("code", "name", "severity", "scope", "template", "summary", "why", "remediation")
               if k not in entry]
    if missing:
        raise CatalogError(f"{source}: rule {entry.get('code', '?')} lacks {', '.join(missing)}")
    if entry["severity"] not in SEVERITIES:
        raise CatalogError(f"{source}: rule {entry['code']} has unknown severity {entry['severity']!r}")
    if entry["scope"] not in SCOPES:
        raise CatalogError(f"{source}: rule {entry['code']} has unknown scope {entry['scope']!r}")
    for advice in entry.get("advice", ()):
        errors = catalog_errors(advice.get("set"), advice.get("when"))
        if unknown := sorted(set(advice) - ENTRY_KEYS):
            errors.append(f"unknown keys {unknown}")
        if not (advice.get("text") or advice.get("set")):
            errors.append("an entry needs `text` or `set`")
        if errors:
            raise CatalogError(f"{source}: rule {entry['code']} advice: {'; '.join(errors)}")
    return Rule(
        code=entry["code"], name=entry["name"], severity=entry["severity"], scope=entry["scope"],
        template=entry["template"], summary=entry["summary"].strip(), why=entry["why"].strip(),
        remediation=entry["remediation"].strip(), params=dict(entry.get("params", {})),
        for_s=float(entry.get("for", 0)), keep_firing_for_s=float(entry.get("keep_firing_for", 0)),
        examples=tuple(entry.get("examples", ())), docs=entry.get("docs", ""),
        health=_health(entry, source), consequence_of=tuple(entry.get("consequence_of", ())),
        caused_by=tuple(entry.get("caused_by", ())), fix=entry.get("fix", "").strip(),
        advice=tuple(entry.get("advice", ())), owner=_owner(entry, source),
    )


# An endpoint's health, worst first. LIMITS is the verdict's (the endpoint is on the side that limits the
# run); a finding implies DOWN, CRIT or WARN; the others are the endpoint's own data (diag.report).
HEALTH_STATES = ("DOWN", "CRIT", "LIMITS", "WARN", "STALE", "NO STATS", "READY", "OK")
FINDING_HEALTH = ("DOWN", "CRIT", "WARN")
NO_HEALTH = "none"   # a rule about what the recipe asks of the endpoint, not its state: colours nothing


OWNERS = ("recipe", "engine", "infra", "benchmark", "unknown")   # who owns a root cause's fix


def _owner(entry: dict[str, Any], source: str) -> str | None:
    o = entry.get("owner")
    if o is not None and o not in OWNERS:
        raise CatalogError(f"{source}: rule {entry['code']} has unknown owner {o!r} (one of {', '.join(OWNERS)})")
    return o


def _health(entry: dict[str, Any], source: str) -> str | None:
    h = entry.get("health")
    if h is not None and h not in (*FINDING_HEALTH, NO_HEALTH):
        raise CatalogError(f"{source}: rule {entry['code']} has unknown health {h!r}")
    return h


def health_of(rule: Rule, severity: str) -> str | None:
    """The endpoint health a finding of ``rule`` at ``severity`` implies: the rule's ``health``, else CRIT
    for an error and WARN for a warning; none for a rule on the recipe (scope ``recipe``, or ``health =
    "none"``: a capacity check such as DIAG-K003 says what the recipe asks, not how the endpoint runs)."""
    if rule.scope == "recipe" or rule.health == NO_HEALTH:
        return None
    return rule.health or {"error": "CRIT", "warning": "WARN"}.get(severity)


def catalog() -> dict[str, Rule]:
    """All rules of every catalog file, core's and each engine adapter's, by code, in code order, their
    texts naming knobs as the engine being judged spells them (:func:`diag.parsers.engines.using`)."""
    return engine_catalog(engines.current().name)


@cache
def engine_catalog(engine: str | None) -> dict[str, Rule]:
    """:func:`catalog` with the texts' knob placeholders (``{knob.<name>}``) as ``engine`` spells them
    (None, or an engine not registered: the knobs' neutral descriptions)."""
    adapter = engines.get(engine)
    rules: dict[str, Rule] = {}
    for res, data in _catalog_files():
        for entry in data.get("rule", []):
            rule = _load_rule(render_all(entry, adapter), res.name)
            if rule.code in rules:
                raise CatalogError(f"{res.name}: duplicate rule code {rule.code}")
            rules[rule.code] = rule
    return dict(sorted(rules.items()))


def _catalog_files() -> list[tuple[Traversable, dict[str, Any]]]:
    """Every rule catalog, core's (by name) then each engine adapter's, with its parsed TOML."""
    core = sorted(resources.files("diag.rules").joinpath("catalog").iterdir(), key=lambda r: r.name)
    owned = [a.resource(rel) for a in engines.adapters() for rel in a.rule_catalogs]
    return [(res, tomllib.loads(res.read_text(encoding="utf-8"))) for res in [*core, *owned]
            if res.name.endswith(".toml")]


@cache
def bases() -> dict[str, str]:
    """The base recipes (YAML text) the config rules' examples mutate (``base = ...``): every rule catalog's
    ``[bases]``, core's and each engine adapter's, by name."""
    out: dict[str, str] = {}
    for res, data in _catalog_files():
        for name, text in data.get("bases", {}).items():
            if name in out:
                raise CatalogError(f"{res.name}: duplicate base recipe {name!r}")
            out[name] = text
    return out


def get(code: str) -> Rule:
    """A rule by its code, full (``DIAG-K001``) or short (``K001``, any case)."""
    c = code.strip().upper()
    try:
        return catalog()[c if c.startswith("DIAG-") else "DIAG-" + c]
    except KeyError:
        raise CatalogError(f"unknown rule code {code!r}") from None


def by_scope(*scopes: str) -> list[Rule]:
    return [r for r in catalog().values() if r.scope in scopes]
