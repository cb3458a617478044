"""The model check: `GET /models` shows at once whether the service is reached, takes the key and
knows NERVE_MODEL. What it says about a refused key is not repeated: OpenAI's 401 quotes the key.
"""

from __future__ import annotations

import openai
from pydantic import SecretStr

from adapters.doctor.local import MODEL as NAME
from adapters.doctor.report import Check, error, ok, warning
from bot.config import Settings
from bot.model.models import ModelSpec

# Long enough for a service that is waking up; a model that is merely slow answers this at once.
MODEL_LIMIT = 15.0
# How many of the listed models a warning names.
SHOWN_MODELS = 8
API_HINT = "check that OPENAI_BASE_URL points at the API (it usually ends in /v1)"


async def check_model(
    settings: Settings, spec: ModelSpec | None = None, *, source: str = "OPENAI_*"
) -> Check:
    """List the service's models (the offline model is `offline_check`'s); `spec`: one model of the
    `models` list (`source`), else the one of the OPENAI_* settings."""
    if spec is None:
        return await _check(
            settings, None, settings.openai_base_url, settings.openai_api_key, settings.nerve_model
        )
    return await _check(settings, (spec.name, source), spec.base_url, spec.api_key, spec.model)


async def _check(
    settings: Settings,
    listed: tuple[str, str] | None,
    base_url: str | None,
    api_key: SecretStr | None,
    model: str,
) -> Check:
    key = api_key.get_secret_value() if api_key else None
    limit = min(settings.nerve_llm_timeout, MODEL_LIMIT)
    # Where each fix goes: the OPENAI_* settings, or the model's entry in its list.
    name, url_field, key_field, model_field = NAME, "OPENAI_BASE_URL", "OPENAI_API_KEY", "NERVE_MODEL"
    if listed is not None and listed[1] != "OPENAI_*":
        entry = f"model '{listed[0]}' in {listed[1]}"
        name = f"model {listed[0]}"
        url_field, key_field, model_field = (f"the base_url of {entry}", f"the api_key_env of {entry}",
                                             f"the model of {entry}")  # fmt: skip
    async with openai.AsyncOpenAI(
        base_url=base_url,
        api_key=key or "not-needed",
        max_retries=0,
        timeout=openai.Timeout(limit),
    ) as client:
        url = client.base_url
        # A URL may carry credentials (https://user:pass@host): never shown.
        where = str(url.copy_with(username=None, password=None) if url.userinfo else url).rstrip("/")
        reach = f"check {url_field} and that the model service is running"
        if not base_url:
            reach = f"check the network (or set {url_field})"
        try:
            page = await client.models.list()
        except openai.APITimeoutError:
            return error(name, f"the model service at {where} did not answer within {limit:g} s", reach)
        except openai.APIConnectionError as exc:
            cause = exc.__cause__ or exc.__context__
            why = (str(cause) or type(cause).__name__) if cause is not None else exc.message
            return error(name, f"could not reach the model service at {where} ({why})", reach)
        except (openai.AuthenticationError, openai.PermissionDeniedError) as exc:
            found = f"the model service at {where} rejected the API key ({exc.status_code})"
            return error(name, found, f"check {key_field}")
        except openai.NotFoundError:
            found = f"{where} has no model list (404 for GET /models), so {model_field} could not be checked"
            return warning(name, found, f"if answers fail too, {API_HINT}")
        except openai.APIStatusError as exc:
            found = f"the model service at {where} answered {exc.status_code} to GET /models{_said(exc)}"
            return error(name, found, f"check {url_field} and {key_field}, or the service's status")
        except openai.APIError:
            return error(name, f"{where} did not answer like an OpenAI-compatible API", API_HINT)
    names = [listed_model.id for listed_model in page.data]
    if model in names:
        return ok(name, f"{where}: model '{model}' is available")
    shown = ", ".join(names[:SHOWN_MODELS]) + (", …" if len(names) > SHOWN_MODELS else "")
    found = f"{where} does not list model '{model}' ({model_field}); it lists {len(names)}: {shown or 'none'}"
    return warning(name, found, f"set {model_field} to one of the listed models")


def _said(exc: openai.APIStatusError) -> str:
    body = exc.body
    message = body.get("message") if isinstance(body, dict) else None
    if not isinstance(message, str) or not message.strip():
        return ""
    text = " ".join(message.split())
    return f": {text[:200]}{'…' if len(text) > 200 else ''}"
