"""The types and ranges of rule parameters (``rules/catalog/params.toml``) and the check of one value.

Every parameter of every catalog rule (and ``for``, ``keep_firing_for``, ``severity``) has a kind: a
percentage 0-100, a fraction, a count, a duration (seconds, or a Prometheus-style ``2m`` / ``1m30s``
string converted to seconds), a severity, a list of strings ... ``coerce`` turns a configured value into
the one a rule uses or says, in one line, what was expected and what it got.
"""

from __future__ import annotations

import math
import tomllib
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any


@dataclass(frozen=True)
class ParamKind:
    name: str
    type: str                      # number | integer | duration | bool | string | choice | strings | table | fixed
    doc: str
    min: float | None = None
    max: float | None = None
    values: Any = None             # choice: the allowed values; table: the kind of each value

    def describe(self) -> dict[str, Any]:
        """The kind as ``diag rules --format json`` shows it."""
        out: dict[str, Any] = {"kind": self.name, "type": self.type, "doc": self.doc}
        if self.min is not None:
            out["min"] = self.min
        if self.max is not None:
            out["max"] = self.max
        if self.values is not None:
            out["values"] = self.values
        return out


class ParamError(ValueError):
    """A value that does not fit its parameter's kind (the message says expected and got)."""


@cache
def _declarations() -> dict[str, Any]:
    text = resources.files("diag.rules").joinpath("catalog", "params.toml").read_text(encoding="utf-8")
    return tomllib.loads(text)


@cache
def kinds() -> dict[str, ParamKind]:
    """The kinds of params.toml by name."""
    return {name: ParamKind(name, k["type"], k.get("doc", ""), k.get("min"), k.get("max"), k.get("values"))
            for name, k in _declarations()["kind"].items()}


def kind_of(code: str, param: str) -> ParamKind | None:
    """The kind of ``param`` of rule ``code`` (None: undeclared)."""
    d = _declarations()
    name = d.get("rule_param", {}).get(code, {}).get(param) or d["param"].get(param)
    return kinds()[name] if name else None


def _got(value: Any) -> str:
    kind = ("a list" if isinstance(value, list) else "a table" if isinstance(value, dict)
            else "a boolean" if isinstance(value, bool) else "a string" if isinstance(value, str)
            else type(value).__name__)
    shown = repr(value) if not isinstance(value, dict | list) or len(repr(value)) <= 40 else repr(value)[:39] + "…"
    return f"{kind} {shown}" if isinstance(value, str | list | dict) else shown


def _bounded(kind: ParamKind, number: float, value: Any) -> float:
    if not math.isfinite(number) or (kind.min is not None and number < kind.min) or (
            kind.max is not None and number > kind.max):
        raise ParamError(f"expected {kind.doc}, got {_got(value)}")
    return number


def parse_duration(text: str) -> float:
    """Seconds in a Prometheus-style duration (imported late: the catalog stays light)."""
    from diag.parsers.promql import parse_duration as parse

    return parse(text)


def coerce(kind: ParamKind, value: Any) -> Any:
    """``value`` as the parameter holds it (durations in seconds), or ParamError."""
    t = kind.type
    expected = f"expected {kind.doc}, got {_got(value)}"
    if t == "fixed":
        raise ParamError(f"not a setting: {kind.doc}")
    if t in ("number", "integer"):
        if isinstance(value, bool) or not isinstance(value, int | float) or (
                t == "integer" and not float(value).is_integer()):
            hint = " (a duration string goes only where a duration does)" if _is_duration(value) else ""
            raise ParamError(expected + hint)
        number = _bounded(kind, float(value), value)
        return int(number) if t == "integer" else value
    if t == "duration":
        if isinstance(value, bool) or not isinstance(value, int | float | str):
            raise ParamError(expected)
        try:
            seconds = parse_duration(value) if isinstance(value, str) else float(value)
        except ValueError:
            raise ParamError(expected) from None
        seconds = _bounded(kind, seconds, value)
        return int(seconds) if seconds.is_integer() else seconds
    if t == "bool":
        if not isinstance(value, bool):
            raise ParamError(expected)
        return value
    if t == "string":
        if not isinstance(value, str):
            raise ParamError(expected)
        return value
    if t == "choice":
        if value not in kind.values:
            raise ParamError(f"expected one of {', '.join(kind.values)}, got {_got(value)}")
        return value
    if t == "strings":
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise ParamError(expected)
        return value
    if t == "table":
        if not isinstance(value, dict):
            raise ParamError(expected)
        inner = kinds()[value_kind] if (value_kind := kind.values) in kinds() else None
        out = {}
        for k, v in value.items():
            try:
                out[k] = coerce(inner, v) if inner else v
            except ParamError as exc:
                raise ParamError(f"{k}: {exc}") from None
        return out
    raise ParamError(f"unknown parameter type {t!r}")


def _is_duration(value: Any) -> bool:
    if not isinstance(value, str):
        return False
    try:
        parse_duration(value)
    except ValueError:
        return False
    return True
