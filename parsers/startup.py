"""Start-up facts any engine's HTTP server prints (an engine's own are declared in its adapter)."""

from __future__ import annotations

import re

from .formats import declare, record_parser
from .records import Header, StartupFact

SERVING = declare(
    "server-serving", "record",
    r"Application startup complete|Uvicorn running on (?P<url>\S+)",
    samples=[
        "(APIServer pid=1) INFO:     Application startup complete.",
        "INFO:     Uvicorn running on http://0.0.0.0:8000 (Press CTRL+C to quit)",
    ],
    emits="startup",
    triggers=("Application startup complete", "Uvicorn running on"),
    doc="the HTTP server is up: a fault after it happened at runtime",
)


@record_parser(SERVING)
def _serving(m: re.Match[str], line: int, hdr: Header, **kw: object) -> StartupFact:
    return StartupFact(line, key="serving", value=True, **kw)  # type: ignore[arg-type]
