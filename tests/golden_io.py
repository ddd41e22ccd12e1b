"""Golden outputs: exact expected JSON per sample, compared whole (an extra finding fails).

Regenerate after an intended change with ``DIAG_UPDATE_GOLDEN=1 python -m pytest tests/test_golden.py``
and review the diff like code.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
GOLDEN = ROOT / "tests" / "golden"


def normalized(doc: Any) -> Any:
    """The document with machine-specific parts replaced: the checkout's path and diag's version."""
    text = json.dumps(doc, sort_keys=True, ensure_ascii=False)
    text = text.replace(str(ROOT) + "/", "").replace(str(ROOT), ".")
    out = json.loads(text)
    if isinstance(out, dict) and "version" in out:
        out["version"] = "<version>"
    return out


def check_golden(name: str, doc: Any) -> None:
    path = GOLDEN / f"{name}.json"
    got = normalized(doc)
    if os.environ.get("DIAG_UPDATE_GOLDEN") == "1":
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(got, indent=1, sort_keys=True, ensure_ascii=False) + "\n", encoding="utf-8")
        return
    assert path.is_file(), f"{path} is missing: DIAG_UPDATE_GOLDEN=1 python -m pytest tests/test_golden.py"
    want = json.loads(path.read_text(encoding="utf-8"))
    assert got == want, f"{name}: differs from {path.relative_to(ROOT)} (regenerate only for an intended change)"
