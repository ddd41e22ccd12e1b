"""``diag mcp``: the tools of :mod:`diag.mcp_tools` and the rule catalog served over MCP on stdio with
the official Python SDK (``mcp``). Only ``diag mcp`` imports this module: no other command loads the SDK.

A call runs in a worker thread for at most ``--max-seconds``: at the deadline the agent gets the limit's
one line while the thread, abandoned, stops at its next read (:mod:`diag.confine`). A tool's result
carries its document twice, as MCP asks of structured output: ``structuredContent`` (checked
by clients against the tool's output schema) and the same JSON as text, after a line per note on what the
bounds left out. Bad input is a tool error (``isError``) whose text is diag's one line; the server goes on.
Resources: ``diag://rules`` (the catalog, ``diag rules --format json``) and ``diag://rules/CODE`` (a rule's
documentation, ``diag explain CODE``).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
import mcp_types as types
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server
from mcp.shared.exceptions import MCPError

from diag import __version__

from .confine import Limits, over_time
from .emit import dumps
from .mcp_tools import TOOLS, ToolError, Workspace, call
from .options import fail

CATALOG_URI = "diag://rules"
RULE_URI = "diag://rules/{code}"
INSTRUCTIONS = ("diag diagnoses disaggregated vLLM/Dynamo benchmark runs from their logs. Start with `tail` on a "
                "run directory (outputs/<jobid>) or its archive: its `verdict` says what limits the run and which "
                "experiments to try, each finding cites file:line evidence; a failed run's `postmortem` names the "
                "root cause and who owns the fix (recipe, engine, infra, benchmark), its `timeline` orders what "
                "happened. `explain` documents a finding's code; `check` lints recipes; `report` and `compare` "
                "judge sweeps and runs against each other.")


def _text(text: str) -> types.TextContent:
    return types.TextContent(type="text", text=text)


def build(ws: Workspace) -> Server[Any]:
    """The server over ``ws``: its tools, the rule catalog as resources."""

    async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=[
            types.Tool(name=t.name, description=t.description, input_schema=t.input_schema,
                       output_schema=t.output_schema,
                       annotations=types.ToolAnnotations(read_only_hint=t.name != "report", destructive_hint=False,
                                                         idempotent_hint=True, open_world_hint=False))
            for t in TOOLS])

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        try:
            with anyio.fail_after(ws.limits.max_seconds):
                result = await anyio.to_thread.run_sync(call, ws, params.name, params.arguments,
                                                        abandon_on_cancel=True)
        except TimeoutError:
            return types.CallToolResult(content=[_text(f"diag {params.name}: {over_time(ws.limits.max_seconds)}")],
                                        is_error=True)
        except ToolError as e:
            return types.CallToolResult(content=[_text(str(e))], is_error=True)
        except Exception as e:  # a bug in diag: one line to the agent, the server goes on
            return types.CallToolResult(
                content=[_text(f"diag {params.name}: internal error: {type(e).__name__}: {e} (please report)")],
                is_error=True)
        body = result.text if result.text is not None else dumps(result.doc)
        return types.CallToolResult(content=[_text(n) for n in result.notes] + [_text(body)],
                                    structured_content=result.doc)

    async def list_resources(ctx: Any, params: Any) -> types.ListResourcesResult:
        from diag.rules.catalog import catalog

        rules = [types.Resource(uri=RULE_URI.format(code=r.code), name=r.code, title=f"{r.code} {r.name}",
                                description=r.summary, mime_type="text/markdown") for r in catalog().values()]
        return types.ListResourcesResult(resources=[
            types.Resource(uri=CATALOG_URI, name="rules", title="diag rule catalog", mime_type="application/json",
                           description="Every rule: code, name, severity, scope, summary (diag rules --format json)"),
            *rules])

    async def list_templates(ctx: Any, params: Any) -> types.ListResourceTemplatesResult:
        return types.ListResourceTemplatesResult(resource_templates=[
            types.ResourceTemplate(uri_template=RULE_URI, name="rule", title="A rule's documentation",
                                   description="diag explain CODE: why it fires, what to change, its thresholds",
                                   mime_type="text/markdown")])

    async def read_resource(ctx: Any, params: types.ReadResourceRequestParams) -> types.ReadResourceResult:
        uri = str(params.uri)
        if uri == CATALOG_URI:
            from .emit.rules import rules_dict
            from .rules_cmd import select_rules

            text, mime = dumps(rules_dict(select_rules(None, None))), "application/json"
        elif uri.startswith(CATALOG_URI + "/"):
            from diag.rules.catalog import CatalogError

            from .explain import explain_text

            try:
                text, mime = explain_text(uri.removeprefix(CATALOG_URI + "/")), "text/markdown"
            except CatalogError as e:
                raise MCPError(types.INVALID_PARAMS, f"{uri}: {e}") from None
        else:
            raise MCPError(types.INVALID_PARAMS, f"{uri}: no such resource (diag://rules, diag://rules/CODE)")
        return types.ReadResourceResult(contents=[types.TextResourceContents(uri=uri, mime_type=mime, text=text)])

    return Server("diag", version=__version__, title="diag: P/D benchmark diagnosis", instructions=INSTRUCTIONS,
                  on_list_tools=list_tools, on_call_tool=call_tool, on_list_resources=list_resources,
                  on_list_resource_templates=list_templates, on_read_resource=read_resource)


def serve(roots: list[Path], config: Path | None, limits: Limits) -> None:
    """Serve on stdin/stdout until the client closes stdin."""
    try:
        ws = Workspace.of(roots, config, limits)   # each root opened once, as a directory
    except OSError as e:
        fail("mcp", f"--root {e.filename}: cannot open: {e.strerror or e}")
    server = build(ws)

    async def main() -> None:
        async with stdio_server() as (read, write):
            await server.run(read, write, server.create_initialization_options())

    print(f"diag mcp: serving {', '.join(map(str, ws.roots.paths))} on stdio", file=sys.stderr)
    anyio.run(main)
