"""Shared pieces of the config checks: the check registry, finding construction, role helpers."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any

from diag.parsers.recipe import Recipe, Role
from diag.parsers.recipe_yaml import Mark, mark_of

from .catalog import Rule
from .finding import Finding, Location
from .knowledge import Family, family_for
from .proposal import Change, Proposal, said

Check = Callable[[Recipe, Rule], Iterable[Finding]]
CHECKS: dict[str, Check] = {}


def check(template: str) -> Callable[[Check], Check]:
    """Register a check function under the catalog ``template`` name."""

    def wrap(fn: Check) -> Check:
        CHECKS[template] = fn
        return fn

    return wrap


def finding(rule: Rule, recipe: Recipe, message: str, mark: Mark | None, *, role: Role | None = None,
            fix: str | Proposal | None = None, severity: str | None = None, **evidence: Any) -> Finding:
    """A config finding; a fix that is a :class:`Proposal` is kept with it, for the advice check."""
    line, col = mark or (None, None)
    path = getattr(mark, "path", None) or recipe.path  # a SourceMark: the flag ran, written in a log
    ev = {"job": recipe.job, **({"variant": recipe.variant} if recipe.variant else {}), **evidence}
    prefix = f"{role.name}: " if role is not None and not message.startswith(role.name) else ""
    return Finding(code=rule.code, name=rule.name, severity=severity or rule.severity,
                   message=prefix + message, endpoint=role.name if role is not None else None,
                   location=Location(path, line, col), evidence=ev,
                   fix=said(fix) if isinstance(fix, Proposal) else fix,
                   advice=(fix,) if isinstance(fix, Proposal) else ())


def flag_mark(recipe: Recipe, role: Role, *names: str) -> Mark | None:
    """The flag's key if the role sets it, else the role's flag block (or its nearest parent)."""
    f = role.flag(*names)
    if f is not None and f.mark is not None:
        return f.mark
    return role.mark or mark_of(recipe.data, role.flags_path)


def env_mark(recipe: Recipe, role: Role, name: str) -> Mark | None:
    e = role.env.get(name)
    if e is not None and e.mark is not None:
        return e.mark
    return mark_of(recipe.data, role.env_path)


def where(role: Role) -> str:
    return ".".join(map(str, role.flags_path))


def env_where(role: Role) -> str:
    return ".".join(map(str, role.env_path))


def set_flag(role: Role, key: str, value: Any, tail: str = "", *, relation: str = "=", lead: str = "",
             accepts: tuple[Any, ...] = ()) -> Proposal:
    """Set a flag of ``role``'s engine (``relation`` ``>=``: at least ``value``)."""
    return Proposal(changes=(Change("flag", key, value, role.name, relation, where(role), accepts),),
                    lead=lead, tail=tail)


def set_env(role: Role, values: dict[str, tuple[str, ...]], tail: str = "") -> Proposal:
    """Set variables of ``role``'s environment, each to the first of the values that would do."""
    return Proposal(changes=tuple(Change("env", name, ok[0], role.name, "=", env_where(role), ok)
                                  for name, ok in values.items()), tail=tail)


def pd_pair(recipe: Recipe) -> tuple[Role, Role] | None:
    """(prefill, decode) for a disaggregated recipe that has both."""
    p, d = recipe.roles.get("prefill"), recipe.roles.get("decode")
    if recipe.disaggregated and p is not None and d is not None:
        return p, d
    return None


def roles(recipe: Recipe, *names: str) -> Iterator[Role]:
    for name in names:
        r = recipe.roles.get(name)
        if r is not None:
            yield r


def truthy(value: Any) -> bool | None:
    """A flag value as a boolean (None when it is not boolean-like)."""
    if isinstance(value, bool):
        return value
    if isinstance(value, int | float):
        return value != 0
    if isinstance(value, str):
        low = value.strip().lower()
        if low in ("true", "1", "yes", "on"):
            return True
        if low in ("false", "0", "no", "off"):
            return False
    return None


def as_int(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def dynamo(recipe: Recipe) -> bool:
    """Workers run under Dynamo (``python -m dynamo.<engine>``): srtctl's default ``frontend.type: dynamo``."""
    return recipe.frontend_type == "dynamo"


SEVERITY_ORDER = ("info", "warning", "error")


def at_most(severity: str, cap: str) -> str:
    """The catalog policy: a finding that rests on an assumption is at most a warning."""
    return cap if SEVERITY_ORDER.index(severity) > SEVERITY_ORDER.index(cap) else severity


def family_of(recipe: Recipe) -> Family | None:
    """The model family (cached on the recipe; ``False`` marks 'looked up, none')."""
    if recipe.family is None:
        recipe.family = family_for(*recipe.model_names) or False
    return recipe.family or None
