"""The model check: `GET /models` shows at once whether the service is reached, takes the key and
knows NERVE_MODEL. What it says about a refused key is not repeated: OpenAI's 401 quotes the key.
"""

from __future__ import annotations

import openai

from adapters.doctor.local import MODEL as NAME
from adapters.doctor.report import Check, error, ok, warning
from bot.config import Settings

# Long enough for a service that is waking up; a model that is merely slow answers this at once.
MODEL_LIMIT = 15.0
# How many of the listed models a warning names.
SHOWN_MODELS = 8
API_HINT = "check that OPENAI_BASE_URL points at the API (it usually ends in /v1)"


async def check_model(settings: Settings) -> Check:
    """List the service's models (the offline model is `offline_check`'s)."""
    key = settings.openai_api_key.get_secret_value() if settings.openai_api_key else None
    limit = min(settings.nerve_llm_timeout, MODEL_LIMIT)
    async with openai.AsyncOpenAI(
        base_url=settings.openai_base_url,
        api_key=key or "not-needed",
        max_retries=0,
        timeout=openai.Timeout(limit),
    ) as client:
        url = client.base_url
        # A URL may carry credentials (https://user:pass@host): never shown.
        where = str(url.copy_with(username=None, password=None) if url.userinfo else url).rstrip("/")
        reach = "check OPENAI_BASE_URL and that the model service is running"
        if not settings.openai_base_url:
            reach = "check the network (or set OPENAI_BASE_URL)"
        try:
            page = await client.models.list()
        except openai.APITimeoutError:
            return error(NAME, f"the model service at {where} did not answer within {limit:g} s", reach)
        except openai.APIConnectionError as exc:
            cause = exc.__cause__ or exc.__context__
            why = (str(cause) or type(cause).__name__) if cause is not None else exc.message
            return error(NAME, f"could not reach the model service at {where} ({why})", reach)
        except (openai.AuthenticationError, openai.PermissionDeniedError) as exc:
            found = f"the model service at {where} rejected the API key ({exc.status_code})"
            return error(NAME, found, "check OPENAI_API_KEY")
        except openai.NotFoundError:
            found = f"{where} has no model list (404 for GET /models), so NERVE_MODEL could not be checked"
            return warning(NAME, found, f"if answers fail too, {API_HINT}")
        except openai.APIStatusError as exc:
            found = f"the model service at {where} answered {exc.status_code} to GET /models{_said(exc)}"
            return error(NAME, found, "check OPENAI_BASE_URL and OPENAI_API_KEY, or the service's status")
        except openai.APIError:
            return error(NAME, f"{where} did not answer like an OpenAI-compatible API", API_HINT)
    names = [model.id for model in page.data]
    model = settings.nerve_model
    if model in names:
        return ok(NAME, f"{where}: model '{model}' is available")
    shown = ", ".join(names[:SHOWN_MODELS]) + (", …" if len(names) > SHOWN_MODELS else "")
    found = f"{where} does not list model '{model}' (NERVE_MODEL); it lists {len(names)}: {shown or 'none'}"
    return warning(NAME, found, "set NERVE_MODEL to one of the listed models")


def _said(exc: openai.APIStatusError) -> str:
    body = exc.body
    message = body.get("message") if isinstance(body, dict) else None
    if not isinstance(message, str) or not message.strip():
        return ""
    text = " ".join(message.split())
    return f": {text[:200]}{'…' if len(text) > 200 else ''}"
