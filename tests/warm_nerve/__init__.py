"""`python -m tests.warm_nerve ARGS` is `python -m bot ARGS` started warm: a real process of its own
(its arguments, environment, folder and standard streams), which runs nerve's `main` in a process
forked from one that has already imported nerve (`tests/mcp_servers/warm_start.py`). Without a fork
server it runs `python -m bot` the usual way.

For the tests of what `nerve` says and does, over pipes or on a pseudo-terminal (its standard
streams are the terminal; a Ctrl-C the terminal turns into SIGINT reaches it through the process
started, which passes it on). A test of the process itself (its session and process group, how it
starts and leaves a terminal, what it imports at start, signals sent to it) runs `python -m bot`.
"""

from tests.mcp_servers.warm_start import hand_over_if_warm

hand_over_if_warm()

# What the fork server imports beforehand: the command line and what its commands load when they run.
PRELOAD = (
    "adapters.cli",
    "adapters.conversations_cli",
    "adapters.memory_cli",
    "adapters.schedules_cli",
    "adapters.person_data_cli",
    "adapters.usage_cli",
    "adapters.doctor.run",
    "adapters.doctor.model",
    "adapters.doctor.slack_check",
    "adapters.doctor.discord_check",
    "adapters.doctor.postgres_check",
    "adapters.terminal.chat",
    "adapters.terminal.runtime",
    "adapters.ops_http",
    "bot.runtime",
    "bot.store.postgres",
    "bot.model.client",
    "bot.model.stream",
    "bot.model.retries",
    "anyio._backends._asyncio",
)
