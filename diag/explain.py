"""A rule's full entry as Markdown: what ``diag explain`` prints and the TUI's explain screen shows."""

from __future__ import annotations

import json
import re
from typing import Any

from diag.rules.catalog import NO_HEALTH, get


def toml_value(v: Any) -> str:
    """A threshold as diag.toml takes it (``[rules.CODE]``): ``8``, ``"warning"``, ``["45357"]``,
    ``{ process = 900 }``; shown as code, so a number keeps no separators."""
    if isinstance(v, dict):
        keys = (k if re.fullmatch(r"[A-Za-z0-9_-]+", k) else json.dumps(k) for k in v)
        return "{ " + ", ".join(f"{k} = {toml_value(x)}" for k, x in zip(keys, v.values(), strict=True)) + " }"
    if isinstance(v, list | tuple):
        return "[" + ", ".join(toml_value(x) for x in v) + "]"
    return json.dumps(v, ensure_ascii=False)


def explain_text(code: str) -> str:
    """The full entry of a rule (full or short code) as Markdown; raises CatalogError when unknown."""
    r = get(code)
    lines = [f"# {r.code} {r.name}", "", f"**severity** {r.severity} · **scope** {r.scope} · "
             f"**template** `{r.template}`", "", r.summary, "", "## Why", "", r.why, "", "## What to change", "",
             r.remediation]
    if r.for_s or r.keep_firing_for_s or r.params:
        lines += ["", "## Thresholds", ""]
        if r.for_s:
            lines.append(f"- `for`: {r.for_s:,g} s")
        if r.keep_firing_for_s:
            lines.append(f"- `keep_firing_for`: {r.keep_firing_for_s:,g} s")
        lines += [f"- `{k}`: `{toml_value(v)}`" for k, v in r.params.items()]
        lines += ["", f"Override in diag.toml: `[rules.{r.code}]` with any of these keys."]
    if r.health or r.consequence_of:
        lines += ["", "## Health", ""]
        if r.health == NO_HEALTH:
            lines.append("- colours no endpoint: it checks what the recipe asks of the endpoint, not how it runs")
        elif r.health:
            lines.append(f"- an endpoint this rule names shows {r.health}")
        if r.consequence_of:
            lines.append(f"- marked as a likely consequence when it starts after {', '.join(r.consequence_of)} "
                         "on another endpoint")
    if r.docs:
        lines += ["", r.docs]
    return "\n".join(lines)
