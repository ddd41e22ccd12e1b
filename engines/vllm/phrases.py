"""How vLLM's own lines say what rule texts quote (``{says.<name>}``, :data:`diag.parsers.engine.SAYS`)."""

from __future__ import annotations

PHRASES: dict[str, str] = {
    # gpu_model_runner / kv_cache_utils at start-up
    "capacity_line": '"Maximum concurrency for L tokens per request: Mx"',
    # v1/metrics/loggers.py: the API server's LoggingStatLogger, off with several API servers or the flag
    "stats_lines": 'vLLM prints its 10-second "Engine NNN: Avg prompt throughput ..." lines from the API-server\n'
                   "process. More than one API server (the default on a DP endpoint: {knob_key.api_servers} = DP size)\n"
                   'disables them ("AsyncLLM created with {knob_key.api_servers} more than 1; disabling stats logging"),\n'
                   "--{knob.stats_off} turns them off, and idle intervals are logged at DEBUG.",
    "death_echoes": 'EngineDeadError, "Worker proc died unexpectedly", output_handler failed',
    "context_too_long": "max seq len too large",
    "kv_load_failures": "KV load failures",
    "args_dump": "`non-default args`",
    # vllm#25808 fixed a bookkeeping race of async scheduling that logged expired-block reads
    "kv_expiry_note": ' Note: on builds without PR #25808, async scheduling produced spurious "Potentially\n'
                      'invalid KV blocks" errors (a bookkeeping race, not a real expiry).',
    "invalid_blocks_caveat": " (async scheduling is on: on builds without PR #25808 'invalid KV blocks' can be a "
                             "false alarm)",
    "metrics_failed_transfers": "failed transfers (KV Transfer metrics)",
    "kv_load_recovered": "requests recomputed after a KV load failure",
    "stats_name": "vLLM stats lines",
    "build_name": "vLLM build",
    "kv_path_checks": "the findings' evidence (NIXL/UCX errors, lease expiries), UCX_TLS / NIXL backend, and that "
                      "prefill and decode block sizes match",
}
