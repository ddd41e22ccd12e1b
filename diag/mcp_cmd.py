"""``diag mcp``: serve diag's verdicts to coding and ops agents over the Model Context Protocol (stdio).

The SDK (``mcp``) is imported only when the server starts (:mod:`diag.mcp_server`): ``diag --help`` and every
other command load none of it.
"""

from __future__ import annotations

from pathlib import Path

import typer

from .options import ConfigFile, Example, fail, positive

MAX_READ_BYTES = 2 << 30    # bytes of files one tool call may read (2 GiB: a large run's logs, twice over)
MAX_SECONDS = 120.0         # wall time of one tool call

EXAMPLES: tuple[Example, ...] = (
    ("Serve the runs under the current directory (an agent client starts this and speaks MCP on stdin/stdout)",
     "diag mcp"),
    ("Let the tools read two directories and nothing else", "diag mcp --root outputs --root recipes/"),
    ("The tools with their input and output schemas, as JSON, without serving", "diag mcp --list-tools"),
    ("Smaller bounds on each call: 200 MB read, 30 seconds", "diag mcp --max-read-bytes 200000000 --max-seconds 30"),
)


def mcp(
    roots: list[Path] | None = typer.Option(None, "--root", metavar="DIR",
                                            help="A directory the tools may read (repeatable; default: the current "
                                                 "directory). Paths outside every root are refused."),
    config: ConfigFile = None,
    max_read_bytes: int = typer.Option(MAX_READ_BYTES, "--max-read-bytes", metavar="N",
                                       callback=positive("--max-read-bytes"),
                                       help="Bytes of files one tool call may read (all its files together); "
                                            "a call that reads more is a tool error."),
    max_seconds: float = typer.Option(MAX_SECONDS, "--max-seconds", metavar="S", callback=positive("--max-seconds"),
                                      help="Seconds one tool call may take; at the deadline the call is a tool "
                                           "error and the server goes on."),
    list_tools: bool = typer.Option(False, "--list-tools", help="Print the tools and their schemas as JSON and exit."),
) -> None:
    """Serve diag to agents (Claude Code, Cursor, Codex ...) over MCP on stdio.

    Each tool returns the document its command writes with --format json,
    bounded: findings first, at most `limit` per run, evidence trimmed.
    Relative paths are read under the first --root.

    tail(paths, select?, ignore?, since?, prom?, limit?)
        a run's verdict, findings with file:line evidence, endpoints
    check(paths, select?, ignore?, limit?)   recipe findings
    explain(code)                            a rule's documentation
    rules(select?, scope?)                   the catalog
    report(paths, sla?, min_tok_s_user?, limit?)
        writes the HTML report under ROOT/.diag-mcp/; its path, the pick
        and every point's verdict
    compare(run_a, run_b, sla?, limit?)
        config, verdict, finding and tok/s/GPU differences

    Resources: diag://rules (the catalog), diag://rules/CODE (a rule's
    documentation). Bad input is a tool error carrying diag's one-line
    message; the server goes on serving.

    Every file a tool reads is checked as it is opened: walked from its
    root one component at a time, a symlink followed only while it stays
    under a root, so nothing outside the roots is read even when links
    change under them. A call reads at most --max-read-bytes and takes at
    most --max-seconds; past either it is a tool error, e.g. "diag tail:
    PATH: reads more than N bytes in this call (limit: ...)".
    """
    for root in roots or []:
        if not root.is_dir():
            fail("mcp", f"--root {root}: not a directory")
    if list_tools:
        from .emit import dumps
        from .mcp_tools import TOOLS

        typer.echo(dumps([{"name": t.name, "description": t.description, "inputSchema": t.input_schema,
                           "outputSchema": t.output_schema} for t in TOOLS], indent=1))
        return
    try:
        from .mcp_server import serve
    except ImportError as e:
        fail("mcp", f"the MCP SDK is not installed ({e}); pip install 'mcp>=2.3,<3'")
    from .confine import Limits

    serve(list(roots or []), config, Limits(max_read_bytes, max_seconds))
