"""What the command line says of the configured models: `nerve tools --place` names the model a place
uses; `nerve doctor` checks each model of the list and names each place's own."""

from __future__ import annotations

import json
from pathlib import Path

from tests.fakes.llm_server import FakeLLMServer, reply, server_error
from tests.ports import unused_port
from tests.test_cli import nerve_env, run_nerve
from tests.test_doctor import doctor, row


def servers_file(folder: Path, main_url: str, backup_url: str) -> Path:
    path = folder / "mcp.json"
    path.write_text(
        json.dumps(
            {
                "mcpServers": {},
                "models": [
                    {"name": "main", "model": "test-model", "base_url": main_url, "api_key_env": "MAIN_KEY"},
                    {"name": "backup", "model": "small-model", "base_url": backup_url},
                ],
                "policy": {"slack:CBUSY": {"model": "backup"}},
            }
        )
    )
    return path


async def test_tools_for_a_place_name_the_model_it_uses(tmp_path: Path) -> None:
    config = servers_file(tmp_path, "http://127.0.0.1:9/v1", "http://127.0.0.1:9/v1")
    env = nerve_env(tmp_path, servers={}, NERVE_MCP_CONFIG=str(config), MAIN_KEY="sk-main")

    code, out, err = await run_nerve("tools", "--place", "slack:CBUSY", env=env)
    assert code == 0, err
    assert "Model here: backup." in out
    code, out, err = await run_nerve("tools", "--place", "slack:COTHER", env=env)
    assert code == 0, err
    assert "Model here: main." in out


async def test_doctor_checks_each_model_and_names_each_places_own(tmp_path: Path) -> None:
    down = f"http://127.0.0.1:{unused_port()}/v1"
    async with FakeLLMServer([]) as main:
        main.api_key = "sk-main-key"  # a 401 unless the key named by api_key_env is sent
        config = servers_file(tmp_path, main.base_url, down)
        run = await doctor(tmp_path, NERVE_MCP_CONFIG=str(config), MAIN_KEY="sk-main-key")
    lines = run.lines
    assert row("ok", "model main", f"{main.base_url}: model 'test-model' is available") in lines, run.out
    [backup] = [line for line in lines if line.startswith("error    model backup")]
    assert f"could not reach the model service at {down}" in backup
    assert f"check the base_url of model 'backup' in {config} 'models'" in backup
    assert row("ok", "models", "main → backup (each asked when the one before fails)") in lines
    assert row("ok", "model of slack:CBUSY", "'backup'") in lines
    assert main.models_requests == 1
    assert "sk-main-key" not in run.out and run.code == 1


async def test_nerve_ask_with_nerve_models_answers_from_the_fallback_with_the_key_its_variable_holds(
    tmp_path: Path,
) -> None:
    async with (
        FakeLLMServer([server_error(503)] * 2) as primary,
        FakeLLMServer([reply("the backup answered")]) as backup,
    ):
        listed = [
            {"name": "main", "model": "big", "base_url": primary.base_url, "api_key_env": "MAIN_KEY"},
            {"name": "backup", "model": "small", "base_url": backup.base_url, "api_key_env": "BACKUP_KEY"},
        ]
        env = nerve_env(
            tmp_path, servers={}, NERVE_MODELS=json.dumps(listed), MAIN_KEY="sk-one", BACKUP_KEY="sk-two"
        )
        code, out, err = await run_nerve("ask", "--json", "hello", env=env)
    assert code == 0, err
    assert json.loads(out)["text"] == "the backup answered"
    assert [h["Authorization"] for h in primary.request_headers] == ["Bearer sk-one"] * 2
    assert backup.request_headers[0]["Authorization"] == "Bearer sk-two"
    assert backup.requests[0]["model"] == "small"
