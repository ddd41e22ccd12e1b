"""The SGLang build a recipe's container implies: the release an ``lmsysorg/sglang`` tag names."""

from __future__ import annotations

import re

from diag.parsers.recipe import Build

from .flags import image_version

DISPLAY = "SGLang"


def parse_build(image: str | None, declared: str | None = None) -> Build:
    """``identity.frameworks.sglang`` when the recipe declares it, else the image's release tag
    (``lmsysorg/sglang:v0.5.23-cu130`` -> 0.5.23); dev, nightly and Dynamo runtime images name none."""
    if declared and (m := re.match(r"^v?(\d+\.\d+(?:\.\d+)*)", str(declared).strip())):
        return Build("release", m.group(1), source="identity.frameworks.sglang", image=image, engine=DISPLAY)
    if not image:
        return Build("unknown", engine=DISPLAY)
    version = image_version(image)
    if version:
        return Build("release", version, source="model.container", image=image, engine=DISPLAY)
    return Build("unknown", source="model.container", image=image, engine=DISPLAY)
