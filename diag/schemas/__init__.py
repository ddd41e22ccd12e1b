"""The JSON Schemas of diag's machine outputs (shipped in the package; tests validate every JSON
document and JSONL line they produce against them): ``tail``, ``tail-jsonl``, ``check``, ``rules``, ``report``,
``index``, ``runs``,
with shared definitions in ``common``."""

from __future__ import annotations

import json
from importlib import resources
from typing import Any

NAMES = ("common", "tail", "tail-jsonl", "check", "rules", "report", "index", "runs")


def load(name: str) -> dict[str, Any]:
    """One schema as a dict (``tail`` -> tail.schema.json)."""
    return json.loads(resources.files(__name__).joinpath(f"{name}.schema.json").read_text(encoding="utf-8"))
