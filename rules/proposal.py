"""What a fix or an experiment proposes: a change of named settings (an engine flag or an environment
variable of a role, a resource, a benchmark field) to a value, with the words that say it.

A finding's fix and a verdict's experiment are both :class:`Proposal`\\ s, so one checker
(:mod:`rules.advice`) can compare every proposal with the recipe and with what ran, and drop or rewrite
the changes already in place. Kept apart from the checker because findings carry proposals and the
checker reads what ran (which imports the config checks that make findings).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from diag.parsers.engine import KNOBS

KINDS = ("flag", "env", "resource", "benchmark")
RELATIONS = ("=", ">=", "<=")
TARGETS = ("value", "at_least", "at_most")   # a catalog `set`'s value keys, in RELATIONS order
# what a catalog entry's `when` may name; ``knob:<KNOB>``: the run's engine has a flag for that knob
CONDITIONS = ("hybrid", "unmeasured", *(f"knob:{k}" for k in KNOBS))
_SET_KEYS = frozenset((*KINDS, *TARGETS, "role", "roles", "accepts"))
ENTRY_KEYS = frozenset(("text", "set", "basis", "lead", "tail", "when"))   # a rule's [[rule.advice]]


@dataclass(frozen=True, slots=True)
class Change:
    """One named setting and the value a proposal gives it. ``accepts`` lists the values that count as
    in place for ``=`` (the first one is proposed; ``DYN_LOG`` takes ``error`` or ``warn``)."""

    kind: str                  # flag | env | resource | benchmark
    name: str                  # as written: max-num-batched-tokens, DYN_LOG, prefill_workers, concurrency
    value: Any                 # the value proposed
    role: str | None = None    # prefill | decode | agg; None: run-wide (resources, benchmark)
    relation: str = "="        # = | >= (at least) | <= (at most)
    where: str = ""            # where the recipe takes it: backend.vllm_config.prefill
    accepts: tuple[Any, ...] = ()

    @property
    def subject(self) -> str:
        """``prefill max-num-batched-tokens``, ``decode DYN_LOG``, ``the top benchmark concurrency``."""
        if self.kind == "benchmark":
            return f"the top benchmark {self.name}"
        if self.kind == "resource":
            return f"resources.{self.name}"
        return f"{self.role} {self.name}" if self.role else self.name


@dataclass(frozen=True, slots=True)
class Proposal:
    """A fix or an experiment: its words and the changes they propose (none: advice that names no value,
    such as "look at the stuck endpoint's log"). ``text`` is said while every change stands; with no
    ``text`` the words are written from the changes (``set `key: value` in `where```), between
    ``lead`` and ``tail``. ``basis`` says what the value stands for (``2 x ISL``)."""

    text: str = ""
    changes: tuple[Change, ...] = ()
    lead: str = ""
    tail: str = ""
    basis: str = ""
    id: str = ""               # the experiment's or the catalog entry's id, when it has one


def catalog_errors(table: Any, when: Any = None) -> list[str]:
    """What is wrong with a catalog ``set`` table and ``when`` condition (nothing: empty)."""
    errors = [] if when is None or when in CONDITIONS else [f"unknown condition {when!r} (known: {', '.join(CONDITIONS)})"]
    if table is None:
        return errors
    if not isinstance(table, dict):
        return [*errors, f"`set` must be a table, not {table!r}"]
    kinds = [k for k in KINDS if k in table]
    targets = [k for k in TARGETS if k in table]
    if unknown := sorted(set(table) - _SET_KEYS):
        errors.append(f"`set` has unknown keys {unknown}")
    if len(kinds) != 1:
        errors.append(f"`set` names one of {', '.join(KINDS)}: {table}")
    elif kinds[0] == "env" and (targets or not isinstance(table["env"], dict)):
        errors.append(f"`set.env` is a table of names to values, with no {', '.join(TARGETS)}: {table}")
    elif kinds[0] != "env" and len(targets) != 1:
        errors.append(f"`set` gives one of {', '.join(TARGETS)}: {table}")
    return errors


def yaml_value(value: Any) -> str:
    """A value as the recipe's YAML takes it: ``true``, ``16384``, ``"bfloat16"``."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(value)
    return f'"{value}"'


def default_where(kind: str, role: str | None) -> str:
    """Where srtctl's recipe takes a role's flag or variable when no recipe says: ``backend.vllm_config.decode``."""
    if kind == "env":
        return f"backend.{role}_environment"
    return f"backend.vllm_config.{role}" if kind == "flag" else "resources"


def words(changes: tuple[Change, ...]) -> str:
    """The changes as what to type, one clause per place: ``set `a: 1`, `b: "x"` in `backend.vllm_config.decode```."""
    places: dict[str, list[str]] = {}
    for c in changes:
        where = c.where or default_where(c.kind, c.role)
        places.setdefault(where, []).append(f"`{c.name}: {yaml_value(c.value)}`")
    return "; ".join(f"set {', '.join(keys)} in `{where}`" for where, keys in places.items())


def said(p: Proposal, changes: tuple[Change, ...] | None = None) -> str:
    """A proposal's words with ``changes`` standing (default: all of them): its text when all stand, else
    the changes written out between its lead and tail."""
    standing = p.changes if changes is None else changes
    if p.text and (len(standing) == len(p.changes) or not p.changes):
        return p.text
    return f"{p.lead}{words(standing)}{p.tail}"


__all__ = ["CONDITIONS", "ENTRY_KEYS", "KINDS", "RELATIONS", "TARGETS", "Change", "Proposal", "catalog_errors",
           "default_where", "said", "words", "yaml_value"]
