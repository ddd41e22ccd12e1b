"""Why a vLLM endpoint that served logged no stats lines (DIAG-L001), from the facts its start-up printed."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

# DIAG-L001 points at the API-server count's line where no stats_disabled fact was printed
STATS_FACTS = ("api_server_count",)


def why_no_stats(facts: Mapping[str, Any]) -> tuple[str, str] | None:
    """(cause, why): more than one API server turns the stats lines off, and so does --disable-log-stats;
    None when the facts say neither."""
    if facts.get("stats_disabled") == "api_server_count" or (facts.get("api_server_count") or 0) > 1:
        return "api_server_count", (f"more than one API server (api_server_count={facts.get('api_server_count', '>1')}) "
                                    "disables vLLM's stats logging")
    if facts.get("stats_disabled") == "disable_log_stats":
        return "disable_log_stats", "stats logging is disabled (--disable-log-stats)"
    return None
