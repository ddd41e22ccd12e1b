"""What diag knows about vLLM builds (data in ``data/versions.toml``): the P/D fixes and the releases and
nightlies that carry them, the vLLM inside Dynamo's runtime images, behaviour changes by release, and
vLLM's GPU-dependent defaults. Core reaches these through the adapter's hooks (``hooks_module``).
"""

from __future__ import annotations

import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

from diag.rules.knowledge import Gpu, Version, fmt_version, parse_version


@cache
def _data(name: str) -> dict[str, Any]:
    return tomllib.loads(resources.files(__package__).joinpath("data", name).read_text(encoding="utf-8"))



# --- fixes and builds --------------------------------------------------------------------------------

@dataclass(frozen=True)
class Fix:
    id: str
    title: str
    first_release: Version
    merged: str = ""
    commit: str = ""
    applies_to: str = ""
    source: str = ""


@cache
def fixes() -> dict[str, Fix]:
    out: dict[str, Fix] = {}
    for e in _data("versions.toml").get("fix", []):
        first = parse_version(e["first_release"])
        assert first is not None, e
        out[str(e["id"])] = Fix(str(e["id"]), e["title"], first, e.get("merged", ""), e.get("commit", ""),
                                e.get("applies_to", ""), e.get("source", ""))
    return out


@dataclass(frozen=True)
class Nightly:
    commit: str
    fixes: frozenset[str]
    built_after: str = ""   # ISO date: the nightly holds every main-branch change merged before it


@cache
def nightlies() -> dict[str, Nightly]:
    return {e["commit"].lower(): Nightly(e["commit"].lower(), frozenset(map(str, e.get("contains", []))),
                                         str(e.get("built_after", "")))
            for e in _data("versions.toml").get("nightly", [])}


def nightly(commit: str) -> Nightly | None:
    """A nightly by (possibly abbreviated, >= 7 chars) commit; None if diag does not know it."""
    commit = commit.lower()
    if len(commit) < 7:
        return None
    for full, entry in nightlies().items():
        if full.startswith(commit) or commit.startswith(full):
            return entry
    return None


def nightly_fixes(commit: str) -> frozenset[str] | None:
    """Fixes of a nightly by (possibly abbreviated, >= 7 chars) commit; None if diag does not know it."""
    entry = nightly(commit)
    return None if entry is None else entry.fixes


def dynamo_runtime_vllm(tag: str) -> Version | None:
    """vLLM version inside ``ai-dynamo/vllm-runtime:<tag>``, if recorded."""
    table = _data("versions.toml").get("dynamo_runtime", {})
    return parse_version(table.get(tag)) if tag in table else None


def dynamo_runtime_bounds(tag: str) -> tuple[Version | None, Version | None]:
    """(lowest, highest) vLLM an unlisted ``vllm-runtime:<tag>`` can ship, from the listed tags around it.

    Dynamo releases only move vLLM forward, so a tag newer than a listed one ships at least that
    one's vLLM, and a tag older than a listed one at most that one's. ``1.2.0-deepseek-v4-dev.3``
    orders as 1.2.0; a tag that is not a version gives no bounds.
    """
    mine = parse_version(tag)
    if mine is None:
        return None, None
    lo: tuple[Version, Version] | None = None
    hi: tuple[Version, Version] | None = None
    for known_tag, vllm_text in _data("versions.toml").get("dynamo_runtime", {}).items():
        known, vllm = parse_version(known_tag), parse_version(vllm_text)
        if known is None or vllm is None:
            continue
        if known <= mine and (lo is None or known > lo[0]):
            lo = (known, vllm)
        if known >= mine and (hi is None or known < hi[0]):
            hi = (known, vllm)
    return (lo[1] if lo else None), (hi[1] if hi else None)


@dataclass(frozen=True)
class Behaviour:
    name: str
    since: Version          # first release with it
    merged: str = ""        # ISO date of the change on main (dates nightlies)


@cache
def behaviours() -> dict[str, Behaviour]:
    out: dict[str, Behaviour] = {}
    for name, entry in _data("versions.toml")["behaviour"].items():
        spec = entry if isinstance(entry, dict) else {"since": entry}
        since = parse_version(spec["since"])
        assert since is not None, name
        out[name] = Behaviour(name, since, str(spec.get("merged", "")))
    return out


def behaviour_since(name: str) -> Version:
    return behaviours()[name].since


@dataclass(frozen=True)
class BuildFacts:
    """What a build is known to contain: answers are True/False, or None when diag cannot tell.

    ``version`` is exact; otherwise ``lowest``/``highest`` bound the vLLM version (an unlisted Dynamo
    runtime tag between two listed ones) and ``built_after`` dates a known nightly.
    """

    label: str
    version: Version | None = None
    fixes: frozenset[str] | None = None  # explicit list (nightlies)
    lowest: Version | None = None
    highest: Version | None = None
    built_after: str = ""

    def at_least(self, v: Version) -> bool | None:
        if self.version is not None:
            return self.version >= v
        if self.lowest is not None and self.lowest >= v:
            return True
        if self.highest is not None and self.highest < v:
            return False
        return None

    def has(self, fix_id: str) -> bool | None:
        if self.fixes is not None:
            return fix_id in self.fixes
        return self.at_least(fixes()[fix_id].first_release)

    def has_behaviour(self, name: str) -> bool | None:
        """Whether the build has a behaviour change (a release, or a dated nightly, at or after it)."""
        beh = behaviours()[name]
        known = self.at_least(beh.since)
        if known is None and self.built_after and beh.merged and self.built_after >= beh.merged:
            return True
        return known

    @property
    def identified(self) -> bool:
        return self.version is not None or self.fixes is not None


def build_facts(kind: str, version: Version | None, commit: str | None, runtime_tag: str | None,
                label: str) -> BuildFacts:
    """Resolve a build description from the recipe model into what diag knows about it."""
    if kind == "release" and version is not None:
        return BuildFacts(label, version)
    if kind == "nightly" and commit:
        entry = nightly(commit)
        if entry is not None:
            return BuildFacts(label, None, entry.fixes, built_after=entry.built_after)
        return BuildFacts(label)
    if runtime_tag:
        v = dynamo_runtime_vllm(runtime_tag)
        if v is not None:
            return BuildFacts(f"{label} (vLLM {fmt_version(v)})", v)
        lo, hi = dynamo_runtime_bounds(runtime_tag)
        if lo is not None or hi is not None:
            span = " to ".join(x for x in (f">= {fmt_version(lo)}" if lo else "", f"<= {fmt_version(hi)}" if hi else "") if x)
            return BuildFacts(f"{label} (vLLM {span} by the runtime table)", lowest=lo, highest=hi)
    return BuildFacts(label)


def default_max_num_batched_tokens(g: Gpu | None) -> int | None:
    """vLLM's server-context default for --max-num-batched-tokens on this GPU (None if unknown GPU)."""
    if g is None:
        return None
    t = _data("launch.toml")["max_num_batched_tokens_default"]
    if g.memory_gb >= 160:
        return int(t["ge_160gb"])
    if g.memory_gb >= 70 and not g.a100:
        return int(t["ge_70gb_not_a100"])
    return int(t["other"])


default_prefill_budget = default_max_num_batched_tokens   # the neutral hook name (knob prefill_token_budget)


def schedules_async(facts: Mapping[str, Any]) -> bool:
    """Whether an engine scheduled asynchronously: the line saying so (removed between 0.26 and 0.30),
    else the flag, else the default of the version it printed (on since 0.14)."""
    if "async_scheduling" in facts:
        return bool(facts["async_scheduling"])
    args = facts.get("non_default_args")
    if isinstance(args, dict) and args.get("async_scheduling") is not None:
        return bool(args["async_scheduling"])
    version = parse_version(str(facts.get("version") or ""))
    return version is not None and version >= behaviour_since("async_scheduling_default_on")
