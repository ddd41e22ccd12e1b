"""What diag knows about model families, GPUs and benchmarks (data in ``rules/data/models.toml``),
and how versions are written.

An engine's builds, fixes and behaviour changes are its adapter's (``hooks_module``, e.g.
``diag.engines.vllm.knowledge``).
``models.toml`` is meant to be extended by editing it; this module only loads and answers questions.
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
