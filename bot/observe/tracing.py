"""Traces over OpenTelemetry: a span per turn, per model request and per tool call.

Optional: `pip install nerve[otel]` and `OTEL_EXPORTER_OTLP_ENDPOINT`; until `start` sets a tracer up
the span functions do nothing, so the core calls them unconditionally. Spans carry the conversation
and turn id of their log lines (`bot.observe.log_context`), so each finds the other.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from contextlib import AbstractContextManager, nullcontext
from typing import Any

from bot.observe.log_context import current_turn

logger = logging.getLogger(__name__)

INSTALL_HINT = (
    "OTEL_EXPORTER_OTLP_ENDPOINT is set, but OpenTelemetry is not installed, so no traces are sent: "
    "pip install 'nerve[otel]'"
)
SERVICE_NAME = "nerve"
TRACES_PATH = "v1/traces"

# The SDK's tracer once `start` has set one up; None: every span function is a no-op.
_tracer: Any = None


def start(endpoint: str | None, environ: Mapping[str, str] | None = None) -> bool:
    """Send spans to the OTLP/HTTP collector at `endpoint`; True when spans will be sent."""
    global _tracer
    if not endpoint:
        return False
    env = os.environ if environ is None else environ
    try:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
    except ImportError:
        logger.warning(INSTALL_HINT)
        return False
    # The base URL gets the traces path, as the SDK does for the environment variable; a
    # traces-only endpoint in the environment is the SDK's to read.
    own = env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
    traces_url = None if own else f"{endpoint.rstrip('/')}/{TRACES_PATH}"
    resource = Resource.create({"service.name": env.get("OTEL_SERVICE_NAME") or SERVICE_NAME})
    # The SDK flushes what is left when the process exits; batches are sent from its own thread,
    # never from the event loop.
    provider = TracerProvider(resource=resource)
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=traces_url)))
    _tracer = provider.get_tracer("nerve")
    return True


def _span(name: str, attributes: dict[str, str]) -> AbstractContextManager[object]:
    if _tracer is None:
        return nullcontext()
    turn = current_turn()
    if turn is not None:
        attributes = {"nerve.conversation": turn.conversation, "nerve.turn": turn.id, **attributes}
    # An exception leaving the block is recorded on the span, which is then marked as failed.
    span: AbstractContextManager[object] = _tracer.start_as_current_span(name, attributes=attributes)
    return span


def turn_span() -> AbstractContextManager[object]:
    """The whole turn (or resumed turn) that `turn_context` marks."""
    return _span("nerve.turn", {})


def model_span(model: str) -> AbstractContextManager[object]:
    """One request to the model service (each retry is a span of its own)."""
    return _span(f"chat {model}", {"gen_ai.operation.name": "chat", "gen_ai.request.model": model})


def tool_span(tool: str, call_id: str) -> AbstractContextManager[object]:
    return _span(
        f"execute_tool {tool}",
        {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": tool, "gen_ai.tool.call.id": call_id},
    )
