"""The MCP servers file: the documentation's examples as shown, and the Claude Desktop and VS Code forms."""

from __future__ import annotations

import importlib.util
import json
import re
import sys
from pathlib import Path
from typing import Any

import pytest

from adapters.settings import PLATFORMS
from bot.config import Settings
from bot.errors import ConfigError
from bot.mcp.servers_file import load_mcp_config
from bot.policy.scopes import Place, Rule, Scopes

ROOT = Path(__file__).resolve().parents[1]
# How the documentation says which variable an example needs: "… needs `NAME` set in the environment".
DOCUMENTED_VARIABLE = re.compile(r"`([A-Z][A-Z0-9_]*)` set in the environment")
USED_VARIABLE = re.compile(r"\$\{(?:env:)?([A-Z][A-Z0-9_]*)\}")


def documented_examples() -> list[tuple[str, str, str]]:
    """Each ```json block of the README and the docs pages, with the prose that follows it up to the
    next block and the whole page it is on."""
    examples = []
    for page in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        text = page.read_text(encoding="utf-8")
        parts = re.split(r"```json\n(.*?)```", text, flags=re.DOTALL)
        # re.split alternates prose, block, prose, block, …, prose.
        examples += [(parts[i], parts[i + 1], text) for i in range(1, len(parts), 2)]
    return examples


def write(tmp_path: Path, content: dict[str, Any] | str, name: str = "mcp.json") -> Path:
    path = tmp_path / name
    path.write_text(content if isinstance(content, str) else json.dumps(content), encoding="utf-8")
    return path


def config_error(path: Path, environ: dict[str, str] | None = None) -> str:
    with pytest.raises(ConfigError) as caught:
        load_mcp_config(path, environ if environ is not None else {}, platforms=PLATFORMS)
    return str(caught.value)


# --- the documentation ----------------------------------------------------------------------------


def test_the_docs_show_a_claude_desktop_and_a_vs_code_example():
    blocks = [json.loads(block) for block, _, _ in documented_examples()]
    assert any("mcpServers" in block for block in blocks)
    assert any("servers" in block for block in blocks)


@pytest.mark.parametrize("index", range(len(documented_examples())))
def test_every_documented_example_loads_with_exactly_the_environment_it_documents(tmp_path, index):
    block, prose, _ = documented_examples()[index]
    documented = DOCUMENTED_VARIABLE.findall(prose)
    assert set(USED_VARIABLE.findall(block)) == set(documented), "document every variable used"
    path = write(tmp_path, block)
    servers = load_mcp_config(
        path, {name: "secret-value" for name in documented}, platforms=PLATFORMS
    ).servers
    assert servers
    for name in documented:
        assert name in config_error(path)  # without the documented variable, the error says which


@pytest.mark.parametrize("index", range(len(documented_examples())))
def test_every_documented_command_runs_on_a_fresh_clone(tmp_path, index):
    block, _, page = documented_examples()[index]
    servers = load_mcp_config(
        write(tmp_path, block), {n: "x" for n in USED_VARIABLE.findall(block)}, platforms=PLATFORMS
    ).servers
    for name, server in servers.items():
        if server.command is None:
            continue
        if server.command != sys.executable:
            # `make run` installs only Python: anything else must be one its page says to install.
            assert server.command in ("npx", "node") and "Node" in page, f"{name}: {server.command}"
        if server.args[:1] == ["-m"]:
            assert importlib.util.find_spec(server.args[1]) is not None, f"{name}: no module {server.args[1]}"


# --- the VS Code form -----------------------------------------------------------------------------


def test_the_vs_code_form_loads_like_the_claude_desktop_form(tmp_path):
    vs_code = load_mcp_config(
        write(
            tmp_path,
            {
                "inputs": [{"type": "promptString", "id": "token", "password": True}],
                "servers": {
                    "local": {"type": "stdio", "command": "python", "args": ["-m", "servers.env_query"]},
                    "remote": {"type": "http", "url": "https://mcp.example.com/mcp"},
                    "legacy": {"type": "sse", "url": "https://mcp.example.com/sse"},
                },
            },
            "vscode.json",
        ),
        {},
        platforms=PLATFORMS,
    ).servers
    desktop = load_mcp_config(
        write(
            tmp_path,
            {
                "mcpServers": {
                    "local": {"command": "python", "args": ["-m", "servers.env_query"]},
                    "remote": {"url": "https://mcp.example.com/mcp"},
                    "legacy": {"url": "https://mcp.example.com/sse", "transport": "sse"},
                }
            },
            "desktop.json",
        ),
        {},
        platforms=PLATFORMS,
    ).servers
    assert {name: s.kind for name, s in vs_code.items()} == {
        "local": "stdio",
        "remote": "streamable-http",
        "legacy": "sse",
    }
    assert {name: s.kind for name, s in desktop.items()} == {name: s.kind for name, s in vs_code.items()}
    assert vs_code["local"].command == desktop["local"].command == sys.executable


def test_type_streamable_http_is_accepted_as_cursor_writes_it(tmp_path):
    path = write(
        tmp_path, {"mcpServers": {"r": {"type": "streamable-http", "url": "http://127.0.0.1:1/mcp"}}}
    )
    assert load_mcp_config(path, {}, platforms=PLATFORMS).servers["r"].kind == "streamable-http"


@pytest.mark.parametrize(
    ("entry", "expected"),
    [
        ({"type": "http", "command": "x"}, "server 'bad' field 'type'"),
        ({"type": "stdio", "url": "http://127.0.0.1/mcp"}, "server 'bad' field 'type'"),
        ({"type": "sse", "transport": "streamable-http", "url": "http://127.0.0.1/mcp"}, "'transport'"),
        ({"type": "websocket", "url": "ws://127.0.0.1"}, "server 'bad' field 'type'"),
    ],
)
def test_a_type_that_does_not_fit_the_entry_names_the_file_server_and_field(tmp_path, entry, expected):
    path = write(tmp_path, {"servers": {"bad": entry}})
    message = config_error(path)
    assert str(path) in message and expected in message


def test_disabled_true_on_an_entry_leaves_that_server_out_even_with_its_variables_unset(tmp_path):
    path = write(
        tmp_path,
        {
            "mcpServers": {
                "on": {"command": "python"},
                "off": {"command": "python", "env": {"KEY": "${UNSET_KEY}"}, "disabled": True},
                "also-off": {"command": "python", "enabled": False},
            }
        },
    )
    assert list(load_mcp_config(path, {}, platforms=PLATFORMS).servers) == ["on"]


def test_a_top_level_disabled_list_leaves_those_servers_out(tmp_path):
    path = write(
        tmp_path,
        {"servers": {"a": {"command": "python"}, "b": {"command": "python"}}, "disabled": ["b"]},
    )
    assert list(load_mcp_config(path, {}, platforms=PLATFORMS).servers) == ["a"]


def test_a_disabled_list_naming_no_configured_server_is_an_error_naming_it(tmp_path):
    path = write(tmp_path, {"servers": {"a": {"command": "python"}}, "disabled": ["typo"]})
    message = config_error(path)
    assert str(path) in message and "'typo'" in message and "disabled" in message


def test_a_file_with_both_mcp_servers_and_servers_is_an_error(tmp_path):
    path = write(tmp_path, {"mcpServers": {"a": {"command": "x"}}, "servers": {"b": {"command": "x"}}})
    message = config_error(path)
    assert str(path) in message and "mcpServers" in message and "servers" in message


def test_a_server_named_twice_is_refused_naming_it(tmp_path):
    # MCPSecBench's example file: the second "check" used to replace the first without a word.
    path = write(tmp_path, '{"mcpServers": {"check": {"command": "a"}, "check": {"command": "b"}}}')
    assert config_error(path) == f"{path}: server 'check' appears twice"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            '{"mcpServers": {"a": {"command": "x"}}, "mcpServers": {}}',
            "key 'mcpServers' appears twice at the top level",
        ),
        (
            '{"servers": {"a": {"command": "x", "timeout": 5, "timeout": 9}}}',
            "key 'timeout' appears twice in servers.a",
        ),
        (
            '{"mcpServers": {"a": {"command": "x", "env": {"K": "1", "K": "2"}}}}',
            "key 'K' appears twice in mcpServers.a.env",
        ),
        (
            '{"mcpServers": {"a": {"command": "x"}}, "policy": {"*": {"allow": ["a"]}, "*": {}}}',
            "key '*' appears twice in policy",
        ),
        (
            '{"mcpServers": {"a": {"command": "x"}}, "inputs": [{"id": "k", "id": "j"}]}',
            "key 'id' appears twice in inputs[0]",
        ),
    ],
)
def test_a_key_repeated_at_any_level_is_refused_naming_it_and_where(tmp_path, text, expected):
    path = write(tmp_path, text)
    assert config_error(path) == f"{path}: {expected}"


def test_server_names_only_case_or_punctuation_apart_load_with_a_warning(tmp_path, caplog):
    entry = {"command": "python"}
    path = write(
        tmp_path, {"mcpServers": {"Check": entry, "check": entry, "my-server": entry, "my_server": entry}}
    )
    with caplog.at_level("WARNING", logger="bot.mcp.servers_file"):
        config = load_mcp_config(path, {}, platforms=PLATFORMS)
    assert list(config.servers) == ["Check", "check", "my-server", "my_server"]
    expected = [
        f"{path}: servers 'Check' and 'check' differ only in case or punctuation",
        f"{path}: servers 'my-server' and 'my_server' differ only in case or punctuation",
    ]
    assert list(config.warnings) == expected
    assert [r.getMessage() for r in caplog.records if r.levelname == "WARNING"] == expected


def test_a_file_with_neither_key_says_which_keys_it_expects(tmp_path):
    message = config_error(write(tmp_path, {"mcpServer": {}}))
    assert "'mcpServers'" in message and "'servers'" in message


def test_errors_in_the_vs_code_form_name_the_file_server_and_field(tmp_path):
    path = write(tmp_path, {"servers": {"weather": {"command": "x", "timeout": "soon"}}})
    message = config_error(path)
    assert str(path) in message and "server 'weather' field 'timeout'" in message


def test_env_variables_in_vs_code_syntax_are_expanded(tmp_path):
    path = write(
        tmp_path,
        {"servers": {"r": {"type": "http", "url": "https://x/mcp", "headers": {"A": "Bearer ${env:TOKEN}"}}}},
    )
    assert load_mcp_config(path, {"TOKEN": "t0k"}, platforms=PLATFORMS).servers["r"].headers == {
        "A": "Bearer t0k"
    }
    assert "TOKEN is not set" in config_error(path)


@pytest.mark.parametrize("value", ["${input:api-key}", "${workspaceFolder}/x"])
def test_variables_nerve_cannot_fill_are_refused_by_name(tmp_path, value):
    path = write(tmp_path, {"servers": {"s": {"command": "python", "env": {"KEY": value}}}})
    message = config_error(path)
    assert "server 's' field 'env.KEY'" in message and value.split("/")[0] in message


def test_an_env_file_is_read_relative_to_the_servers_file_and_env_entries_win(tmp_path):
    (tmp_path / "conf").mkdir()
    (tmp_path / "conf" / "server.env").write_text("# keys\nAPI_KEY=from-file\nREGION=eu\n")
    path = write(
        tmp_path / "conf",
        {"servers": {"s": {"command": "python", "envFile": "server.env", "env": {"REGION": "us"}}}},
    )
    assert load_mcp_config(path, {}, platforms=PLATFORMS).servers["s"].env == {
        "API_KEY": "from-file",
        "REGION": "us",
    }


def test_a_missing_env_file_is_an_error_naming_the_server_and_field(tmp_path):
    path = write(tmp_path, {"servers": {"s": {"command": "python", "envFile": "nowhere.env"}}})
    message = config_error(path)
    assert "server 's' field 'envFile'" in message and "nowhere.env" in message


def test_vs_code_dev_settings_are_accepted_and_a_misspelt_field_is_still_an_error(tmp_path):
    ok = write(tmp_path, {"servers": {"s": {"command": "python", "dev": {"watch": "src/**/*.py"}}}})
    assert list(load_mcp_config(ok, {}, platforms=PLATFORMS).servers) == ["s"]
    bad = write(tmp_path, {"servers": {"s": {"command": "python", "argz": []}}}, "bad.json")
    assert "server 's' field 'argz'" in config_error(bad)


# --- approval modes and the policy section --------------------------------------------------------


def test_approval_is_writes_unless_the_server_or_a_tool_says_otherwise(tmp_path):
    path = write(
        tmp_path,
        {
            "mcpServers": {
                "plain": {"command": "python"},
                "fs": {
                    "command": "python",
                    "approval": "never",
                    "tools": {"delete_file": {"approval": "always"}, "read_file": {"timeout": 5}},
                },
            }
        },
    )
    servers = load_mcp_config(path, {}, platforms=PLATFORMS).servers
    assert servers["plain"].approval == "writes"
    assert servers["fs"].approval == "never"
    assert servers["fs"].tools["delete_file"].approval == "always"
    assert servers["fs"].tools["read_file"].approval is None


@pytest.mark.parametrize(
    ("entry", "expected"),
    [
        ({"command": "python", "approval": "sometimes"}, "server 'fs' field 'approval'"),
        (
            {"command": "python", "tools": {"delete_file": {"approval": "ask"}}},
            "server 'fs' field 'tools.delete_file.approval'",
        ),
    ],
)
def test_an_unknown_approval_mode_names_the_file_server_and_field(tmp_path, entry, expected):
    path = write(tmp_path, {"mcpServers": {"fs": entry}})
    message = config_error(path)
    assert str(path) in message and expected in message and "'writes'" in message


def test_the_policy_section_becomes_scopes_per_place(tmp_path):
    path = write(
        tmp_path,
        {
            "mcpServers": {"fs": {"command": "python"}, "env-query": {"command": "python"}},
            "policy": {
                "*": {"allow": ["env-query"]},
                "slack:C123": {"allow": ["fs", "env-query"], "deny": ["fs/write_*"]},
                "discord:dm": {},
            },
        },
    )
    config = load_mcp_config(path, {}, platforms=PLATFORMS)

    assert list(config.servers) == ["fs", "env-query"]
    assert config.scopes.rules["slack:C123"] == Rule(allow=("fs", "env-query"), deny=("fs/write_*",))
    channel = Place(platform="slack", channel="C123", user="U1")
    assert config.scopes.allows(channel, "fs", "read_file")
    assert not config.scopes.allows(channel, "fs", "write_file")
    assert not config.scopes.allows(Place(platform="slack", channel="C999"), "fs", "read_file")
    assert config.scopes.allows(Place(platform="discord", dm=True), "fs", "write_file")


def test_a_file_without_a_policy_allows_every_place_everything(tmp_path):
    config = load_mcp_config(
        write(tmp_path, {"servers": {"a": {"command": "python"}}}), {}, platforms=PLATFORMS
    )
    assert config.scopes == Scopes()
    assert config.scopes.allows(Place(platform="slack", channel="C1"), "a", "anything")


@pytest.mark.parametrize(
    ("policy", "expected"),
    [
        ({"slak:C123": {}}, "must start with one of slack, discord, terminal"),
        ({"slack:#general": {}}, "use the channel id"),
        ({"slack:C1:user:U1": {}}, "names more than one thing"),
        ({"slack:C1": {"deny": ["fs/"]}}, "policy 'slack:C1' field 'deny'"),
        ({"slack:C1": {"allow": ["fs/a/b"]}}, "policy 'slack:C1' field 'allow'"),
        ({"slack:C1": {"alow": ["fs"]}}, "policy 'slack:C1' field 'alow'"),
        ({"slack:C1": {"deny": ["fss/write_file"]}}, "names server 'fss', which the file does not configure"),
    ],
)
def test_a_mistake_in_the_policy_section_names_the_file_place_and_field(tmp_path, policy, expected):
    path = write(tmp_path, {"mcpServers": {"fs": {"command": "python"}}, "policy": policy})
    message = config_error(path)
    assert str(path) in message and expected in message


def test_policy_patterns_may_name_a_disabled_server_and_use_wildcards_for_servers_not_configured(tmp_path):
    path = write(
        tmp_path,
        {
            "mcpServers": {"fs": {"command": "python", "disabled": True}, "a": {"command": "python"}},
            "policy": {"*": {"deny": ["fs", "remote-*"]}},
        },
    )
    assert load_mcp_config(path, {}, platforms=PLATFORMS).scopes.rules["*"].deny == ("fs", "remote-*")


def test_the_vs_code_form_takes_approval_and_policy_and_keeps_its_own_keys(tmp_path):
    path = write(
        tmp_path,
        {
            "inputs": [{"type": "promptString", "id": "token", "password": True}],
            "servers": {
                "fs": {"type": "stdio", "command": "python", "approval": "always", "dev": {"watch": "*.py"}}
            },
            "policy": {"discord:guild:123": {"deny": ["fs"]}},
        },
    )
    config = load_mcp_config(path, {}, platforms=PLATFORMS)
    assert config.servers["fs"].approval == "always"
    assert not config.scopes.allows(Place(platform="discord", guild="123", channel="5"), "fs", "read")


def test_admins_are_read_from_a_comma_separated_setting(monkeypatch):
    monkeypatch.setenv("NERVE_ADMINS", " U123, 987654321 ,,")
    assert Settings(_env_file=None).admins == frozenset({"U123", "987654321"})
    monkeypatch.delenv("NERVE_ADMINS")
    assert Settings(_env_file=None).admins == frozenset()


def test_a_server_named_memory_is_refused_because_the_memory_tools_use_the_name(tmp_path):
    path = tmp_path / "mcp.json"
    path.write_text(json.dumps({"mcpServers": {"memory": {"command": "npx", "args": ["memory-server"]}}}))

    with pytest.raises(ConfigError, match="server name 'memory' is nerve's own"):
        load_mcp_config(path, {}, platforms=PLATFORMS)


def test_a_place_may_keep_its_memory_for_admins(tmp_path):
    path = tmp_path / "mcp.json"
    servers = {"env-query": {"command": "python", "args": ["-m", "servers.env_query"]}}
    policy = {"slack:C1": {"placeMemory": "admins"}, "slack:C2": {"deny": ["memory/remember"]}}
    path.write_text(json.dumps({"mcpServers": servers, "policy": policy}))

    scopes = load_mcp_config(path, {}, platforms=PLATFORMS).scopes

    assert not scopes.members_remember(Place(platform="slack", channel="C1", user="U1"))
    assert scopes.members_remember(Place(platform="slack", channel="C2", user="U1"))
