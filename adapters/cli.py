"""`nerve …` command line: load Settings once, build the parts, run one front end. Wiring only."""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
from collections.abc import Awaitable, Callable

from pydantic import ValidationError

from bot.config import Settings
from bot.errors import NerveError
from bot.runtime import Runtime, open_runtime


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="nerve", description="A chat bot whose hands are MCP servers.")
    commands = parser.add_subparsers(dest="command")
    chat = commands.add_parser("chat", help="chat in the terminal (the default)")
    chat.add_argument("--thread", default="default", help="conversation to continue (default: default)")
    ask = commands.add_parser("ask", help="ask one question and exit")
    ask.add_argument("text", help="the question")
    ask.add_argument("--thread", default="default")
    ask.add_argument("--json", action="store_true", help="print the answer and tool calls as JSON")
    tools = commands.add_parser("tools", help="list the tools the model is offered")
    tools.add_argument("--json", action="store_true", help="in the OpenAI tools format")
    history = commands.add_parser("history", help="print a stored conversation")
    history.add_argument("--thread", default="default")
    commands.add_parser("slack", help="run on Slack")
    commands.add_parser("discord", help="run on Discord")
    return parser


def _front_end(args: argparse.Namespace, settings: Settings) -> Callable[[Runtime], Awaitable[int]]:
    # Adapters are imported here, not at the top: `nerve chat` should not load Slack or Discord code.
    command = args.command or "chat"
    if command == "chat":
        from adapters.terminal.chat import TerminalChat

        async def chat(runtime: Runtime) -> int:
            await TerminalChat(runtime, args.thread).run()
            return 0

        return chat
    if command == "ask":
        from adapters.terminal.chat import ask

        return lambda runtime: ask(runtime, args.thread, args.text, as_json=args.json)
    if command == "tools":
        from adapters.terminal.chat import print_tools

        async def tools(runtime: Runtime) -> int:
            return print_tools(runtime, as_json=args.json)

        return tools
    if command == "history":
        from adapters.terminal.chat import print_history

        return lambda runtime: print_history(runtime, args.thread)
    if command == "slack":
        from adapters.slack.app import check_settings, run_slack

        check_settings(settings)

        async def slack(runtime: Runtime) -> int:
            await run_slack(runtime.agent, runtime.settings)
            return 0

        return slack
    from adapters.discord.app import check_settings as check_discord_settings
    from adapters.discord.app import run_discord

    check_discord_settings(settings)

    async def discord(runtime: Runtime) -> int:
        await run_discord(runtime.agent, runtime.settings)
        return 0

    return discord


async def _run(settings: Settings, front_end: Callable[[Runtime], Awaitable[int]]) -> int:
    async with open_runtime(settings) as runtime:
        return await front_end(runtime)


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        settings = Settings()
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(map(str, e['loc'])).upper()}: {e['msg']}" for e in exc.errors())
        sys.stderr.write(f"nerve: bad setting: {problems}\n")
        return 2
    logging.basicConfig(
        level=settings.nerve_log_level.upper(),
        stream=sys.stderr,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    try:
        front_end = _front_end(args, settings)
        return asyncio.run(_run(settings, front_end))
    except NerveError as exc:
        sys.stderr.write(f"nerve: {exc.message}\n")
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
