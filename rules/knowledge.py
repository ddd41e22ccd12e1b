"""What diag knows about vLLM builds, model families, GPUs and benchmarks (data in ``rules/data``).

``versions.toml`` lists the P/D fixes and which releases/nightlies carry them; ``models.toml`` the
hybrid/GDN/multimodal families, GPU memory sizes and benchmark kinds. Both are meant to be extended
by editing the TOML; this module only loads and answers questions.
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from typing import Any

Version = tuple[int, ...]


def parse_version(text: str | None) -> Version | None:
    """``"v0.26.1"`` / ``"0.26.1rc2"`` / ``"0.26"`` -> ``(0, 26, 1)`` / ``(0, 26, 1)`` / ``(0, 26, 0)``."""
    if not text:
        return None
    m = re.match(r"^v?(\d+)\.(\d+)(?:\.(\d+))?", str(text).strip())
    if not m:
        return None
    return int(m.group(1)), int(m.group(2)), int(m.group(3) or 0)


def fmt_version(v: Version | None) -> str:
    return "unknown" if v is None else "v" + ".".join(map(str, v))


@cache
def _data(name: str) -> dict[str, Any]:
    text = resources.files("diag.rules").joinpath("data", name).read_text(encoding="utf-8")
    return tomllib.loads(text)


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


# --- families, GPUs, benchmarks -------------------------------------------------------------------

@dataclass(frozen=True)
class Family:
    name: str
    patterns: tuple[str, ...]
    hybrid: bool = False
    gdn: bool = False
    multimodal: bool = False
    bf16_ssm: bool = False


@cache
def families() -> tuple[Family, ...]:
    return tuple(Family(e["name"], tuple(e["patterns"]), bool(e.get("hybrid")), bool(e.get("gdn")),
                        bool(e.get("multimodal")), bool(e.get("bf16_ssm")))
                 for e in _data("models.toml").get("family", []))


def family_for(*names: str | None) -> Family | None:
    """The first family whose pattern matches any of the given model names/paths."""
    texts = [n for n in names if n]
    for fam in families():
        for pat in fam.patterns:
            if any(re.search(pat, t, re.IGNORECASE) for t in texts):
                return fam
    return None


@dataclass(frozen=True)
class Gpu:
    name: str
    memory_gb: float
    blackwell: bool = False
    a100: bool = False


def gpu(name: str | None) -> Gpu | None:
    if not name:
        return None
    e = _data("models.toml").get("gpu", {}).get(str(name).lower())
    if e is None:
        return None
    return Gpu(str(name).lower(), float(e["memory_gb"]), bool(e.get("blackwell")), bool(e.get("a100")))


def default_max_num_batched_tokens(g: Gpu | None) -> int | None:
    """vLLM's server-context default for --max-num-batched-tokens on this GPU (None if unknown GPU)."""
    if g is None:
        return None
    t = _data("models.toml")["max_num_batched_tokens_default"]
    if g.memory_gb >= 160:
        return int(t["ge_160gb"])
    if g.memory_gb >= 70 and not g.a100:
        return int(t["ge_70gb_not_a100"])
    return int(t["other"])


@dataclass(frozen=True)
class BenchmarkKinds:
    latency: frozenset[str] = field(default_factory=frozenset)
    text_only: frozenset[str] = field(default_factory=frozenset)
    random_data: frozenset[str] = field(default_factory=frozenset)
    random_datasets: frozenset[str] = field(default_factory=frozenset)


@cache
def benchmark_kinds() -> BenchmarkKinds:
    b = _data("models.toml").get("benchmarks", {})
    return BenchmarkKinds(*(frozenset(b.get(k, [])) for k in
                            ("latency", "text_only", "random_data", "random_datasets")))


# --- documentation -----------------------------------------------------------------------------------
