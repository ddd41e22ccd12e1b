"""Advice checked against what ran: every fix and experiment is a :class:`~rules.proposal.Proposal` of
setting changes, and one checker compares each change with the recipe and with the effective config (what
ran, :mod:`rules.effective`) before anyone reads it.

A change already in place is dropped and said (``prefill max-num-batched-tokens is already 16,384 = 2 x
ISL``); one the recipe already asks for while something else ran is rewritten to find what overrides it;
the rest stand. ``diag.pipeline.analyze`` builds the :class:`RunConfig` once, checks the findings' fixes,
hands it to the verdict (whose experiments are checked the same way), then gives each finding a verdict
rests on that verdict's advice (:func:`rules.verdict.with_verdict_advice`), so the verdict's ``next`` and
the findings' fixes never disagree.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from diag.parsers.flags import normalize_flag
from diag.parsers.recipe import Recipe

from .catalog import Rule, catalog
from .effective import OVERRIDERS, Ran, canon, engine_defaults, what_ran
from .finding import Finding
from .knowledge import family_for
from .present import shown
from .proposal import KINDS, RELATIONS, TARGETS, Change, Proposal, said
from .recipe_support import env_where, where
from .runmodel import Run, recipe_engine

RECIPE_ROLES = ("prefill", "decode", "agg")   # the roles a recipe configures (not ``unknown``)


# ------------------------------------------------------------------ what the recipe says and what ran
@dataclass(frozen=True)
class RunConfig:
    """The settings a proposal is checked against: the recipe as written (its first job) and what ran
    (flags and environment the logs show, the endpoints per role, the top concurrency sent)."""

    recipe: Recipe | None
    ran: Mapping[str, Ran] = field(default_factory=dict)
    workers: Mapping[str, int] = field(default_factory=dict)
    top_concurrency: int | None = None
    defaults: Mapping[str, Any] = field(default_factory=dict)   # the engine's certain flag defaults

    @classmethod
    def of_run(cls, run: Run) -> RunConfig:
        workers: dict[str, int] = {}
        for ep in run.endpoints.values():
            workers[ep.role] = workers.get(ep.role, 0) + 1
        return cls(run.recipe, what_ran(run), workers, run.top_concurrency(), engine_defaults(run.engine))

    @classmethod
    def of_recipe(cls, recipe: Recipe) -> RunConfig:
        """A recipe on its own (``diag check``): what it says is what runs."""
        return cls(recipe, top_concurrency=max(recipe.benchmark.concurrencies, default=None),
                   defaults=engine_defaults(recipe_engine(recipe)))

    def written(self, c: Change) -> Any:
        """The value the recipe sets (None: it does not say)."""
        r = self.recipe
        if r is None:
            return None
        if c.kind == "benchmark":
            return max(r.benchmark.concurrencies, default=None) if c.name == "concurrency" else None
        if c.kind == "resource":
            res = r.data.get("resources")
            return res.get(c.name) if isinstance(res, Mapping) else None
        role = r.roles.get(c.role or "")
        if role is None:
            return None
        if c.kind == "env":
            return role.env_value(c.name)
        flag = role.flag(c.name)
        return None if flag is None else flag.value

    def current(self, c: Change) -> Any:
        """The value in effect: what ran, else what the recipe sets, else the engine's default (flags)."""
        if c.kind == "benchmark":
            return self.top_concurrency if c.name == "concurrency" else None
        if c.kind == "resource":
            role = c.name.removesuffix("_workers")
            return self.workers.get(role) if c.name.endswith("_workers") and role in self.workers else self.written(c)
        ran = self.ran.get(c.role or "")
        if c.kind == "env":
            return ran.env[c.name][0] if ran is not None and c.name in ran.env else self.written(c)
        key, _ = normalize_flag(c.name)
        if ran is not None and key in ran.flags:
            return ran.flags[key][0]
        have = self.written(c)
        return have if have is not None else self.defaults.get(key)

    def where(self, c: Change) -> str:
        """Where the recipe takes the change (its own paths when it has the role)."""
        role = self.recipe.roles.get(c.role or "") if self.recipe is not None else None
        if c.where or role is None or c.kind not in ("flag", "env"):
            return c.where
        return where(role) if c.kind == "flag" else env_where(role)


def _target(c: Change) -> Any:
    """The proposed value as the setting holds it (``no-x: true`` is ``x`` off)."""
    if c.kind == "flag" and isinstance(c.value, bool) and normalize_flag(c.name)[1]:
        return not c.value
    return c.value


def _number(x: Any) -> float | None:
    try:
        return float(x)
    except (TypeError, ValueError):
        return None


def satisfied(c: Change, value: Any) -> bool:
    """Whether ``value`` already is what ``c`` proposes (None: unknown, never)."""
    if value is None:
        return False
    if c.relation == "=":
        want = [_target(dataclasses.replace(c, value=a)) for a in c.accepts] or [_target(c)]
        return canon(value).lower() in {canon(w).lower() for w in want}
    have, want = _number(value), _number(c.value)
    if have is None or want is None:
        return False
    return have >= want if c.relation == ">=" else have <= want


def _value(x: Any) -> str:
    """A setting's value in prose: a number grouped, a bool as YAML writes it."""
    if isinstance(x, bool):
        return "true" if x else "false"
    if isinstance(x, str) and _number(x) is not None and x.strip().lstrip("-").isdigit():
        x = int(x)
    return shown(x)


# ------------------------------------------------------------------ the check
@dataclass(frozen=True)
class Note:
    """A change already in place: ``prefill max-num-batched-tokens is already 16,384 = 2 x ISL``."""

    change: Change
    value: Any
    basis: str = ""

    def clause(self) -> str:
        """What follows the setting's name: `` is already 16,384 = 2 x ISL``."""
        c = self.change
        equal = canon(self.value) == canon(_target(c))
        said_value = f" is already {_value(self.value)}"
        if equal:
            return said_value + (f" = {self.basis}" if self.basis else "")
        return said_value + f" {c.relation} {self.basis or _value(c.value)}"


@dataclass(frozen=True)
class Checked:
    """A proposal after the check: the changes that stand, those in place, those the recipe already asks
    for while something else ran (the recipe's value, the value that ran)."""

    proposal: Proposal
    standing: tuple[Change, ...]
    in_place: tuple[Note, ...]
    overridden: tuple[tuple[Change, Any, Any], ...]

    @property
    def stands(self) -> bool:
        """Something is left to do: a change to make, an override to find, or advice with no setting."""
        return bool(self.standing or self.overridden or not self.proposal.changes)

    @property
    def text(self) -> str:
        parts = [said(self.proposal, self.standing)] if self.standing or not self.proposal.changes else []
        parts += [f"the recipe already sets {c.subject} {_value(have)} but {_value(ran)} ran: find what "
                  f"overrides it ({OVERRIDERS})" for c, have, ran in self.overridden]
        return "; ".join(parts)


def check(p: Proposal, config: RunConfig) -> Checked:
    """Compare each change of ``p`` with what is in effect and with the recipe."""
    placed = tuple(dataclasses.replace(c, where=config.where(c)) for c in p.changes)
    standing: list[Change] = []
    in_place: list[Note] = []
    overridden: list[tuple[Change, Any, Any]] = []
    for c in placed:
        now, have = config.current(c), config.written(c)
        if satisfied(c, now):
            in_place.append(Note(c, now, p.basis))
        elif satisfied(c, have):
            overridden.append((c, have, now))
        else:
            standing.append(c)
    return Checked(dataclasses.replace(p, changes=placed), tuple(standing), tuple(in_place), tuple(overridden))


def notes_text(notes: Iterable[Note]) -> list[str]:
    """Changes in place, one clause per setting and value across roles: ``VLLM_LOGGING_COLOR is already 0
    on prefill and decode``."""
    groups: dict[tuple[str, str, str], list[str]] = {}
    for n in notes:
        c = n.change
        name = c.subject if c.kind in ("resource", "benchmark") or not c.role else c.name
        groups.setdefault((c.kind, name, n.clause()), []).append(c.role or "")
    out = []
    for (kind, name, rest), roles in groups.items():
        roles = list(dict.fromkeys(r for r in roles if r))
        if kind in ("resource", "benchmark") or not roles:
            out.append(f"{name}{rest}")
        elif len(roles) == 1:
            out.append(f"{roles[0]} {name}{rest}")
        else:
            out.append(f"{name}{rest} on {' and '.join(roles)}")
    return out


def fix_text(actions: Sequence[str], notes: Sequence[str]) -> str | None:
    """A fix from its standing actions (alternatives, in order) and what is already in place."""
    if not actions and not notes:
        return None
    head = "; or ".join(actions) if actions else "nothing to change"
    return "; ".join([head, *notes]) if actions else f"{head}: {'; '.join(notes)}"


# ------------------------------------------------------------------ proposals from the catalogs
def holds(cond: str | None, run: Run, concurrency: int | None = None) -> bool:
    """A catalog condition on the run (``when``): ``hybrid`` (a hybrid Mamba/attention model), ``unmeasured``
    (judged at no benchmark point, and no point has a result: the run never got to measure), ``knob:<knob>``
    (the run's engine has a flag for the knob)."""
    if cond is None:
        return True
    if cond.startswith("knob:"):
        return run.engine.knob(cond.removeprefix("knob:")) is not None
    if cond == "unmeasured":
        return concurrency is None and not run.benchmark
    if cond == "hybrid":
        names = [run.recipe.model_path if run.recipe else None, run.job.model_path if run.job else None]
        names += [str(ep.facts.get("architecture") or "") for ep in run.endpoints.values()]
        fam = family_for(*names)
        return bool(fam and fam.hybrid)
    raise ValueError(f"unknown advice condition {cond!r}")


def _filled(value: Any, ctx: Mapping[str, Any]) -> Any:
    """A catalog value with the run's figures put in (``{two_isl}`` -> 16384); KeyError when one lacks."""
    if not isinstance(value, str) or "{" not in value:
        return value
    text = value.format_map(ctx)
    num = _number(text)
    return text if num is None else int(num) if num.is_integer() else num


def changes_of(table: Mapping[str, Any] | None, ctx: Mapping[str, Any], role: str | None) -> tuple[Change, ...]:
    """The changes a catalog ``set`` table names: one of ``flag`` / ``resource`` / ``benchmark`` (a name,
    with ``value``, ``at_least`` or ``at_most``) or ``env`` (names to values, a list meaning any of
    them), for ``role`` (the table's, else the finding's), or for each of ``roles`` (``"each"``: every
    role the run has, ``ctx["roles"]``)."""
    if not table:
        return ()
    kind = next(k for k in KINDS if k in table)   # the catalogs are checked at load (proposal.catalog_errors)
    roles = table.get("roles") or [table.get("role", role)]
    if roles == "each" or roles == [None]:   # no role of its own: each role the run has
        roles = ctx["roles"]
    if kind == "env":
        out = []
        for r in roles:
            for name, v in table["env"].items():
                accepts = tuple(v) if isinstance(v, list) else ()
                out.append(Change("env", name, accepts[0] if accepts else v, r, accepts=accepts))
        return tuple(out)
    relation, value = next(((rel, table[key]) for rel, key in zip(RELATIONS, TARGETS, strict=True) if key in table),
                           ("=", None))
    run_wide = kind in ("resource", "benchmark")
    accepts = tuple(table.get("accepts", ()))
    return tuple(Change(kind, table[kind], _filled(value, ctx), None if run_wide else r, relation, accepts=accepts)
                 for r in ([None] if run_wide else roles))


def rule_proposals(rule: Rule, run: Run, role: str | None, ctx: Mapping[str, Any]) -> list[Proposal]:
    """A runtime rule's advice (``[[rule.advice]]``: ``text``, ``set``, ``basis``, ``lead``, ``tail``,
    ``when``) for a finding on ``role`` (None: a run-wide finding, or a role no recipe has): the entries
    whose condition holds and whose figures the run has (``{on_role}`` and the run's figures fill the text)."""
    role = role if role in RECIPE_ROLES else None
    out = []
    for i, entry in enumerate(rule.advice):
        if not holds(entry.get("when"), run):
            continue
        try:
            changes = changes_of(entry.get("set"), ctx, role)
            text = entry.get("text", "").format_map({**ctx, "on_role": f" on {role}" if role else ""})
        except KeyError:
            continue
        out.append(Proposal(text, changes, entry.get("lead", ""), entry.get("tail", ""), entry.get("basis", ""),
                            f"{rule.code}-{i + 1}"))
    return out


def run_context(run: Run) -> dict[str, Any]:
    """The run's figures any advice may name: ``{isl}``, ``{two_isl}``, and its ``roles`` (a run with
    none a recipe names, a pasted log: prefill and decode, as srtctl's P/D recipes have)."""
    isl, _ = run.isl_osl()
    have = {ep.role for ep in run.endpoints.values()}
    roles = [r for r in RECIPE_ROLES if r in have] or ["prefill", "decode"]
    return {"roles": roles} | ({"isl": isl, "two_isl": 2 * isl} if isl else {})


# ------------------------------------------------------------------ findings
def check_fixes(findings: Iterable[Finding], config: RunConfig, run: Run | None = None) -> list[Finding]:
    """Every finding's fix checked: its own proposals (a config check's), else its rule's advice."""
    rules = catalog()
    roles = {ep.id: ep.role for ep in run.endpoints.values()} if run is not None else {}
    ctx = run_context(run) if run is not None else {}
    out = []
    for f in findings:
        proposals = list(f.advice)
        rule = rules.get(f.code)
        if not proposals and rule is not None and rule.advice and run is not None:
            proposals = rule_proposals(rule, run, roles.get(f.endpoint or "", f.endpoint), ctx)
        if proposals:
            results = [check(p, config) for p in proposals]
            f = dataclasses.replace(f, fix=fix_text([r.text for r in results if r.stands],
                                                    notes_text(n for r in results for n in r.in_place)),
                                    advice=tuple(proposals))
        out.append(f)
    return out


__all__ = ["RECIPE_ROLES", "Checked", "Note", "RunConfig", "changes_of", "check", "check_fixes", "fix_text", "holds",
           "notes_text", "rule_proposals", "run_context", "satisfied"]
