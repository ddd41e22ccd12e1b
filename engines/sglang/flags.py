"""The flags each pinned SGLang release accepts, and the ones ``python -m dynamo.sglang`` adds.

The lists are ``data/flags.toml``, generated from the released wheels' source by
``tools/sglang_flags.py`` (0.5.2x declares its flags as annotated fields in ``arg_groups/fields/``,
older releases call ``parser.add_argument`` in ``server_args.py``). SGLang parses with argparse's
defaults, so a unique prefix of a flag is that flag (``speculative-algo``) and a prefix of several is
an "ambiguous option" error (``cuda-graph-max-bs`` on 0.5.23, which has ``-decode`` and ``-prefill``
forms only). Under Dynamo, ``dynamo.sglang`` parses its own flags first and hands the rest to SGLang's
parser (``dynamo/sglang/args.py`` ``parse_args``).
"""

from __future__ import annotations

import difflib
import re
import tomllib
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from typing import Any

from diag.parsers.flags import normalize_flag


@cache
def _data() -> dict[str, Any]:
    with resources.files(__package__).joinpath("data/flags.toml").open("rb") as fh:
        return tomllib.load(fh)


@cache
def releases() -> tuple[str, ...]:
    """The releases diag has a flag list for, oldest first."""
    return tuple(_data()["release"])


@cache
def _flags(release: str) -> frozenset[str]:
    return frozenset(_data()["release"][release]["flags"])


@cache
def dynamo_flags() -> frozenset[str]:
    """The flags ``dynamo.sglang`` parses itself (every listed Dynamo release)."""
    return frozenset().union(*(frozenset(d["flags"]) for d in _data()["dynamo"].values()))


def dynamo_releases() -> tuple[str, ...]:
    return tuple(_data()["dynamo"])


@cache
def known_flags() -> frozenset[str]:
    """Canonical (snake_case, ``no_`` dropped) names of every flag a listed release or Dynamo accepts."""
    return frozenset(normalize_flag(n)[0] for n in frozenset().union(*map(_flags, releases()), dynamo_flags()))


def deprecated(release: str) -> dict[str, str]:
    """Flags ``release`` accepts with a deprecation warning, and what replaces each."""
    return dict(_data()["release"][release].get("deprecated", {}))


def rejected(release: str) -> dict[str, str]:
    """Flags ``release`` registers only to refuse them (its message)."""
    return dict(_data()["release"][release].get("rejected", {}))


_TAG = re.compile(r"(?:sglang-)?v?(\d+\.\d+\.\d+(?:\.post\d+)?)(?:-(?:cu\d+|runtime|rocm)[\w.-]*)?")


def image_version(image: str | None) -> str | None:
    """The SGLang release an image names (``lmsysorg/sglang:v0.5.8-cu130``, ``v0.5.7`` -> ``0.5.8``,
    ``0.5.7``), else None: ``dev``, nightlies and Dynamo runtime images (numbered by Dynamo) name none."""
    if not image:
        return None
    repo, _, tag = image.rpartition(":") if ":" in image.rsplit("/", 1)[-1] else ("", "", image)
    if "dynamo" in repo.lower():
        return None
    m = _TAG.fullmatch(tag.strip())
    return m.group(1) if m else None


@dataclass(frozen=True)
class FlagStatus:
    status: str                   # known | unknown | ambiguous | rejected
    flag: str                     # kebab-case, as SGLang spells it
    suggestion: str | None = None
    matches: tuple[str, ...] = field(default_factory=tuple)
    note: str = ""


def _match(flag: str, names: frozenset[str]) -> tuple[str, ...]:
    """What argparse makes of ``--flag`` among ``names``: itself, the one flag it abbreviates, or every
    flag it is a prefix of (several: ambiguous)."""
    if flag in names:
        return (flag,)
    return tuple(sorted(n for n in names if n.startswith(flag)))


def classify(name: str, release: str, *, dynamo: bool) -> FlagStatus:
    """Does ``release`` (a listed one), launched under Dynamo or not, accept ``name`` as written in a recipe?

    srtctl turns a key into ``--key`` with underscores as hyphens, so ``no-x`` stays ``--no-x``.
    """
    flag = name.strip().lstrip("-").replace("_", "-").lower()
    if dynamo and len(_match(flag, dynamo_flags())) == 1:
        return FlagStatus("known", flag)
    hits = _match(flag, _flags(release))
    if len(hits) == 1:
        refused = rejected(release).get(hits[0])
        return FlagStatus("rejected", hits[0], note=refused) if refused else FlagStatus("known", hits[0])
    if hits:
        return FlagStatus("ambiguous", flag, matches=hits)
    return FlagStatus("unknown", flag, closest(flag, release, dynamo=dynamo))


def in_any_release(name: str) -> bool:
    """Whether some listed release (or Dynamo) accepts ``name``, exactly or as an abbreviation."""
    flag = name.strip().lstrip("-").replace("_", "-").lower()
    return any(_match(flag, names) for names in (*map(_flags, releases()), dynamo_flags()))


def closest(flag: str, release: str, *, dynamo: bool) -> str | None:
    """The flag of ``release`` (and Dynamo's) spelled most like ``flag``."""
    names = sorted(_flags(release) | (dynamo_flags() if dynamo else frozenset()))
    hits = difflib.get_close_matches(flag, names, n=1, cutoff=0.72)
    return hits[0] if hits else None


def removed_since(flag: str, release: str) -> str | None:
    """The listed release before ``release`` that still had ``flag`` (None: none did, or it is known)."""
    older = releases()[: releases().index(release)]
    for r in reversed(older):
        if _match(flag, _flags(r)):
            return r
    return None
