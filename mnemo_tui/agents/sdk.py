"""Provides `serve`: the MCP server of `mnemo mcp` over stdio, on the official `mcp` SDK (its one importer).

The SDK's low-level server takes the tools' schemas as given (`surface.TOOLS`, the hosted package's own), so
`tools/list` answers exactly those; each call's arguments are checked against its tool's schema here, with
jsonschema, as the package's zod schemas check them there. Nothing but the protocol goes to stdout.
"""

from __future__ import annotations

import json
from typing import Any

import anyio
import jsonschema
import mcp_types as types
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server
from mcp.shared.exceptions import MCPError

from mnemo_tui import __version__
from mnemo_tui.agents import surface
from mnemo_tui.agents.answers import Answers, arguments
from mnemo_tui.backends import Backend
from mnemo_tui.errors import MnemoError, NotFound

RESOURCE_NOT_FOUND = -32002  # MCP's code for a resource that does not exist (spec, "Resources: Error Handling")


def _text(text: str, *, error: bool = False) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)], is_error=error)


def _problem(error: jsonschema.ValidationError) -> str:
    """One schema violation in words, without echoing the value (it may be long, or anything at all)."""
    if error.validator == "required":
        return str(error.message)
    where = ".".join(str(p) for p in error.absolute_path) or "arguments"
    return f"{where} must satisfy {error.validator}: {json.dumps(error.validator_value, ensure_ascii=False)}"


def build(backend: Backend, agent_name: str | None = None) -> Server[Any]:
    """The server: the ten tools, the three prompts and the memory-item resource over `backend`."""
    answers = Answers(backend, agent_name)
    methods = answers.tools()
    schemas = {t["name"]: t["inputSchema"] for t in surface.TOOLS}
    validators = {name: jsonschema.Draft7Validator(schema) for name, schema in schemas.items()}
    tools = [
        types.Tool(
            name=t["name"],
            description=t["description"],
            input_schema=t["inputSchema"],
            annotations=types.ToolAnnotations.model_validate(t["annotations"]),
        )
        for t in surface.TOOLS
    ]
    prompts = [
        types.Prompt(
            name=name,
            title=p["title"],
            description=p["description"],
            arguments=[types.PromptArgument(name=a, description=d, required=r) for a, d, r in p["arguments"]],
        )
        for name, p in surface.PROMPTS.items()
    ]

    async def list_tools(ctx: Any, params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
        return types.ListToolsResult(tools=tools)

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        name, given = params.name, dict(params.arguments or {})
        if name not in methods:
            return _text(f"Unknown tool: {name}", error=True)
        problems = sorted(validators[name].iter_errors(given), key=lambda e: list(e.absolute_path))
        if problems:
            return _text(f"Invalid arguments for {name}: {_problem(problems[0])}", error=True)
        try:
            return _text(methods[name](**arguments(schemas[name], given)))
        except MnemoError as exc:
            return _text(f"{exc.code}: {exc}", error=True)

    async def list_prompts(ctx: Any, params: types.PaginatedRequestParams | None) -> types.ListPromptsResult:
        return types.ListPromptsResult(prompts=prompts)

    async def get_prompt(ctx: Any, params: types.GetPromptRequestParams) -> types.GetPromptResult:
        spec = surface.PROMPTS.get(params.name)
        if spec is None:
            raise MCPError(types.INVALID_PARAMS, f"Unknown prompt: {params.name}")
        given = dict(params.arguments or {})
        args: dict[str, str] = {}
        for arg, _, required in spec["arguments"]:
            value = given.get(arg)
            # The package trims every argument but `domain`, which is matched byte for byte.
            value = value if arg == "domain" or value is None else value.strip()
            if required and not value:
                raise MCPError(types.INVALID_PARAMS, f"prompt {params.name} needs a non-blank {arg}")
            if value:
                args[arg] = value
        message = types.PromptMessage(
            role="user", content=types.TextContent(type="text", text=surface.prompt_text(params.name, args))
        )
        return types.GetPromptResult(description=spec["description"], messages=[message])

    async def list_templates(
        ctx: Any, params: types.PaginatedRequestParams | None
    ) -> types.ListResourceTemplatesResult:
        template = types.ResourceTemplate(
            name=surface.RESOURCE_NAME,
            title=surface.RESOURCE_TITLE,
            uri_template=surface.RESOURCE_TEMPLATE,
            description=surface.RESOURCE_DESCRIPTION,
            mime_type="application/json",
        )
        return types.ListResourceTemplatesResult(resource_templates=[template])

    async def list_resources(ctx: Any, params: types.PaginatedRequestParams | None) -> types.ListResourcesResult:
        return types.ListResourcesResult(resources=[])  # a template only: reading needs a known id

    async def read_resource(ctx: Any, params: types.ReadResourceRequestParams) -> types.ReadResourceResult:
        uri = str(params.uri)
        if not uri.startswith(surface.RESOURCE_PREFIX) or uri == surface.RESOURCE_PREFIX:
            raise MCPError(RESOURCE_NOT_FOUND, f"Unknown resource: {uri}")
        from urllib.parse import unquote

        try:
            text = answers.memory_item(unquote(uri[len(surface.RESOURCE_PREFIX) :]))
        except NotFound as exc:
            raise MCPError(RESOURCE_NOT_FOUND, str(exc)) from None
        except MnemoError as exc:
            raise MCPError(types.INTERNAL_ERROR, f"{exc.code}: {exc}") from None
        contents = types.TextResourceContents(uri=uri, mime_type="application/json", text=text)
        return types.ReadResourceResult(contents=[contents])

    return Server(
        surface.SERVER_NAME,
        version=__version__,
        instructions=surface.INSTRUCTIONS,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
        on_list_prompts=list_prompts,
        on_get_prompt=get_prompt,
        on_list_resource_templates=list_templates,
        on_list_resources=list_resources,
        on_read_resource=read_resource,
    )


def serve(backend: Backend, agent_name: str | None = None) -> None:
    """Serve MCP over this process's stdin and stdout until the client closes stdin."""
    server = build(backend, agent_name)

    async def main() -> None:
        async with stdio_server() as (read, write):
            await server.run(read, write, server.create_initialization_options())

    anyio.run(main)
