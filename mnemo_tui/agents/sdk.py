"""Provides `build`, the one definition of mnemo's MCP server (tools, prompts, the resources, the feeds'
subscriptions over `subscriptions.Feeds`), and `serve`, it over stdio for `mnemo mcp`, on the official `mcp`
SDK (`http.py` serves the same server over HTTP).

The SDK's low-level server takes the tools' schemas as given (`surface.TOOLS`, the hosted package's own), so
`tools/list` answers exactly those; each call's arguments are checked against its tool's schema here, with
jsonschema, as the package's zod schemas check them there. Nothing but the protocol goes to stdout.

The backend is synchronous: `build` reaches it through a `Reach`, which runs the work off the event loop (over
stdio one call at a time in a worker thread; over HTTP on the server's database threads, as the key's
principal), so the event loop keeps reading (a `ping` is answered at once, a `notifications/cancelled` honoured
by the SDK). The SDK's stdio reader drops unanswered what it cannot parse and takes no option for it, so
`lines.check` runs in front of it.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections import Counter
from collections.abc import AsyncIterator, Callable
from types import TracebackType
from typing import Any, Protocol, TypeVar, cast

import anyio
import anyio.lowlevel
import jsonschema
import mcp_types as types
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server
from mcp.shared.exceptions import MCPError
from mcp.shared.message import SessionMessage
from mcp.shared.subscriptions import SUBSCRIPTION_ID_META_KEY, ResourceUpdated, event_to_notification

from mnemo_tui import __version__
from mnemo_tui.agents import lines, surface
from mnemo_tui.agents.answers import Answers, Reply, arguments
from mnemo_tui.agents.budget import finish
from mnemo_tui.agents.shapes import OUTPUT_SCHEMAS
from mnemo_tui.agents.subscriptions import Capped, Feeds, Outbox, Probe
from mnemo_tui.backends import Backend
from mnemo_tui.backends.local import LocalBackend
from mnemo_tui.errors import Forbidden, MnemoError, NotFound, ValidationError
from mnemo_tui.limits import EMBEDDED_PROBE_SECONDS

RESOURCE_NOT_FOUND = -32002  # MCP's code for a resource that does not exist (spec, "Resources: Error Handling")
EOF_GRACE = 600.0  # seconds stdin's end waits for the calls still running to be answered (each has its deadline)
WRITES = frozenset(t["name"] for t in surface.TOOLS if not t["annotations"]["readOnlyHint"])
T = TypeVar("T")


class Reach(Protocol):
    """How the server reaches its backend: `work(answers)` run off the event loop for the request `ctx`, its
    result handed back (`writes`: the work may write). Raises the `MnemoError` that kept it from running."""

    async def __call__(self, ctx: Any, work: Callable[[Answers], T], *, writes: bool) -> T: ...


def local(
    backend: Backend | MnemoError,
    agent_name: str | None = None,
    gate: anyio.Lock | None = None,
    written: Callable[[], None] | None = None,
) -> Reach:
    """One backend, its calls one at a time in a worker thread (it is synchronous: a SQLite connection is one);
    `backend` may be the error that kept it from opening (no key for the endpoint), raised by every call.
    `gate`: the lock the calls take (shared with the subscriptions' reads); `written`: told after a call that
    may have written."""
    answers = Answers(backend, agent_name) if not isinstance(backend, MnemoError) else None
    held = gate if gate is not None else anyio.Lock()

    async def reach(ctx: Any, work: Callable[[Answers], T], *, writes: bool) -> T:
        if answers is None:
            assert isinstance(backend, MnemoError)
            raise backend
        try:
            async with held:
                return await anyio.to_thread.run_sync(work, answers)
        finally:
            if writes and written is not None:
                written()

    return reach


def _embedded_feeds(backend: Backend | MnemoError, gate: anyio.Lock) -> tuple[Feeds, Probe] | None:
    """The stdio server's subscriptions on the embedded store, woken as `mnemo recent --follow` is (its change
    token probed while anyone subscribes), or None for any other backend (then none are offered)."""
    if not isinstance(backend, LocalBackend):
        return None
    engine = backend.engine

    async def read(fn: Callable[[Any], T]) -> T:
        async with gate:
            return await anyio.to_thread.run_sync(fn, engine)

    async def token() -> object:
        return await read(lambda e: e.change_token())

    async def clocks(buckets: list[int]) -> dict[int, int]:
        found: dict[int, int] = await read(lambda e: e.bucket_clocks(buckets))
        return found

    async def check(key: str) -> None:
        return None  # one process, one principal: nothing is revoked under it

    probe = Probe(token, EMBEDDED_PROBE_SECONDS)
    probe.clocks = clocks
    return Feeds(probe, read, check, Capped()), probe


def _text(text: str, *, error: bool = False) -> types.CallToolResult:
    """A tool result: its one text, bounded and shown through the sanitizer (`budget.finish`) when an error."""
    shown = finish(text) if error else text  # the tools' own answers are finished in `answers`
    return types.CallToolResult(content=[types.TextContent(type="text", text=shown)], is_error=error)


def _reply(reply: Reply) -> types.CallToolResult:
    """A tool's success: its text, and its data as `structuredContent` (its `outputSchema`'s shape)."""
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=str(reply))], structured_content=reply.data, is_error=False
    )


def _problem(error: jsonschema.ValidationError) -> str:
    """One schema violation in words, without echoing the value (it may be long, or anything at all)."""
    if error.validator == "required":
        return str(error.message)
    where = ".".join(str(p) for p in error.absolute_path) or "arguments"
    return f"{where} must satisfy {error.validator}: {json.dumps(error.validator_value, ensure_ascii=False)}"


# Whose request `ctx` is: (principal, key) as the server checked them ("" for the stdio server's one key).
Who = Callable[[Any], tuple[str, str]]
OUTBOX = "mnemo.outbox"  # a 2025-11-25 connection's `state` key: its subscriptions' outbox


def _not_a_feed(uri: str, exc: BaseException | None = None) -> MCPError:
    said = f"Unknown resource: {uri}" + (f" ({exc})" if exc is not None else "")
    return MCPError(RESOURCE_NOT_FOUND, finish(said))


async def _watch(feeds: Feeds, outbox: Outbox, uri: str) -> None:
    """`feeds.watch`, its refusals as MCP errors: a feed the key cannot read is a missing resource."""
    try:
        await feeds.watch(outbox, uri)
    except LookupError:
        raise _not_a_feed(uri) from None
    except (NotFound, Forbidden, ValidationError) as exc:
        raise _not_a_feed(uri, exc) from None
    except MnemoError as exc:  # a bound (429 / 503: the HTTP mount answers those first), the store
        raise MCPError(types.INTERNAL_ERROR, finish(f"{exc.code}: {exc}")) from None


def _subscriptions(feeds: Feeds, who: Who) -> dict[str, Any]:
    """The handlers of both revisions' subscriptions over `feeds` (docs/mcp.md, "Feeds and subscriptions")."""

    def session_outbox(ctx: Any) -> Outbox:
        # The SDK hands a request handler its connection only through the session (no public way to its
        # per-connection `state` and teardown, where a session's subscriptions live and are freed).
        connection = ctx.session._connection
        outbox: Outbox | None = connection.state.get(OUTBOX)
        if outbox is None or outbox.ended:  # none yet, or cut: a subscription now starts afresh
            principal, key = who(ctx)
            outbox = feeds.opened(Outbox(key, principal))
            connection.state[OUTBOX] = outbox
            made = outbox

            async def pump() -> None:
                if not await made.pump(connection.send_resource_updated, feeds.send_seconds):
                    sys.stderr.write("mnemo mcp: a session took no notification within the send deadline: cut\n")
                feeds.close(made)

            task = asyncio.get_running_loop().create_task(pump())
            connection.exit_stack.callback(feeds.close, made)  # the session's end frees everything
            connection.exit_stack.callback(task.cancel)
        return outbox

    async def subscribe(ctx: Any, params: types.SubscribeRequestParams) -> types.EmptyResult:
        await _watch(feeds, session_outbox(ctx), params.uri)
        return types.EmptyResult()

    async def unsubscribe(ctx: Any, params: types.UnsubscribeRequestParams) -> types.EmptyResult:
        feeds.unwatch(session_outbox(ctx), params.uri)
        return types.EmptyResult()

    async def listen(ctx: Any, params: types.SubscriptionsListenRequestParams) -> types.SubscriptionsListenResult:
        # The SDK's `ListenHandler` honours every URI asked for and bounds streams per server only: this one
        # subscribes each URI as `resources/subscribe` does (refused whole when one is not the key's), and is
        # cut at the send deadline. The lists never change, so their flags are honoured and never fire.
        if ctx.request_id is None:
            raise MCPError(types.INVALID_REQUEST, "subscriptions/listen requires a request id")
        meta: dict[str, Any] = {SUBSCRIPTION_ID_META_KEY: ctx.request_id}
        asked = params.notifications
        uris = list(dict.fromkeys(asked.resource_subscriptions or ()))
        principal, key = who(ctx)
        outbox = feeds.opened(Outbox(key, principal))
        try:
            for uri in uris:
                await _watch(feeds, outbox, uri)
            honored = types.SubscriptionFilter(
                tools_list_changed=True if asked.tools_list_changed else None,
                prompts_list_changed=True if asked.prompts_list_changed else None,
                resources_list_changed=True if asked.resources_list_changed else None,
                resource_subscriptions=uris or None,
            )
            acknowledged = types.SubscriptionsAcknowledgedNotificationParams(notifications=honored, _meta=meta)
            await ctx.session.send_notification(
                types.SubscriptionsAcknowledgedNotification(params=acknowledged), related_request_id=ctx.request_id
            )

            async def send(uri: str) -> None:
                notification = event_to_notification(ResourceUpdated(uri=uri), meta)
                await ctx.session.send_notification(notification, related_request_id=ctx.request_id)

            if not await outbox.pump(send, feeds.send_seconds):
                sys.stderr.write("mnemo mcp: a listen stream took no notification within the send deadline: cut\n")
        finally:
            feeds.close(outbox)  # the stream's end frees everything (a revoked key's ends it here)
        return types.SubscriptionsListenResult(_meta=meta)

    return {
        "on_subscribe_resource": subscribe,
        "on_unsubscribe_resource": unsubscribe,
        "on_subscriptions_listen": listen,
    }


def build(reach: Reach, feeds: Feeds | None = None, who: Who | None = None) -> Server[Any]:
    """The server: the ten tools, the three prompts, the memory-item resource and the feeds, over what `reach`
    reaches; given `feeds` (and `who`, whose each request is), the feeds' subscriptions in both revisions, and
    only then the capability (`resources.subscribe`) advertised.

    When `reach` cannot reach a backend (no key for the endpoint) the handshake and the lists still answer, and
    every tool call is an error result that says why (how to give a key).
    """
    methods = {t["name"] for t in surface.TOOLS}
    schemas = {t["name"]: t["inputSchema"] for t in surface.TOOLS}
    validators = {name: jsonschema.Draft7Validator(schema) for name, schema in schemas.items()}
    tools = [
        types.Tool(
            name=t["name"],
            description=t["description"],
            input_schema=t["inputSchema"],
            output_schema=OUTPUT_SCHEMAS[t["name"]],
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
        taken = arguments(schemas[name], given)
        done: list[types.CallToolResult] = []

        def work(answers: Answers) -> types.CallToolResult:
            try:
                result = _reply(answers.tools()[name](**taken))
            except MnemoError as exc:
                result = _text(f"{exc.code}: {exc}", error=True)
            done.append(result)
            return result

        try:
            result = await reach(ctx, work, writes=name in WRITES)
            await anyio.lowlevel.checkpoint_if_cancelled()
        except MnemoError as exc:  # the backend could not be reached (no key, a refused one, the server stopping)
            return _text(f"{exc.code}: {exc}", error=True)
        except anyio.get_cancelled_exc_class():
            # Cancelled (by the client, or the server closing): no result is sent, but a write that took effect
            # stays; the client hears of it on the next read, a person here.
            if done and not done[0].is_error and name in WRITES:
                said = done[0].content[0].text.split("\n", 1)[0]  # type: ignore[union-attr]
                sys.stderr.write(
                    f"mnemo mcp: {name} (request {ctx.request_id!r}) was cancelled after it took effect, so its "
                    f"result was not sent: {said}\n"
                )
            raise
        return result

    async def list_prompts(ctx: Any, params: types.PaginatedRequestParams | None) -> types.ListPromptsResult:
        return types.ListPromptsResult(prompts=prompts)

    async def get_prompt(ctx: Any, params: types.GetPromptRequestParams) -> types.GetPromptResult:
        spec = surface.PROMPTS.get(params.name)
        if spec is None:
            raise MCPError(types.INVALID_PARAMS, finish(f"Unknown prompt: {params.name}"))
        given = dict(params.arguments or {})
        args: dict[str, str] = {}
        for arg, _, required in spec["arguments"]:
            value = given.get(arg)
            # The package trims every argument but `domain`, which is matched byte for byte.
            value = value if arg == "domain" or value is None else value.strip()
            if required and not value:
                raise MCPError(types.INVALID_PARAMS, finish(f"prompt {params.name} needs a non-blank {arg}"))
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
        feeds = types.ResourceTemplate(
            name=surface.FEED_SCOPE_NAME,
            title=surface.FEED_SCOPE_TITLE,
            uri_template=surface.FEED_TEMPLATE,
            description=surface.FEED_SCOPE_DESCRIPTION,
            mime_type="application/json",
        )
        return types.ListResourceTemplatesResult(resource_templates=[template, feeds])

    async def list_resources(ctx: Any, params: types.PaginatedRequestParams | None) -> types.ListResourcesResult:
        own = types.Resource(
            name=surface.FEED_NAME,
            title=surface.FEED_TITLE,
            uri=surface.FEED_URI,
            description=surface.FEED_DESCRIPTION,
            mime_type="application/json",
        )
        return types.ListResourcesResult(resources=[own])  # the items are a template: reading needs a known id

    async def read_feed(ctx: Any, uri: str, scope: str | None) -> types.ReadResourceResult:
        try:
            text = await reach(ctx, lambda answers: answers.feed(scope), writes=False)
        except (NotFound, Forbidden, ValidationError) as exc:  # no such scope for this key: as a missing resource
            raise MCPError(RESOURCE_NOT_FOUND, finish(f"Unknown resource: {uri} ({exc})")) from None
        except MnemoError as exc:
            raise MCPError(types.INTERNAL_ERROR, finish(f"{exc.code}: {exc}")) from None
        contents = types.TextResourceContents(uri=uri, mime_type="application/json", text=text)
        return types.ReadResourceResult(contents=[contents])

    async def read_resource(ctx: Any, params: types.ReadResourceRequestParams) -> types.ReadResourceResult:
        uri = str(params.uri)
        try:
            scope = surface.feed_scope(uri)
        except LookupError:
            pass
        else:
            return await read_feed(ctx, uri, scope)
        if not uri.startswith(surface.RESOURCE_PREFIX) or uri == surface.RESOURCE_PREFIX:
            raise MCPError(RESOURCE_NOT_FOUND, finish(f"Unknown resource: {uri}"))
        from urllib.parse import unquote

        memory_id = unquote(uri[len(surface.RESOURCE_PREFIX) :])
        try:
            text = await reach(ctx, lambda answers: answers.memory_item(memory_id), writes=False)
        except NotFound as exc:
            raise MCPError(RESOURCE_NOT_FOUND, finish(str(exc))) from None
        except MnemoError as exc:
            raise MCPError(types.INTERNAL_ERROR, finish(f"{exc.code}: {exc}")) from None
        contents = types.TextResourceContents(uri=uri, mime_type="application/json", text=text)
        return types.ReadResourceResult(contents=[contents])

    subscriptions = _subscriptions(feeds, who or _own) if feeds is not None else {}
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
        **subscriptions,
    )


def _own(ctx: Any) -> tuple[str, str]:
    raise AssertionError("a server with subscriptions says whose each request is")


class _Open:
    """The requests handed to the SDK that it has neither answered nor seen cancelled (by id, counted)."""

    def __init__(self) -> None:
        self.ids: Counter[str | int] = Counter()
        self.changed = anyio.Event()

    def add(self, request_id: str | int) -> None:
        self.ids[request_id] += 1

    def settle(self, request_id: object) -> None:
        # A cancel may name 7 as "7" (the SDK matches them alike); an answer echoes the id as it came.
        spellings = [request_id, str(request_id)]
        if isinstance(request_id, str) and request_id.isdigit():
            spellings.append(int(request_id))
        for key in spellings:
            if isinstance(key, str | int) and not isinstance(key, bool) and self.ids.get(key, 0) > 0:
                self.ids[key] -= 1
                if self.ids[key] == 0:
                    del self.ids[key]
                self.changed.set()
                return

    async def drained(self) -> None:
        while self.ids:
            self.changed = anyio.Event()
            await self.changed.wait()


class _Answered:
    """The SDK's write stream, noting each answer it sends (so stdin's end waits for the calls still running)."""

    def __init__(self, inner: Any, open_requests: _Open) -> None:
        self.inner, self.open = inner, open_requests

    async def send(self, item: SessionMessage, /) -> None:
        try:
            await self.inner.send(item)
        finally:
            # Settled once the answer is handed on, not before: stdin's end waits for it (`_Open.drained`), then the
            # SDK ends the session and cancels what still runs, so an answer settled first could be cut unsent.
            if isinstance(item.message, types.JSONRPCResponse | types.JSONRPCError):
                self.open.settle(item.message.id)

    async def aclose(self) -> None:
        await self.inner.aclose()

    async def __aenter__(self) -> _Answered:
        await self.inner.__aenter__()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> bool | None:
        return cast("bool | None", await self.inner.__aexit__(exc_type, exc, tb))


class _Front:
    """stdin's lines for the SDK's reader: only those it can read; every other line is answered here.

    The SDK's reader takes a stream of lines and drops what fails its parse; it has no hook to answer it.
    """

    def __init__(
        self, read_line: Callable[[int], str], open_requests: _Open, at_end: Callable[[], None] | None = None
    ) -> None:
        self.read_line, self.open, self.at_end = read_line, open_requests, at_end
        self.write: Any = None  # the SDK's write stream, once `stdio_server` has made it
        self.ready = anyio.Event()

    async def _refuse(self, refusals: list[lines.Refusal]) -> None:
        await self.ready.wait()
        for r in refusals:
            error = types.ErrorData(code=r.code, message=r.message)
            message = types.JSONRPCError(jsonrpc="2.0", id=r.request_id, error=error)
            try:
                await self.write.send(SessionMessage(message))
            except (anyio.ClosedResourceError, anyio.BrokenResourceError):
                return

    async def _line(self) -> str:
        """One line of at most `lines.MAX_LINE` characters, or one character more for a line longer than that
        (the rest of it read and dropped); '' at the end of stdin."""
        line = await anyio.to_thread.run_sync(self.read_line, lines.MAX_LINE + 1, abandon_on_cancel=True)
        tail = line
        while len(tail) > lines.MAX_LINE and not tail.endswith("\n"):
            tail = await anyio.to_thread.run_sync(self.read_line, lines.MAX_LINE, abandon_on_cancel=True)
            if not tail:
                break
        return line

    async def __aiter__(self) -> AsyncIterator[str]:
        while line := await self._line():
            if not line.strip():
                continue  # a blank line is no message (the SDK's reader would refuse it silently too)
            checked = lines.check(line)
            if isinstance(checked, list):
                await self._refuse(checked)
                continue
            text, value = checked
            try:
                types.jsonrpc_message_adapter.validate_json(text, by_name=False)
            except ValueError:
                await self._refuse(lines.invalid(value))
                continue
            request_id = lines.request_id(value)
            if request_id is not None and "method" in value:
                self.open.add(request_id)
            elif value.get("method") == "notifications/cancelled" and isinstance(value.get("params"), dict):
                self.open.settle(value["params"].get("requestId"))  # the SDK answers a cancelled request never
            yield text
        if self.at_end is not None:
            self.at_end()  # the listen streams end (answered), so the calls still running are all there is
        with anyio.move_on_after(EOF_GRACE):
            await self.open.drained()  # stdin ended: the calls still running are answered first


def _claim_stdin() -> int:
    """A private duplicate of fd 0, with fd 0 itself pointed at the null device (left as it is where that fails)."""
    wire = os.dup(0)
    try:
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.close(null)
    except OSError:
        pass  # the protocol is still read from the duplicate
    return wire


def serve(backend: Backend | MnemoError, agent_name: str | None = None) -> None:
    """Serve MCP over this process's stdin and stdout until the client closes stdin."""
    gate = anyio.Lock()
    embedded = _embedded_feeds(backend, gate)
    feeds, probe = embedded if embedded is not None else (None, None)
    reach = local(backend, agent_name, gate, probe.wake if probe is not None else None)
    principal = backend.principal if isinstance(backend, LocalBackend) else ""
    server = build(reach, feeds, lambda ctx: (principal, ""))

    async def main() -> None:
        open_requests = _Open()
        # UTF-8 with invalid bytes replaced, as the SDK's reader decodes; read from a duplicate of fd 0 while fd 0
        # points at the null device, as the SDK does for the stdin it claims, so no child can read the protocol.
        with open(_claim_stdin(), encoding="utf-8", errors="replace") as stdin:
            front = _Front(stdin.readline, open_requests, feeds.close_all if feeds is not None else None)
            # The SDK's reader only iterates what it is given (`async for line in stdin`): the front passes for it.
            async with stdio_server(stdin=cast("anyio.AsyncFile[str]", front)) as (read, write):
                front.write = write
                front.ready.set()
                await server.run(read, _Answered(write, open_requests), server.create_initialization_options())

    anyio.run(main)
