"""SGLang's parts of a recipe: the GPUs its parallel sizes need (DIAG-C013)."""

from __future__ import annotations

from diag.parsers.recipe import Role
from diag.rules.recipe_support import as_int, truthy


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
