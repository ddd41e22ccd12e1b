"""The index dataset's names: its schema, its manifest, where ``diag tail --save`` leaves a run's result.

Apart from :mod:`diag.index.build` so that ``diag runs`` (:mod:`diag.index.query`) reads an index without
importing the pipeline.
"""

from __future__ import annotations

import json
from pathlib import Path

from diag.parsers import inputs

DATASET_SCHEMA = "diag-index-dataset-1"
MANIFEST = "index.json"
SAVED = ".diag"   # RUN/.diag/: what `diag tail RUN --save` writes


def manifest_ok(into: Path) -> bool:
    """Whether ``into`` holds an index of this dataset schema."""
    try:
        return json.loads(inputs.read_text(into / MANIFEST, errors="strict")).get("schema") == DATASET_SCHEMA
    except (OSError, ValueError, AttributeError):
        return False
