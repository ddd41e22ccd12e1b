"""Regenerate expected.json: every finding `diag check` reports on the recipe test set.

    .venv/bin/python tests/data/recipes/regen.py

Review the diff finding by finding before committing it: the file is the golden record that
tests/test_recipe_set.py compares against exactly (an extra or missing finding fails).
"""

from __future__ import annotations

import json
from pathlib import Path

from diag.check_cmd import check_file

HERE = Path(__file__).resolve().parent


def findings_of(path: Path) -> list[dict[str, object]]:
    return [{"code": f.code, "severity": f.severity, "line": f.location.line, "col": f.location.col,
             "endpoint": f.endpoint, "message": f.message} for f in check_file(path, display=path.name)]


def golden() -> dict[str, list[dict[str, object]]]:
    return {p.name: findings_of(p) for p in sorted(HERE.glob("*.yaml"))}


if __name__ == "__main__":
    (HERE / "expected.json").write_text(json.dumps(golden(), indent=1) + "\n", encoding="utf-8")
