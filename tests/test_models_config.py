"""The `models` setting: read from NERVE_MODELS or the servers file, keys only by variable name, the
OPENAI_* settings as a one-model list, and a place's own model asked first."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path
from typing import Any

import pytest

from adapters.log_format import settings_secrets
from adapters.settings import PLATFORMS
from adapters.settings import Settings as AllSettings
from bot.config import Settings
from bot.errors import ConfigError
from bot.model.circuit import ModelCircuit
from bot.model.models import configured_models, key_values
from bot.policy.scopes import Place, Rule, Scopes
from bot.runtime import open_runtime
from bot.types import ConversationKey, Incoming
from tests.fakes.clock import Clock
from tests.fakes.llm_server import FakeLLMServer, rate_limited, reply, server_error

GIVE_UP = 60.0


def settings(**values: Any) -> Settings:
    return Settings(_env_file=None, **values)  # type: ignore[call-arg]


def test_an_inline_key_is_refused_naming_the_field() -> None:
    listed = json.dumps([{"name": "main", "model": "gpt-4o", "api_key": "sk-live-123"}])
    with pytest.raises(ConfigError) as refused:
        configured_models(settings(nerve_models=listed), environ={})
    assert "NERVE_MODELS entry 'main' field 'api_key'" in refused.value.message
    assert "api_key_env" in refused.value.message
    assert "sk-live-123" not in refused.value.message


def test_a_key_written_where_its_variable_name_goes_is_refused() -> None:
    listed = json.dumps([{"model": "gpt-4o", "api_key_env": "sk-live-123"}])
    with pytest.raises(ConfigError, match="field 'api_key_env': must be the NAME of an environment variable"):
        configured_models(settings(nerve_models=listed), environ={})


def test_a_key_variable_that_is_not_set_is_named() -> None:
    listed = json.dumps([{"name": "main", "model": "gpt-4o", "api_key_env": "MAIN_KEY"}])
    with pytest.raises(
        ConfigError, match="model 'main' field 'api_key_env': the environment variable MAIN_KEY"
    ):
        configured_models(settings(nerve_models=listed), environ={})


def test_the_key_is_read_from_the_named_variable_and_fallbacks_give_way_quickly() -> None:
    listed = json.dumps(
        [
            {"name": "main", "model": "gpt-4o", "api_key_env": "MAIN_KEY"},
            {"name": "local", "model": "llama3", "base_url": "http://127.0.0.1:11434/v1", "timeout": 20},
        ]
    )
    models = configured_models(
        settings(nerve_models=listed, nerve_llm_max_retries=4), environ={"MAIN_KEY": "k1"}
    )
    assert models is not None
    main, local = models.specs
    assert main.api_key is not None and main.api_key.get_secret_value() == "k1"
    assert (main.max_retries, local.max_retries) == (1, 4)
    assert (local.api_key, local.timeout, local.base_url) == (None, 20, "http://127.0.0.1:11434/v1")


def test_the_openai_settings_are_a_one_model_list_and_no_key_is_the_offline_model() -> None:
    one = configured_models(settings(openai_api_key="sk-1", nerve_model="gpt-4o"), environ={})
    assert one is not None and one.names == ("gpt-4o",)
    assert one.primary.api_key is not None and one.primary.api_key.get_secret_value() == "sk-1"
    assert configured_models(settings(), environ={}) is None


def test_models_in_both_places_are_refused() -> None:
    listed = json.dumps([{"model": "a"}])
    with pytest.raises(ConfigError, match=r"both in NERVE_MODELS and in mcp\.json"):
        configured_models(settings(nerve_models=listed), [{"model": "b"}], file_name="mcp.json", environ={})


def test_two_models_of_one_name_are_refused() -> None:
    listed = json.dumps([{"model": "a"}, {"model": "a", "base_url": "http://x/v1"}])
    with pytest.raises(ConfigError, match="two models are named 'a'"):
        configured_models(settings(nerve_models=listed), environ={})


def write_servers_file(path: Path, primary: str, cheap: str, *, place_model: str = "cheap") -> Path:
    path.write_text(
        json.dumps(
            {
                "mcpServers": {},
                "models": [
                    {"name": "main", "model": "big-model", "base_url": primary},
                    {"name": "cheap", "model": "small-model", "base_url": cheap},
                ],
                "policy": {"slack:CBUSY": {"model": place_model}},
            }
        )
    )
    return path


async def test_a_place_naming_its_model_is_answered_by_it_and_others_by_the_primary(tmp_path: Path) -> None:
    async with (
        FakeLLMServer([reply("from the primary")]) as primary,
        FakeLLMServer([reply("from the cheap model")]) as cheap,
    ):
        config = write_servers_file(tmp_path / "mcp.json", primary.base_url, cheap.base_url)
        all_settings = AllSettings(_env_file=None, nerve_mcp_config=config, nerve_db=tmp_path / "n.db")  # type: ignore[call-arg]
        async with asyncio.timeout(GIVE_UP), open_runtime(all_settings) as runtime:
            busy = ConversationKey(platform="slack", workspace="T1", channel="CBUSY", thread="1")
            quiet = ConversationKey(platform="slack", workspace="T1", channel="CQUIET", thread="2")
            assert runtime.model_for(Incoming(key=busy, text="", user_id="U1").where()) == "cheap"
            busy_reply = await runtime.agent.reply(
                Incoming(key=busy, text="hello", user_id="U1", event_id="e1")
            )
            quiet_reply = await runtime.agent.reply(
                Incoming(key=quiet, text="hello", user_id="U1", event_id="e2")
            )
        assert (busy_reply.text, busy_reply.model) == ("from the cheap model", "cheap")
        assert quiet_reply.text == "from the primary"
        assert cheap.requests[0]["model"] == "small-model"
        assert primary.requests[0]["model"] == "big-model"


async def test_a_place_naming_an_unknown_model_is_refused_at_start(tmp_path: Path) -> None:
    config = write_servers_file(
        tmp_path / "mcp.json", "http://127.0.0.1:1/v1", "http://127.0.0.1:1/v1", place_model="huge"
    )
    all_settings = AllSettings(_env_file=None, nerve_mcp_config=config, nerve_db=tmp_path / "n.db")  # type: ignore[call-arg]
    with pytest.raises(
        ConfigError, match="policy 'slack:CBUSY' field 'model': 'huge' is not one of the configured models"
    ):
        async with open_runtime(all_settings):
            pass


def models_file(path: Path, *urls: str) -> Path:
    listed = [
        {"name": f"m{index}", "model": f"model-{index}", "base_url": url} for index, url in enumerate(urls)
    ]
    path.write_text(json.dumps({"mcpServers": {}, "models": listed}))
    return path


async def test_the_person_gets_the_fallbacks_answer_and_the_reply_names_it(tmp_path: Path) -> None:
    async with (
        FakeLLMServer([server_error(503)] * 2) as primary,
        FakeLLMServer([reply("all good here")]) as fallback,
    ):
        config = models_file(tmp_path / "mcp.json", primary.base_url, fallback.base_url)
        all_settings = AllSettings(_env_file=None, nerve_mcp_config=config, nerve_db=tmp_path / "n.db")  # type: ignore[call-arg]
        key = ConversationKey(platform="slack", workspace="T1", channel="C1", thread="1")
        async with asyncio.timeout(GIVE_UP), open_runtime(all_settings) as runtime:
            answer = await runtime.agent.reply(Incoming(key=key, text="hello", user_id="U1", event_id="e1"))
        assert (answer.text, answer.model, answer.failed) == ("all good here", "m1", False)


async def test_a_429_asking_for_a_wait_past_the_turns_budget_goes_to_the_fallback_at_once(
    tmp_path: Path,
) -> None:
    # Retry-After 50 s is under the minute a turn would otherwise wait, but past this turn's 20 s.
    async with (
        FakeLLMServer([rate_limited("50")]) as primary,
        FakeLLMServer([reply("answered without waiting")]) as fallback,
    ):
        config = models_file(tmp_path / "mcp.json", primary.base_url, fallback.base_url)
        all_settings = AllSettings(  # type: ignore[call-arg]
            _env_file=None, nerve_mcp_config=config, nerve_db=tmp_path / "n.db", nerve_turn_deadline=20
        )
        key = ConversationKey(platform="slack", workspace="T1", channel="C1", thread="1")
        async with asyncio.timeout(GIVE_UP), open_runtime(all_settings) as runtime:
            answer = await runtime.agent.reply(Incoming(key=key, text="hello", user_id="U1", event_id="e1"))
        assert (answer.text, answer.model) == ("answered without waiting", "m1")
        assert len(primary.requests) == 1


def test_the_most_specific_rule_naming_a_model_decides_a_places_model() -> None:
    scopes = Scopes(
        rules={
            "slack": Rule(model="cheap"),
            "slack:CDESIGN": Rule(model="vision"),
            "slack:CTOOLS": Rule(allow=("env-query",)),
        }
    )
    assert scopes.model_for(Place.parse("slack:CDESIGN", PLATFORMS)) == "vision"
    # A rule that names no model keeps the wider rule's.
    assert scopes.model_for(Place.parse("slack:CTOOLS", PLATFORMS)) == "cheap"
    assert scopes.model_for(Place.parse("discord:C1", PLATFORMS)) is None
    assert scopes.models == {"slack": "cheap", "slack:CDESIGN": "vision"}


def test_after_its_cool_down_a_circuit_lets_one_probe_through_at_a_time() -> None:
    clock = Clock(0.0)
    circuit = ModelCircuit(cool_down=10, clock=clock)
    circuit.failed()
    assert (circuit.admit(), circuit.opens_again_in) == ("skip", 10)
    clock.now = 10
    assert [circuit.admit(), circuit.admit()] == ["probe", "skip"]
    circuit.released()  # the probe was cancelled: the next request probes instead
    assert circuit.admit() == "probe"
    circuit.succeeded()
    assert (circuit.state, circuit.admit()) == ("closed", "ask")


def test_keys_named_by_nerve_models_are_hidden_from_logs() -> None:
    listed = json.dumps([{"model": "a", "api_key_env": "A_KEY"}, {"model": "b"}])
    assert key_values(listed, {"A_KEY": "sk-hidden"}) == ["sk-hidden"]
    assert key_values("not json", {"A_KEY": "sk-hidden"}) == []
    hidden = settings_secrets(settings(nerve_models=json.dumps([{"model": "a", "api_key_env": "PATH"}])))
    assert os.environ["PATH"] in hidden


async def test_money_limits_refuse_to_start_while_a_configured_model_has_no_price(tmp_path: Path) -> None:
    listed = [
        {"name": "main", "model": "gpt-main", "base_url": "http://127.0.0.1:9/v1"},
        {"name": "cheap", "model": "gpt-cheap", "base_url": "http://127.0.0.1:9/v1"},
        {"name": "vision", "model": "gpt-vision", "base_url": "http://127.0.0.1:9/v1"},
    ]
    budgets = '{"person": {"day": {"money": 1}}}'

    def with_prices(prices: dict[str, Any]) -> AllSettings:
        return AllSettings(  # type: ignore[call-arg]
            _env_file=None,
            nerve_models=json.dumps(listed),
            nerve_db=tmp_path / "n.db",
            nerve_budgets=budgets,
            nerve_prices=json.dumps(prices),
        )

    price = {"prompt": 1, "completion": 2}
    # Priced by model id rather than name: none of the names has a price, each is named.
    with pytest.raises(ConfigError, match="no price for main, cheap, vision"):
        async with asyncio.timeout(GIVE_UP), open_runtime(with_prices({"gpt-main": price})):
            pass
    with pytest.raises(ConfigError, match=r"no price for cheap \(prices are keyed by each model's name"):
        async with asyncio.timeout(GIVE_UP), open_runtime(with_prices({"main": price, "vision": price})):
            pass
    every = {"main": price, "cheap": price, "vision": price}
    async with asyncio.timeout(GIVE_UP), open_runtime(with_prices(every)) as runtime:
        assert runtime.models is not None and runtime.models.names == ("main", "cheap", "vision")
