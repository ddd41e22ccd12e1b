"""What vLLM's recipe checks share: which recipes they look at, the build's facts, KV roles and transports."""

from __future__ import annotations

from diag.parsers import engines
from diag.parsers.recipe import Recipe, Role
from diag.rules.knowledge import parse_version

from . import ADAPTER
from .knowledge import BuildFacts, build_facts


def vllm(recipe: Recipe) -> bool:
    """The recipe runs vLLM (``backend.type`` / ``engine.type``)."""
    return engines.get(recipe.backend) is ADAPTER


def facts(recipe: Recipe) -> BuildFacts:
    b = recipe.build
    return build_facts(b.kind, parse_version(b.version), b.commit, b.runtime_tag, b.label)


# Connectors that move KV from a prefill worker to a decode worker. Any other connector (a KV store,
# an offload tier) can be read by any worker, prefill included.
P2P_CONNECTORS = frozenset({"NixlConnector", "MooncakeConnector", "P2pNcclConnector", "MoRIIOConnector",
                            "NixlPullConnector", "NixlPushConnector"})
CONSUMING_ROLES = ("kv_consumer", "kv_both")


def kv_consumer(role: Role) -> bool:
    """Whether the worker loads KV it did not compute (the side the async-scheduling race needs).

    A Dynamo/srtctl prefill worker only sends over a P2P connector whatever its kv_role says
    (``kv_both`` included); it loads KV only from a store or offload connector. Decode loads from prefill.
    """
    if role.kv is None:
        return False
    for connector, kv_role in role.kv.parts:
        if kv_role not in CONSUMING_ROLES:
            continue
        if role.name != "prefill" or connector not in P2P_CONNECTORS:
            return True
    return False


def transports(role: Role) -> frozenset[str]:
    """The P2P connectors a worker offers (a MultiConnector's wrapped ones included)."""
    return frozenset(c for c, _ in role.kv.parts if c in P2P_CONNECTORS) if role.kv else frozenset()
