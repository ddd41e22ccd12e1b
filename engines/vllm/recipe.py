"""vLLM's parts of a recipe: the build its container implies, its KV-transfer config (the
``kv-transfer-config`` flag, else srtctl's ``connector:`` shorthand) and the GPUs its parallel sizes need."""

from __future__ import annotations

import json
import re

from diag.parsers.recipe import Build, KVTransfer, Recipe, Role

DISPLAY = "vLLM"
KV_FLAG = "kv-transfer-config"
# srtctl's `connector:` shorthand (backend.connector, or engine.connector in schema 2; default nixl)
CONNECTORS = {"nixl": "NixlConnector", "lmcache": "LMCacheConnectorV1", "kvbm": "DynamoConnector"}
DP_UNDERFILL = ("vLLM's DP launcher may refuse a DP endpoint whose ranks do not fill its GPUs (assumed from the "
                "DP launch path; without DP vLLM just leaves the rest idle)")


def parse_build(image: str | None, declared: str | None = None) -> Build:
    """The vLLM build a container implies: release tag, ``nightly-<sha>``, or unknown.

    ``declared`` (``identity.frameworks.vllm``) wins when present.
    """
    if declared:
        m = re.match(r"^v?(\d+\.\d+(?:\.\d+)?)", str(declared).strip())
        if m:
            return Build("release", m.group(1), source="identity.frameworks.vllm", image=image, engine=DISPLAY)
    if not image:
        return Build("unknown", engine=DISPLAY)
    ref = image.split("@", 1)[0]
    repo, _, tag = ref.rpartition(":") if ":" in ref.rsplit("/", 1)[-1] else (ref, "", "")
    m = re.fullmatch(r"nightly-([0-9a-fA-F]{7,40})", tag)
    if m:
        return Build("nightly", commit=m.group(1).lower(), source="model.container", image=image, engine=DISPLAY)
    if repo.endswith("vllm-runtime") and tag:
        return Build("unknown", runtime_tag=tag, source="model.container", image=image, engine=DISPLAY)
    m = re.match(r"^v?(\d+\.\d+\.\d+)(?:rc\d+)?(?:[-+.][A-Za-z].*)?$", tag)
    if m and "vllm" in repo.lower():
        return Build("release", m.group(1), source="model.container", image=image, engine=DISPLAY)
    return Build("unknown", source="model.container", image=image, engine=DISPLAY)


def _kv_from_flag(role: Role) -> KVTransfer | None:
    f = role.flag(KV_FLAG)
    if f is None:
        return None
    raw = f.value
    if isinstance(raw, dict):
        return KVTransfer("flag", raw, dict(raw), None, f.mark, f.path)
    try:
        data = json.loads(str(raw))
    except json.JSONDecodeError as exc:
        return KVTransfer("flag", raw, None, f"invalid JSON: {exc.msg} at char {exc.pos}", f.mark, f.path)
    if not isinstance(data, dict):
        return KVTransfer("flag", raw, None, "must be a JSON object", f.mark, f.path)
    return KVTransfer("flag", raw, data, None, f.mark, f.path)


def _kv_from_connector(recipe: Recipe) -> KVTransfer | None:
    if recipe.connector is None:
        return None
    name = CONNECTORS.get(recipe.connector.lower(), recipe.connector)
    data = {"kv_connector": name, "kv_role": "kv_both"}
    return KVTransfer("connector", recipe.connector, data, None, recipe.mark(*recipe.connector_path),
                      recipe.connector_path)


def _connector(recipe: Recipe) -> None:
    """The `connector:` shorthand: ``backend.connector`` (v1) or ``engine.connector`` (schema 2), nixl when absent."""
    parent = "engine" if recipe.layout == "schema2" else "backend"
    block = recipe.data.get(parent)
    if not isinstance(block, dict) and parent == "engine":  # `engine: vllm`
        recipe.connector_path, recipe.connector = (parent,), "nixl"
        return
    block = block if isinstance(block, dict) else {}
    recipe.connector_path = (parent, "connector")
    recipe.connector = str(block["connector"]) if block.get("connector") is not None else (
        None if "connector" in block else "nixl")


def read_recipe(recipe: Recipe) -> None:
    """The connector shorthand, and each role's KV transfer: its flag, else the shorthand when disaggregated."""
    _connector(recipe)
    for role in recipe.roles.values():
        role.kv = _kv_from_flag(role) or (_kv_from_connector(recipe) if recipe.disaggregated else None)


def engine_gpus(role: Role) -> tuple[int | None, str, str | None]:
    """GPUs one worker's engine needs: TP x DP x PP (x PCP), from the role's flags (1 when unset)."""
    from . import ADAPTER  # the adapter is built from this module: its knobs are read at call time

    def num(name: str | None) -> int | None:
        f = role.flag(name) if name else None
        if f is None:
            return 1
        if isinstance(f.value, bool):
            return None
        try:
            return int(f.value)
        except (TypeError, ValueError):
            return None

    tp, dp = num(ADAPTER.knob("tensor_parallel")), num(ADAPTER.knob("data_parallel"))
    pp, pcp = num("pipeline-parallel-size"), num("prefill-context-parallel-size")
    if tp is None or dp is None or pp is None or pcp is None or min(tp, dp, pp, pcp) < 1:
        return None, "", None
    extra = f"xPCP{pcp}" if pcp > 1 else ""
    return tp * dp * pp * pcp, f"TP{tp}xDP{dp}xPP{pp}{extra}", DP_UNDERFILL if dp > 1 else None
