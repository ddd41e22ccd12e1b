"""SGLang's parts of a recipe: the build its container implies (the release an ``lmsysorg/sglang`` tag
names) and the GPUs its parallel sizes need (DIAG-C013)."""

from __future__ import annotations

import re

from diag.parsers.recipe import Build, Role
from diag.rules.recipe_support import as_int, truthy

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


def engine_gpus(role: Role) -> tuple[int | None, str, str | None]:
    """GPUs one worker's engine needs: TP x PP, times DP unless DP is attention-DP inside the TP group
    (``enable-dp-attention``); 1 where a size is unset. SGLang just idles GPUs its ranks leave."""
    def num(*names: str) -> int | None:
        f = role.flag(*names)
        return 1 if f is None else as_int(f.value)

    tp, pp = num("tp-size", "tensor-parallel-size", "tp"), num("pp-size", "pipeline-parallel-size")
    dp = 1 if truthy(role.value("enable-dp-attention")) else num("dp-size", "data-parallel-size", "dp")
    if tp is None or pp is None or dp is None or min(tp, pp, dp) < 1:
        return None, "", None
    return tp * pp * dp, f"tp{tp}xpp{pp}" + (f"xdp{dp}" if dp > 1 else ""), None
