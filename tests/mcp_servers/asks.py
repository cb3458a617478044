"""A test MCP server that uses everything a client must handle beyond plain tool results.

It asks the person for input (forms with every field kind, a URL to open, a secret it must not
get), reports progress, sends log messages, returns links and embedded resources, changes its tool
list mid-session, and offers prompts with argument completion. The same tools work on both
protocol eras, because a client must handle both:

* on 2025-11-25 (the `initialize` handshake) a tool that needs input sends `elicitation/create`
  while the call is open and waits for the answer; a URL-mode request carries an elicitation id
  and, once accepted, is followed by `notifications/elicitation/complete` for that id;
* on 2026-07-28 (per-request envelopes) the same tool answers the call with an
  `InputRequiredResult` and reads the answer from the client's retry of the call (the
  multi-round-trip flow); there is no elicitation id and no completion notification there.

Tools:

* `order_pizza`: one form with every field kind (text with a minimum length, email, uri, date,
  date-time, bounded integer and number with defaults, boolean, a choice with `enumNames`, a
  choice with `oneOf` titles, several choices with `anyOf` titles and an item limit). Returns
  `accepted: {content as JSON, sorted keys}`, `declined` or `cancelled`, so a test sees exactly
  what the client sent.
* `ask_colour(label)`: one choice; returns `label: <colour>` (or `label: declined` /
  `label: cancelled`). The request's message names the label, so two calls running at once can
  be answered differently.
* `sign_in_elsewhere`: URL mode (`https://login.example.com/authorize?x=1`); returns
  `url accepted`, `url declined` or `url cancelled`.
* `ask_secret`: a form asking for an `api_token` ("API token"), which a careful client refuses to
  show; echoes like `order_pizza`.
* `slow_count(n=3, pause=0.05)`: reports progress `i` of `n` with the message `step i of n`,
  pausing `pause` seconds after each, then returns `counted n`.
* `chatty`: sends an info and a warning log message, then returns `logged`. On 2026-07-28 a log
  message reaches only a client that asked for that level in the request.
* `give_resources`: a text block, a resource link, an embedded Markdown text resource and an
  embedded PNG (a blob). The linked and embedded resources can also be read with `resources/read`.
* `grow_tools` adds `new_tool`, `shrink_tools` removes it; both announce the change
  (`notifications/tools/list_changed` on 2025-11-25, `subscriptions/listen` on 2026-07-28).

With `ASKS_LOG` set to a file, each question a tool asks and each answer it receives is appended to
it as one JSON line, `{"tool", "question", "answer"}` (`answer` null for the asking), so a test sees
exactly what reached the tool and how often, whichever server process served the call.

Tools that only ask or answer are annotated read-only and closed-world, so an approval policy lets
them run at once; `grow_tools` and `shrink_tools` change the server and carry no annotations.

Prompts: `summarize(topic, tone?)`, whose `topic` is completed (`completion/complete`) from
"weather", "wealth", "welding"; and `hello`, without arguments.

Run as `python -m tests.mcp_servers.asks [--http PORT] [--protocol auto|2025-11-25|2026-07-28]`:

* without `--http` it serves stdio; `--http PORT` serves Streamable HTTP on 127.0.0.1 (`0` picks a
  free port) and prints the endpoint URL, `http://127.0.0.1:PORT/mcp`, as the first line on stdout;
* `--protocol auto` (the default) serves whichever era the client opens with: a client in "auto"
  mode gets 2026-07-28. `--protocol 2025-11-25` refuses the 2026-07-28 envelope, so an "auto"
  client falls back to the handshake and gets `elicitation/create` mid-call. `--protocol
  2026-07-28` refuses the handshake, so only a client that speaks 2026-07-28 connects.
"""

from __future__ import annotations

import argparse
import base64
import json
import logging
import os
import socket
import sys
import uuid
import warnings
from pathlib import Path
from typing import Annotated, Any

import anyio
import mcp_types as types
import uvicorn
from mcp.server import MCPServer
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.mcpserver import Context
from mcp.server.runner import serve_loop
from mcp.server.session import ServerSession
from mcp.server.stdio import stdio_server
from mcp.shared.exceptions import MCPDeprecationWarning, MCPError
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS, MODERN_PROTOCOL_VERSIONS
from pydantic import Field

server = MCPServer("asks", log_level="WARNING")
READ_ONLY = types.ToolAnnotations(read_only_hint=True, open_world_hint=False)

LOGIN_URL = "https://login.example.com/authorize?x=1"
TOPICS = ("weather", "wealth", "welding")
COLOURS = ("red", "green", "blue")
TOPPINGS = (
    ("mushroom", "Mushrooms"),
    ("olive", "Olives"),
    ("pepperoni", "Pepperoni"),
    ("pineapple", "Pineapple"),
)
MENU_URI = "asks://menu/today"
RECEIPT_URI = "asks://receipts/latest"
LOGO_URI = "asks://images/logo.png"
MENU_MARKDOWN = "# Today's menu\n\n- Margherita\n- Funghi\n"
RECEIPT_MARKDOWN = "# Receipt\n\n| item | price |\n|---|---|\n| Margherita | 9.50 |\n"
# A 1x1 transparent PNG.
LOGO_PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=="
)

PIZZA_FORM: dict[str, Any] = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "title": "Your name", "minLength": 2},
        "email": {"type": "string", "title": "Email", "format": "email"},
        "website": {"type": "string", "title": "Website", "format": "uri"},
        "delivery_date": {"type": "string", "title": "Delivery date", "format": "date"},
        "deliver_at": {"type": "string", "title": "Deliver at", "format": "date-time"},
        "quantity": {
            "type": "integer",
            "title": "How many",
            "description": "Between 1 and 10 pizzas.",
            "minimum": 1,
            "maximum": 10,
            "default": 1,
        },
        "tip": {"type": "number", "title": "Tip (%)", "minimum": 0, "maximum": 100},
        "extra_cheese": {"type": "boolean", "title": "Extra cheese", "default": False},
        "size": {
            "type": "string",
            "title": "Size",
            "enum": ["small", "medium", "large"],
            "enumNames": ["Small", "Medium", "Large"],
            "default": "medium",
        },
        "crust": {
            "type": "string",
            "title": "Crust",
            "oneOf": [{"const": "thin", "title": "Thin crust"}, {"const": "thick", "title": "Thick crust"}],
        },
        "toppings": {
            "type": "array",
            "title": "Toppings",
            "description": "Up to three.",
            "minItems": 0,
            "maxItems": 3,
            "items": {"anyOf": [{"const": value, "title": title} for value, title in TOPPINGS]},
        },
    },
    "required": ["name", "email"],
}

COLOUR_FORM: dict[str, Any] = {
    "type": "object",
    "properties": {"colour": {"type": "string", "title": "Colour", "enum": list(COLOURS)}},
    "required": ["colour"],
}

SECRET_FORM: dict[str, Any] = {
    "type": "object",
    "properties": {"api_token": {"type": "string", "title": "API token"}},
    "required": ["api_token"],
}


def _modern(ctx: Context) -> bool:
    return ctx.protocol_version in MODERN_PROTOCOL_VERSIONS


def _record(tool: str, key: str, answer: types.ElicitResult | None) -> None:
    """One line in `ASKS_LOG` (when set): a question asked (`answer` null) or an answer received."""
    log = os.environ.get("ASKS_LOG")
    if not log:
        return
    received = None if answer is None else {"action": answer.action, "content": answer.content}
    with Path(log).open("a", encoding="utf-8") as out:
        out.write(json.dumps({"tool": tool, "question": key, "answer": received}) + "\n")


async def _ask(
    ctx: Context,
    tool: str,
    key: str,
    params: types.ElicitRequestFormParams | types.ElicitRequestURLParams,
) -> types.ElicitResult | types.InputRequiredResult:
    """Ask the client the way the connection's protocol era asks (recorded in `ASKS_LOG`).

    2026-07-28: the answer is in the retried call's `input_responses` under `key`, or the call is
    answered with an `InputRequiredResult` asking for it. Earlier: `elicitation/create` on the open
    call, waiting for the answer.
    """
    if _modern(ctx):
        answer = (ctx.input_responses or {}).get(key)
        if isinstance(answer, types.ElicitResult):
            _record(tool, key, answer)
            return answer
        _record(tool, key, None)
        return types.InputRequiredResult(
            input_requests={key: types.ElicitRequest(params=params)}, request_state=key
        )
    session: ServerSession = ctx.session
    _record(tool, key, None)
    if isinstance(params, types.ElicitRequestURLParams):
        assert params.elicitation_id is not None
        answer = await session.elicit_url(
            params.message, params.url, params.elicitation_id, related_request_id=ctx.request_id
        )
    else:
        answer = await session.elicit_form(
            params.message, params.requested_schema, related_request_id=ctx.request_id
        )
    _record(tool, key, answer)
    return answer


def _echo(answer: types.ElicitResult) -> str:
    if answer.action == "accept":
        return f"accepted: {json.dumps(answer.content or {}, sort_keys=True)}"
    return "declined" if answer.action == "decline" else "cancelled"


@server.tool(annotations=READ_ONLY, structured_output=False)
async def order_pizza(ctx: Context) -> str | types.InputRequiredResult:
    """Order a pizza: asks for the order in a form and says exactly what it was given."""
    answer = await _ask(
        ctx,
        "order_pizza",
        "order",
        types.ElicitRequestFormParams(message="What pizza would you like?", requested_schema=PIZZA_FORM),
    )
    return answer if isinstance(answer, types.InputRequiredResult) else _echo(answer)


@server.tool(annotations=READ_ONLY, structured_output=False)
async def ask_colour(label: str, ctx: Context) -> str | types.InputRequiredResult:
    """Ask for a colour; the answer is returned as `label: colour`."""
    answer = await _ask(
        ctx,
        "ask_colour",
        "colour",
        types.ElicitRequestFormParams(message=f"Pick a colour for {label}", requested_schema=COLOUR_FORM),
    )
    if isinstance(answer, types.InputRequiredResult):
        return answer
    if answer.action == "accept":
        return f"{label}: {(answer.content or {}).get('colour')}"
    return f"{label}: {'declined' if answer.action == 'decline' else 'cancelled'}"


@server.tool(annotations=READ_ONLY, structured_output=False)
async def ask_secret(ctx: Context) -> str | types.InputRequiredResult:
    """Ask for an API token in a form (which a careful client refuses to show)."""
    answer = await _ask(
        ctx,
        "ask_secret",
        "secret",
        types.ElicitRequestFormParams(
            message="Paste your API token to continue", requested_schema=SECRET_FORM
        ),
    )
    return answer if isinstance(answer, types.InputRequiredResult) else _echo(answer)


@server.tool(annotations=READ_ONLY, structured_output=False)
async def sign_in_elsewhere(ctx: Context) -> str | types.InputRequiredResult:
    """Send the person to a sign-in page outside the chat (URL mode)."""
    message = "Sign in to Example to let me read your calendar"
    if _modern(ctx):
        params = types.ElicitRequestURLParams(message=message, url=LOGIN_URL)
        answer = await _ask(ctx, "sign_in_elsewhere", "sign_in", params)
        if isinstance(answer, types.InputRequiredResult):
            return answer
    else:
        elicitation_id = uuid.uuid4().hex
        params = types.ElicitRequestURLParams(message=message, url=LOGIN_URL, elicitation_id=elicitation_id)
        answer = await _ask(ctx, "sign_in_elsewhere", "sign_in", params)
        assert isinstance(answer, types.ElicitResult)
        if answer.action == "accept":
            # The sign-in "happens" at once; say so for the id the client was given.
            await ctx.session.send_elicit_complete(elicitation_id, related_request_id=ctx.request_id)
    return {"accept": "url accepted", "decline": "url declined"}.get(answer.action, "url cancelled")


@server.tool(annotations=READ_ONLY, structured_output=False)
async def slow_count(ctx: Context, n: int = 3, pause: float = 0.05) -> str:
    """Count to `n`, reporting progress after each step and pausing `pause` seconds."""
    for step in range(1, n + 1):
        await ctx.report_progress(step, n, f"step {step} of {n}")
        await anyio.sleep(pause)
    return f"counted {n}"


@server.tool(annotations=READ_ONLY, structured_output=False)
async def chatty(ctx: Context) -> str:
    """Send an info and a warning log message to the client."""
    await ctx.info("warming up the oven", logger_name="asks")
    await ctx.warning("the oven is running hot", logger_name="asks")
    return "logged"


@server.tool(annotations=READ_ONLY, structured_output=False)
def give_resources() -> types.CallToolResult:
    """Return a text, a resource link, an embedded Markdown resource and an embedded PNG."""
    return types.CallToolResult(
        content=[
            types.TextContent(type="text", text="Here is today's menu, the receipt and our logo."),
            types.ResourceLink(
                type="resource_link",
                uri=MENU_URI,
                name="menu",
                title="Today's menu",
                mime_type="text/markdown",
            ),
            types.EmbeddedResource(
                type="resource",
                resource=types.TextResourceContents(
                    uri=RECEIPT_URI, mime_type="text/markdown", text=RECEIPT_MARKDOWN
                ),
            ),
            types.EmbeddedResource(
                type="resource",
                resource=types.BlobResourceContents(
                    uri=LOGO_URI, mime_type="image/png", blob=base64.b64encode(LOGO_PNG).decode()
                ),
            ),
        ]
    )


@server.resource(MENU_URI, name="menu", title="Today's menu", mime_type="text/markdown")
def menu() -> str:
    return MENU_MARKDOWN


@server.resource(RECEIPT_URI, name="receipt", mime_type="text/markdown")
def receipt() -> str:
    return RECEIPT_MARKDOWN


@server.resource(LOGO_URI, name="logo", mime_type="image/png")
def logo() -> bytes:
    return LOGO_PNG


def new_tool() -> str:
    return "I am new"


async def _announce_tools_changed(ctx: Context) -> None:
    await ctx.notify_tools_changed()  # 2026-07-28 connections (subscriptions/listen)
    if not _modern(ctx):
        await ctx.session.send_tool_list_changed()


@server.tool(structured_output=False)
async def grow_tools(ctx: Context) -> str:
    """Add the tool `new_tool` and tell the client the tool list changed."""
    if server._tool_manager.get_tool("new_tool") is None:
        server.add_tool(new_tool, description="A tool added while the session runs.", structured_output=False)
    await _announce_tools_changed(ctx)
    return "added new_tool"


@server.tool(structured_output=False)
async def shrink_tools(ctx: Context) -> str:
    """Remove the tool `new_tool` and tell the client the tool list changed."""
    if server._tool_manager.get_tool("new_tool") is not None:
        server.remove_tool("new_tool")
    await _announce_tools_changed(ctx)
    return "removed new_tool"


@server.prompt()
def summarize(
    topic: Annotated[str, Field(description="What to summarize; completion offers a few.")],
    tone: Annotated[str | None, Field(description="How it should sound, e.g. dry or cheerful.")] = None,
) -> str:
    """Summarize what is known about a topic."""
    return f"Summarize what you know about {topic}" + (f" in a {tone} tone." if tone else ".")


@server.prompt()
def hello() -> str:
    """Say hello."""
    return "Say hello to the person."


@server.completion()  # type: ignore[untyped-decorator]
async def complete(
    ref: types.PromptReference | types.ResourceTemplateReference,
    argument: types.CompletionArgument,
    context: types.CompletionContext | None,
) -> types.Completion | None:
    if isinstance(ref, types.PromptReference) and ref.name == "summarize" and argument.name == "topic":
        values = [topic for topic in TOPICS if topic.startswith(argument.value)]
        return types.Completion(values=values, total=len(values), has_more=False)
    return None


def _pin(protocol: str) -> None:
    """Refuse the era the server is not pinned to, in the way that makes a client choose the other."""

    async def refuse_other_era(ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        if protocol in MODERN_PROTOCOL_VERSIONS and ctx.method == "initialize":
            supported = list(MODERN_PROTOCOL_VERSIONS)
        elif protocol in HANDSHAKE_PROTOCOL_VERSIONS and ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
            supported = list(HANDSHAKE_PROTOCOL_VERSIONS)
        else:
            return await call_next(ctx)
        requested = ctx.protocol_version
        if ctx.method == "initialize" and ctx.params is not None:
            requested = str(ctx.params.get("protocolVersion", requested))
        raise MCPError(
            code=types.UNSUPPORTED_PROTOCOL_VERSION,
            message=f"this server speaks protocol {protocol} only",
            data={"supported": supported, "requested": requested},
        )

    server.middleware.append(refuse_other_era)


async def _serve_stdio_handshake_only() -> None:
    """Serve stdio in the handshake era only: the client's first request cannot open 2026-07-28."""
    lowlevel = server._lowlevel_server
    async with stdio_server() as (read_stream, write_stream), lowlevel.lifespan(lowlevel) as state:
        await serve_loop(
            lowlevel,
            read_stream,
            write_stream,
            lifespan_state=state,
            init_options=lowlevel.create_initialization_options(),
        )


async def _serve_http(port: int) -> None:
    """Serve Streamable HTTP on a socket bound first, so the URL printed is the one listening."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", port))
    sock.listen(128)
    app = server.streamable_http_app(host="127.0.0.1")
    config = uvicorn.Config(app, log_level="warning", lifespan="on")
    print(f"http://127.0.0.1:{sock.getsockname()[1]}/mcp", flush=True)
    await uvicorn.Server(config).serve(sockets=[sock])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--http", type=int, metavar="PORT", help="serve Streamable HTTP on 127.0.0.1:PORT")
    parser.add_argument(
        "--protocol", choices=["auto", "2025-11-25", "2026-07-28"], default="auto", help="the era to serve"
    )
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    warnings.filterwarnings("ignore", category=MCPDeprecationWarning)
    if args.protocol != "auto":
        _pin(args.protocol)
    if args.http is not None:
        anyio.run(_serve_http, args.http)
    elif args.protocol in HANDSHAKE_PROTOCOL_VERSIONS:
        anyio.run(_serve_stdio_handshake_only)
    else:
        server.run("stdio")


if __name__ == "__main__":
    main()
