"""Read a small JSON side file, turning every failure into one line of the caller's error type."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from . import inputs


def read_json(path: str | Path, error: type[ValueError]) -> tuple[Path, Any]:
    """``(Path, parsed value)``; raises ``error`` with ``name: cannot read (...)`` / ``invalid JSON (...)``."""
    p = Path(path)
    try:
        return p, json.loads(inputs.read_text(p))
    except OSError as e:
        raise error(f"{p.name}: cannot read ({e.strerror or e})") from None
    except ValueError as e:
        msg = getattr(e, "msg", str(e)).splitlines()[0]
        raise error(f"{p.name}: invalid JSON ({msg})") from None
