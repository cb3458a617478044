"""The Discord checks: the token logs in, and the Message Content intent is allowed when
NERVE_DISCORD_MESSAGE_CONTENT is on (a refused gateway at start, asked before connecting).
"""

from __future__ import annotations

import asyncio
from typing import Any

import aiohttp
import discord

from adapters.discord.app import check_settings, point_discord_at
from adapters.doctor.report import Check, error, ok, warning
from adapters.settings import Settings

DISCORD_LIMIT = 15.0
INTENT_SWITCH = "the Developer Portal (Bot → Privileged Gateway Intents)"


async def check_discord(settings: Settings) -> list[Check]:
    token = check_settings(settings)
    point_discord_at(settings)
    http = discord.http.HTTPClient(asyncio.get_running_loop())
    try:
        async with asyncio.timeout(DISCORD_LIMIT):
            me: Any = await http.static_login(token)
            app: Any = await http.application_info()
    except discord.LoginFailure:
        todo = "copy the bot token again from the Developer Portal (Bot → Reset Token)"
        return [error("discord", "Discord rejected DISCORD_BOT_TOKEN (401 Unauthorized)", todo)]
    except (aiohttp.ClientConnectionError, OSError, TimeoutError) as exc:
        found = f"cannot reach Discord at {settings.discord_api_base_url} ({str(exc) or type(exc).__name__})"
        return [error("discord", found, "check the network, or DISCORD_API_BASE_URL if you set it")]
    except discord.HTTPException as exc:
        found = f"Discord answered {exc.status} to the bot's login: {exc.text or 'no reason given'}"
        return [error("discord", found, "check DISCORD_BOT_TOKEN and DISCORD_API_BASE_URL")]
    finally:
        await http.close()
    found = f"DISCORD_BOT_TOKEN works: logged in as {me.get('username')} ({app.get('name')})"
    checks = [ok("discord", found)]
    if settings.nerve_discord_message_content:
        checks.append(_intent(discord.ApplicationFlags._from_value(int(app.get("flags") or 0))))
    return checks


def _intent(flags: discord.ApplicationFlags) -> Check:
    if flags.gateway_message_content or flags.gateway_message_content_limited:
        found = "the application may read message content (NERVE_DISCORD_MESSAGE_CONTENT)"
        return ok("discord intents", found)
    return warning(
        "discord intents",
        "NERVE_DISCORD_MESSAGE_CONTENT is on, but the application does not have the Message Content "
        "intent: Discord will refuse nerve's connection",
        f"enable it for the bot in {INTENT_SWITCH}, or set NERVE_DISCORD_MESSAGE_CONTENT=false",
    )
