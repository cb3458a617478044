"""The deployment files as an operator uses them: the Dockerfile's own CMD and HEALTHCHECK commands,
read from the file and run on this machine (`nerve slack` in Socket Mode against the local Slack
fake, then the health check against it and against a closed port), compose.yaml's services, the
scale-out files (compose.scale.yaml, its HTTP variant and the proxy's Caddyfile) as far as they can
be read without a container engine, and the two Slack app manifests against the scopes `nerve
doctor` checks."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import shlex
import shutil
import signal
import sys
import time
import tomllib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import yaml

import bot
from adapters.doctor.slack_check import NEEDED_SCOPES
from adapters.healthcheck import health_url
from adapters.ops_http import HEALTH_PATH, READY_PATH
from adapters.settings import Settings
from adapters.slack.serve import EVENTS_PATH
from bot.runtime import CALLBACK_PATH, CLIENT_METADATA_PATH
from bot.store.migrate import DEFAULT_MIGRATIONS_DIR
from tests.conftest import ROOT
from tests.fakes.slack_api import FakeSlack
from tests.ports import unused_port
from tests.test_cli import nerve_env

DOCKERFILE = ROOT / "Dockerfile"
COMPOSE = ROOT / "compose.yaml"
SOCKET_MANIFEST = ROOT / "slack" / "manifest.socket.yaml"
HTTP_MANIFEST = ROOT / "slack" / "manifest.http.yaml"
REQUEST_URL = f"https://YOUR-HOST{EVENTS_PATH}"
HEALTH_MODULE = ["python", "-m", "adapters.healthcheck"]
SERVING = re.compile(r"serving /healthz, /readyz and /metrics at (\S+)")
# A closed port is told at once: the check fails on the refusal, not on its timeout (TIMEOUT, 3 s).
REFUSED = "Connection refused"
# The check is a new Python process, slow to start on a busy machine: this bound only catches a
# check that hangs; that HEALTHCHECK --timeout (5 s) holds the check's own timeout is checked below.
CHECK_GIVE_UP = 15.0


def instructions(path: Path = DOCKERFILE) -> list[tuple[str, str]]:
    """The Dockerfile's instructions in order, continuation lines joined, comments dropped."""
    found: list[tuple[str, str]] = []
    pending = ""
    for line in path.read_text(encoding="utf-8").splitlines():
        if not pending and (not line.strip() or line.lstrip().startswith("#")):
            continue
        if line.rstrip().endswith("\\"):
            pending += line.rstrip()[:-1] + " "
            continue
        whole = (pending + line).strip()
        pending = ""
        keyword, _, rest = whole.partition(" ")
        found.append((keyword.upper(), rest.strip()))
    return found


def instruction(keyword: str) -> list[str]:
    return [rest for key, rest in instructions() if key == keyword]


def exec_form(text: str) -> list[str]:
    command = json.loads(text)
    assert isinstance(command, list) and all(isinstance(part, str) for part in command), text
    return command


def cmd() -> list[str]:
    *_, last = instruction("CMD")  # the last CMD is the one that counts
    return exec_form(last)


def healthcheck() -> tuple[dict[str, str], list[str]]:
    """The HEALTHCHECK's options (--interval=30s → {"interval": "30s"}) and its command."""
    [text] = instruction("HEALTHCHECK")
    options, _, command = text.partition(" CMD ")
    parsed = dict(option.removeprefix("--").split("=", 1) for option in shlex.split(options))
    return parsed, exec_form(command)


def image_env() -> dict[str, str]:
    env: dict[str, str] = {}
    for text in instruction("ENV"):
        env.update(pair.split("=", 1) for pair in shlex.split(text))
    return env


def on_this_machine(command: list[str]) -> list[str]:
    """The command as the image's PATH would resolve it, with this checkout's installed `nerve` and Python."""
    path = os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])
    program = shutil.which(command[0], path=path)
    assert program is not None, f"{command[0]} is not installed"
    if command[0] == "python":
        program = sys.executable
    return [program, *command[1:]]


async def run_health_check(port: int) -> tuple[int, str, float]:
    """The HEALTHCHECK command with NERVE_HTTP_PORT set; its exit code, stderr and how long it took."""
    env = {**os.environ, "NERVE_HTTP_PORT": str(port)}
    started = time.monotonic()
    process = await asyncio.create_subprocess_exec(
        *on_this_machine(healthcheck()[1]),
        env=env,
        cwd=str(ROOT),
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
    )
    _, err = await asyncio.wait_for(process.communicate(), 20)
    return process.returncode or 0, err.decode(), time.monotonic() - started


class Container:
    """The image's CMD as a process: its log read as it comes, so the pipe never fills."""

    def __init__(self, process: asyncio.subprocess.Process) -> None:
        self.process = process
        self.lines: list[str] = []
        self._changed = asyncio.Condition()
        self._reader = asyncio.create_task(self._read())

    async def _read(self) -> None:
        assert self.process.stderr is not None
        async for raw in self.process.stderr:
            async with self._changed:
                self.lines.append(raw.decode(errors="replace"))
                self._changed.notify_all()
        async with self._changed:
            self.lines.append("<exited>")
            self._changed.notify_all()

    async def wait_line(self, pattern: re.Pattern[str], within: float = 30.0) -> re.Match[str]:
        def seen() -> bool:
            return "<exited>" in self.lines or any(pattern.search(line) for line in self.lines)

        try:
            async with asyncio.timeout(within), self._changed:
                await self._changed.wait_for(seen)
        except TimeoutError:
            raise AssertionError(f"no log line like {pattern.pattern!r}:\n{''.join(self.lines)}") from None
        for line in self.lines:
            if found := pattern.search(line):
                return found
        raise AssertionError(f"exited before {pattern.pattern!r}:\n{''.join(self.lines)}")

    async def stop(self) -> None:
        """SIGTERM, as `docker stop` sends (the image's init passes it on), until the process is gone."""
        if self.process.returncode is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                await asyncio.wait_for(self.process.wait(), 20)
            except TimeoutError:
                self.process.kill()
                await self.process.wait()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._reader, 10)


@contextlib.asynccontextmanager
async def container(env: dict[str, str]) -> AsyncIterator[Container]:
    process = await asyncio.create_subprocess_exec(
        *on_this_machine(cmd()),
        env=env,
        cwd=str(ROOT),
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
    )
    running = Container(process)
    try:
        yield running
    finally:
        await running.stop()


def slack_socket_env(tmp_path: Path, slack: FakeSlack, port: int) -> dict[str, str]:
    """The image's ENV, with the database and port moved to this machine, and Socket Mode settings."""
    servers = tmp_path / "mcp.json"
    servers.write_text(json.dumps({"mcpServers": {}}))
    env = nerve_env(tmp_path, **image_env())
    env.update(
        NERVE_DB=str(tmp_path / "nerve.db"),
        NERVE_HTTP_PORT=str(port),
        NERVE_MCP_CONFIG=str(servers),
        NERVE_LOG_LEVEL="INFO",
        SLACK_BOT_TOKEN="xoxb-test-token",
        SLACK_APP_TOKEN="xapp-test-token",
        SLACK_API_BASE_URL=slack.api_url,
    )
    env.pop("SLACK_SIGNING_SECRET", None)
    return env


async def test_the_image_command_runs_slack_and_its_health_check_passes_then_fails_once_it_stops(tmp_path):
    port = unused_port()
    async with FakeSlack() as slack, container(slack_socket_env(tmp_path, slack, port)) as nerve:
        served = await nerve.wait_line(SERVING)
        assert served.group(1).endswith(f":{port}")
        await slack.wait_for(lambda s: bool(s.calls_of("apps.connections.open")), 30)

        code, err, _ = await run_health_check(port)
        assert code == 0, err

        await nerve.stop()
        code, err, took = await run_health_check(port)
    assert code == 1
    assert f"http://127.0.0.1:{port}/healthz" in err
    assert REFUSED in err, err  # told by the closed port, not by the check's own timeout
    assert took < CHECK_GIVE_UP


async def test_the_health_check_fails_within_seconds_when_nothing_listens():
    port = unused_port()
    code, err, took = await run_health_check(port)
    assert code == 1
    assert err.startswith("unhealthy:") and str(port) in err
    assert REFUSED in err, err  # told by the closed port, not by the check's own timeout
    assert took < CHECK_GIVE_UP


async def test_the_health_check_refuses_a_port_it_cannot_probe():
    code, err, _ = await run_health_check(0)
    assert code == 1
    assert "NERVE_HTTP_PORT=0" in err


def test_the_image_installs_the_locked_runtime_and_runs_slack_as_a_user_with_a_data_volume():
    assert cmd() == ["nerve", "slack"]
    [install] = [run for run in instruction("RUN") if "pip install" in run]
    assert "pip install -c requirements.lock " in install
    assert "[dev]" not in install
    [base] = instruction("FROM")
    assert base == "python:3.11-slim"
    # An init as PID 1 passes `docker stop`'s SIGTERM on (PID 1 itself would ignore it) and reaps
    # the MCP servers' processes.
    assert exec_form(instruction("ENTRYPOINT")[-1]) == ["tini", "--"]
    [user] = instruction("USER")
    assert user not in {"root", "0"}
    assert instruction("VOLUME") == ["/data"]
    assert image_env()["NERVE_DB"] == "/data/nerve.db"
    assert instruction("EXPOSE") == ["3000"]
    keywords = [key for key, _ in instructions()]
    assert keywords.index("USER") < keywords.index("CMD")
    options, command = healthcheck()
    assert command == HEALTH_MODULE
    assert float(options["timeout"].removesuffix("s")) > 3  # the module's own timeout fits inside


def locked() -> dict[str, str]:
    """requirements.lock as {normalized name: version}."""
    pins: dict[str, str] = {}
    for line in (ROOT / "requirements.lock").read_text(encoding="utf-8").splitlines():
        name, sep, version = line.partition("==")
        if sep and not line.startswith("#"):
            pins[re.sub(r"[-_.]+", "-", name.strip()).lower()] = version.strip()
    return pins


def test_the_image_installs_the_postgres_extra_every_part_of_it_pinned_by_the_lock():
    [install] = [run for run in instruction("RUN") if "pip install" in run]
    words = shlex.split(install.split("&&")[0])
    target = words[words.index("requirements.lock") + 1]
    # The package itself with the PostgreSQL store: NERVE_DATABASE_URL works in the image.
    assert target == ".[postgres]", target
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"][
        "optional-dependencies"
    ]
    pins = locked()
    for requirement in extras["postgres"]:
        name, _, version = requirement.partition("==")
        bare = re.sub(r"\[.*\]", "", name)
        assert pins.get(re.sub(r"[-_.]+", "-", bare).lower()) == version, requirement
    # psycopg's own libpq comes with its binary wheel: the slim image needs no system library.
    assert "psycopg-binary" in pins
    assert not any("libpq" in run for run in instruction("RUN"))


def test_the_build_context_leaves_out_secrets_databases_and_local_tools_but_not_what_the_image_copies():
    ignored = {
        line.strip()
        for line in (ROOT / ".dockerignore").read_text(encoding="utf-8").splitlines()
        if line.strip() and not line.startswith("#")
    }
    assert {".env", "*.db", ".venv", ".node", ".conformance", ".git", "tests"} <= ignored
    copied = {part.rstrip("/") for text in instruction("COPY") for part in shlex.split(text)[:-1]}
    assert copied >= {"bot", "adapters", "servers", "migrations", "requirements.lock", "mcp.json"}
    assert not copied & ignored


def compose() -> dict[str, Any]:
    loaded = yaml.safe_load(COMPOSE.read_text(encoding="utf-8"))
    assert isinstance(loaded, dict)
    return loaded


def test_compose_runs_slack_or_discord_one_at_a_time_on_the_volume_with_the_health_check():
    file = compose()
    services = file["services"]
    assert set(services) == {"slack", "discord"}
    assert "nerve-data" in file["volumes"]
    for name, service in services.items():
        assert service["profiles"] == [name]
        assert service["command"] == ["nerve", name]
        assert service["env_file"] == ".env"
        assert "nerve-data:/data" in service["volumes"]
        assert service["environment"]["NERVE_DB"] == "/data/nerve.db"
        assert service["healthcheck"]["test"] == ["CMD", *HEALTH_MODULE]
        assert service["restart"] == "unless-stopped"
        assert service["build"] == "."


# --- scale out: compose.scale.yaml (PostgreSQL, three replicas) and its HTTP variant -----------------

SCALE = ROOT / "compose.scale.yaml"
SCALE_HTTP = ROOT / "compose.scale-http.yaml"
CADDYFILE = ROOT / "deploy" / "Caddyfile"
REPLICAS = ("slack-1", "slack-2", "slack-3")
PASSWORD = "s3cretpassw0rd"
_VARIABLE = re.compile(r"\$\{(\w+)(?::([?-])([^}]*))?\}")


def interpolate(text: str, env: dict[str, str]) -> str:
    """`${VAR}`, `${VAR:-default}` and `${VAR:?message}` filled as compose fills them from `.env`
    (a variable set to nothing counts as unset); a `:?` variable left unset refuses, as compose does."""

    def fill(found: re.Match[str]) -> str:
        name, kind, rest = found.groups()
        if env.get(name):
            return env[name]
        if kind == "?":
            raise ValueError(f"{name}: {rest}")
        return rest if kind == "-" else ""

    return _VARIABLE.sub(fill, text)


def compose_file(path: Path, env: dict[str, str] | None = None) -> dict[str, Any]:
    filled = interpolate(
        path.read_text(encoding="utf-8"), {"POSTGRES_PASSWORD": PASSWORD} if env is None else env
    )
    loaded = yaml.safe_load(filled)
    assert isinstance(loaded, dict)
    return loaded


def seconds(duration: str) -> float:
    assert duration.endswith("s"), duration
    return float(duration.removesuffix("s"))


def test_scale_out_runs_three_slack_replicas_and_optional_workers_on_one_postgresql():
    file = compose_file(SCALE)
    services = file["services"]
    assert set(services) == {"postgres", *REPLICAS, "worker"}

    database = services["postgres"]
    assert database["image"] == "postgres:16"
    [data] = database["volumes"]
    volume, _, target = data.partition(":")
    assert volume in file["volumes"] and target == "/var/lib/postgresql/data"
    probe = database["healthcheck"]["test"]
    assert probe[:2] == ["CMD", "pg_isready"]
    assert "ports" not in database, "only the replicas reach PostgreSQL"
    postgres_env = database["environment"]
    assert postgres_env["POSTGRES_PASSWORD"] == PASSWORD

    settings = {name.upper() for name in Settings.model_fields}
    for name in (*REPLICAS, "worker"):
        service = services[name]
        env = service["environment"]
        url = urlsplit(env["NERVE_DATABASE_URL"])
        assert (url.scheme, url.hostname, url.port) == ("postgresql", "postgres", 5432)
        assert (url.username, url.password, url.path) == (
            postgres_env["POSTGRES_USER"],
            PASSWORD,
            f"/{postgres_env['POSTGRES_DB']}",
        )
        assert f"-U {url.username}" in shlex.join(
            probe
        ) and f"-d {postgres_env['POSTGRES_DB']}" in shlex.join(probe)
        assert service["depends_on"]["postgres"]["condition"] == "service_healthy"
        # The image's probe of /healthz, at the port the replica is told to serve it on.
        assert service["healthcheck"]["test"] == ["CMD", *HEALTH_MODULE]
        assert health_url(env) == f"http://127.0.0.1:3000{HEALTH_PATH}"
        assert env["NERVE_HTTP_PORT"] == "3000"
        # Socket Mode by default: every replica opens its own connection, nothing needs to reach in.
        assert "ports" not in service
        assert "SLACK_APP_TOKEN" not in env
        assert service["env_file"] == ".env"
        assert set(env) <= settings, "a setting nerve does not know"
        assert "./mcp.json:/app/mcp.json:ro" in service["volumes"]
        assert service["restart"] == "unless-stopped"
        assert seconds(service["stop_grace_period"]) > Settings.model_fields["nerve_shutdown_grace"].default
    for name in REPLICAS:
        assert services[name]["command"] == ["nerve", "slack"]
        assert "profiles" not in services[name], "the replicas start with a plain `up`"
    assert services["worker"]["command"] == ["nerve", "worker"]
    assert services["worker"]["profiles"] == ["worker"]


def test_scale_out_refuses_to_start_without_a_database_password():
    with pytest.raises(ValueError, match="POSTGRES_PASSWORD"):
        compose_file(SCALE, env={})


def caddy_lines() -> list[list[str]]:
    """The Caddyfile's lines as words, comments and blank lines dropped."""
    lines = []
    for line in CADDYFILE.read_text(encoding="utf-8").splitlines():
        words = line.split("#", 1)[0].split()
        if words:
            lines.append(words)
    return lines


def caddy_directive(name: str) -> list[list[str]]:
    return [words[1:] for words in caddy_lines() if words[0] == name]


def test_the_http_variant_spreads_slack_and_the_sign_in_callback_over_every_replica_and_nothing_else():
    base = compose_file(SCALE)["services"]
    http = compose_file(SCALE_HTTP)["services"]
    assert set(http) == {*REPLICAS, "proxy"}
    for name in REPLICAS:
        # Empty counts as unset: the replicas serve /slack/events even when .env has an app token.
        assert http[name]["environment"]["SLACK_APP_TOKEN"] == ""

    proxy = http["proxy"]
    assert proxy["image"] == "caddy:2"
    [mount] = proxy["volumes"]
    source, target, mode = mount.split(":")
    assert (ROOT / source).resolve() == CADDYFILE and target == "/etc/caddy/Caddyfile" and mode == "ro"
    assert set(proxy["depends_on"]) == set(REPLICAS)
    [published] = proxy["ports"]
    assert published.endswith(":8080")
    assert [":8080", "{"] in caddy_lines()

    [upstreams] = [words for words in caddy_directive("reverse_proxy")]
    assert upstreams[-1] == "{"
    assert upstreams[:-1] == [f"{name}:{base[name]['environment']['NERVE_HTTP_PORT']}" for name in REPLICAS]
    matchers = [words for words in caddy_lines() if words[0].startswith("@")]
    assert [words[1] for words in matchers] == ["path"]
    assert set(matchers[0][2:]) == {EVENTS_PATH, CALLBACK_PATH, CLIENT_METADATA_PATH}
    # A replica that is starting or stopping (/readyz 503) gets nothing new.
    assert caddy_directive("health_uri") == [[READY_PATH]]
    # Everything else, /healthz, /readyz and /metrics among it, stays inside.
    assert caddy_directive("respond") == [["404"]]


def manifest(path: Path) -> dict[str, Any]:
    loaded = yaml.safe_load(path.read_text(encoding="utf-8"))
    assert isinstance(loaded, dict)
    return loaded


def test_the_socket_mode_manifest_needs_no_url_and_the_http_one_sends_everything_to_the_events_path():
    socket, http = manifest(SOCKET_MANIFEST), manifest(HTTP_MANIFEST)
    assert socket["settings"]["socket_mode_enabled"] is True
    assert "request_url" not in json.dumps(socket) and "YOUR-HOST" not in json.dumps(socket)

    assert http["settings"]["socket_mode_enabled"] is False
    assert http["settings"]["event_subscriptions"]["request_url"] == REQUEST_URL
    assert http["settings"]["interactivity"]["request_url"] == REQUEST_URL
    assert [c["url"] for c in http["features"]["slash_commands"]] == [REQUEST_URL]
    for app in (socket, http):
        assert app["settings"]["interactivity"]["is_enabled"] is True


def test_both_manifests_ask_for_exactly_the_scopes_the_doctor_checks_and_the_same_events():
    socket, http = manifest(SOCKET_MANIFEST), manifest(HTTP_MANIFEST)
    for app in (socket, http):
        scopes = app["oauth_config"]["scopes"]["bot"]
        assert sorted(scopes) == sorted(NEEDED_SCOPES) and len(scopes) == len(set(scopes))
    assert (
        socket["settings"]["event_subscriptions"]["bot_events"]
        == (http["settings"]["event_subscriptions"]["bot_events"])
    )
    # Apart from where Slack delivers, the two are one app.
    http["settings"]["socket_mode_enabled"] = True
    del http["settings"]["event_subscriptions"]["request_url"]
    del http["settings"]["interactivity"]["request_url"]
    for command in http["features"]["slash_commands"]:
        del command["url"]
    assert http == socket


def test_the_image_puts_the_migrations_where_the_installed_store_looks_for_them():
    # Installed (not editable), `bot` sits in site-packages, and the store looks beside it.
    assert Path(bot.__file__).resolve().parent.parent / "migrations" == DEFAULT_MIGRATIONS_DIR
    [install] = [run for run in instruction("RUN") if "pip install" in run]
    copy = install.split("&&")[1].strip()
    assert copy.startswith("cp -r migrations ") and copy.endswith('/migrations"')
    assert 'sysconfig.get_paths()["purelib"]' in copy


def gone(pid: int) -> bool:
    """The process has ended (a zombie waiting for its parent's init to reap it counts as ended)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return True
    return "zombie" in status


def children_of(pid: int) -> set[int]:
    """The processes `pid` started that are still alive (Linux /proc)."""
    found: set[int] = set()
    for task in Path(f"/proc/{pid}/task").iterdir():
        with contextlib.suppress(OSError):
            found |= {int(child) for child in (task / "children").read_text().split()}
    return found


async def test_sigterm_stops_slack_with_exit_0_and_leaves_no_mcp_server_behind(tmp_path):
    port = unused_port()
    async with FakeSlack() as slack:
        env = slack_socket_env(tmp_path, slack, port)
        servers = tmp_path / "mcp.json"
        servers.write_text(
            json.dumps(
                {
                    "mcpServers": {
                        "env-query": {"command": sys.executable, "args": ["-m", "servers.env_query"]}
                    }
                }
            )
        )
        async with container(env) as nerve:
            await nerve.wait_line(SERVING)
            await slack.wait_for(lambda s: bool(s.calls_of("apps.connections.open")), 30)
            # The server starts in the background: its process shows up under nerve's soon after.
            servers_running: set[int] = set()
            for _ in range(600):
                servers_running = children_of(nerve.process.pid)
                if servers_running:
                    break
                await asyncio.sleep(0.05)
            assert servers_running, "the MCP server never started"
            nerve.process.send_signal(signal.SIGTERM)
            async with asyncio.timeout(20):
                code = await nerve.process.wait()
        assert code == 0, "".join(nerve.lines)
        assert all(gone(child) for child in servers_running), "an MCP server outlived nerve"
