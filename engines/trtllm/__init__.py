"""TensorRT-LLM: MINIMAL adapter (branch i3x-sources) exposing only its log-site table, for the site matcher.

The full adapter (formats, catalogs, flags, recipe checks) is built on its own branch (i3x-trtllm); this one is to
be merged into it, keeping its ``catalogs["sites"]``.
"""

from __future__ import annotations

from diag.parsers.engine import EngineAdapter

ADAPTER = EngineAdapter(
    name="trtllm",
    display="TensorRT-LLM",
    catalogs={"sites": "catalog/sites.generated.jsonl"},
)
