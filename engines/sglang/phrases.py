"""How SGLang's own lines say what rule texts quote (``{says.<name>}``, :data:`diag.parsers.engine.SAYS`);
each from the wheels' source (0.5.23, 0.4.6.post5)."""

from __future__ import annotations

PHRASES: dict[str, str] = {
    # managers/scheduler.py (0.5.23 :1269, 0.4.6 :334): the scheduler's limits line; T / L full-length requests fit
    "capacity_line": '"max_total_num_tokens=T, ..., context_len=L" (T / L)',
    # scheduler_components/metrics_reporter.py: a line per prefill batch, and one every decode_log_interval
    # (observability.py: 40) decode iterations
    "stats_lines": 'SGLang\'s schedulers print a "Prefill batch ..." line per prefill batch and a "Decode batch ..."\n'
                   "line every --decode-log-interval decode steps (40 by default); an idle engine prints neither.",
    # managers/scheduler.py:6372, entrypoints/engine.py:1978 (catalog/faults.toml sglang_process_died)
    "death_echoes": '"Scheduler hit an exception", "Received sigquit from a child process"',
    # disaggregation/decode.py:2864 (catalog/faults.toml sglang_kv_transfer)
    "kv_load_failures": '"Decode transfer failed for request" errors',
    # entrypoints/engine.py: the launch's argument dump (0.4.6 f"{server_args=}", 0.5.23 a dict)
    "args_dump": "`server_args=` dump",
    "stats_name": "SGLang batch lines",
    "build_name": "SGLang build",
    # disaggregation/common/conn.py:1320-1335: prefill and decode must agree on page size and KV dtype (DIAG-C018)
    "kv_path_checks": "the findings' evidence (each KVTransferError's reason, transfer time-outs), the transfer "
                      "backend (disaggregation-transfer-backend, its NIXL/Mooncake logs), and that prefill and decode "
                      "agree on page-size and kv-cache-dtype",
}
