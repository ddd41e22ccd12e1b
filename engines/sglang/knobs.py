"""How SGLang splits a server-wide budget between its attention-DP ranks (what the verdict's figures are per
engine): under dp attention, chunked-prefill-size and max-running-requests are divided by the attention-DP
size (0.5.23 arg_groups/parallel_hook.py:326-332, model_executor/model_runner.py:558-565; 0.4.6
server_args.py:336)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

SPLIT = frozenset({"prefill_token_budget", "running_cap"})


def _int(v: Any) -> int:
    try:
        return max(1, int(v))
    except (TypeError, ValueError):
        return 1


def _on(v: Any) -> bool:
    return v is True or str(v).strip().lower() in ("true", "1", "yes", "on", "")


def knob_share(knob: str, flags: Mapping[str, Any]) -> int:
    """Ranks sharing one value of ``knob`` given a role's flags (snake_case): the attention-DP size for the
    split budgets (``attn_dp_size``, else ``dp_size`` with ``enable_dp_attention``), else 1."""
    if knob not in SPLIT:
        return 1
    if _int(flags.get("attn_dp_size")) > 1:
        return _int(flags["attn_dp_size"])
    if "enable_dp_attention" in flags and _on(flags["enable_dp_attention"]):
        return _int(next((flags[k] for k in ("dp_size", "data_parallel_size", "dp") if k in flags), 1))
    return 1
