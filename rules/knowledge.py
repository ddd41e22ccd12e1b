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


@cache
def nightlies() -> dict[str, frozenset[str]]:
    return {e["commit"].lower(): frozenset(map(str, e.get("contains", [])))
            for e in _data("versions.toml").get("nightly", [])}


def nightly_fixes(commit: str) -> frozenset[str] | None:
    """Fixes of a nightly by (possibly abbreviated, >= 7 chars) commit; None if diag does not know it."""
    commit = commit.lower()
    if len(commit) < 7:
        return None
    for full, contained in nightlies().items():
        if full.startswith(commit) or commit.startswith(full):
            return contained
    return None


def dynamo_runtime_vllm(tag: str) -> Version | None:
    """vLLM version inside ``ai-dynamo/vllm-runtime:<tag>``, if recorded."""
    table = _data("versions.toml").get("dynamo_runtime", {})
    return parse_version(table.get(tag)) if tag in table else None


def behaviour_since(name: str) -> Version:
    v = parse_version(_data("versions.toml")["behaviour"][name])
    assert v is not None
    return v


@dataclass(frozen=True)
class BuildFacts:
    """What a build is known to contain: ``has(fix)`` is True/False, or None when unknowable."""

    label: str
    version: Version | None = None
    fixes: frozenset[str] | None = None  # explicit list (nightlies)

    def has(self, fix_id: str) -> bool | None:
        if self.fixes is not None:
            return fix_id in self.fixes
        if self.version is None:
            return None
        return self.version >= fixes()[fix_id].first_release

    def at_least(self, v: Version) -> bool | None:
        return None if self.version is None else self.version >= v


def build_facts(kind: str, version: Version | None, commit: str | None, runtime_tag: str | None,
                label: str) -> BuildFacts:
    """Resolve a build description from the recipe model into what diag knows about it."""
    if kind == "release" and version is not None:
        return BuildFacts(label, version)
    if kind == "nightly" and commit:
        return BuildFacts(label, None, nightly_fixes(commit))
    if runtime_tag:
        v = dynamo_runtime_vllm(runtime_tag)
        if v is not None:
            return BuildFacts(f"{label} (vLLM {fmt_version(v)})", v)
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
