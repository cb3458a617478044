"""The answer while it is being written: the words as they arrive, and a line per tool call.

Both views only record the turn's events (a sink must return at once) and draw elsewhere: `LiveAnswer`
a transient rich region on a terminal, `PlainAnswer` plain text for pipes and `nerve ask`, which cannot
take a draft back once "thinking" makes it one, so it ends that line and goes on below."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Iterator
from typing import IO

from rich.console import Console, ConsoleOptions, RenderResult
from rich.live import Live
from rich.segment import Segment
from rich.text import Text

from adapters.common import turn_so_far
from adapters.terminal.safe import answer_markdown, printable
from bot.types import TurnEvent

FRAMES_PER_SECOND = 20
# While something moves on its own (a spinner, a running call's time), redraw this often.
TICK_SECONDS = 0.1
SPINNER = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"


def took(seconds: float) -> str:
    return f"{seconds * 1000:.0f} ms" if seconds < 1 else f"{seconds:.1f} s"


class TurnSoFar(turn_so_far.TurnSoFar):
    """What a turn has shown so far, by this terminal's clock; asks are the chat's own, never shown."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        super().__init__()
        self._clock = clock

    def apply(self, event: TurnEvent) -> None:
        if event.kind not in ("ask", "ask_done"):
            self.record(event, self._clock())

    @property
    def status(self) -> str:
        return "thinking…" if self.status_line is None else self.status_line

    @property
    def moving(self) -> bool:
        """True while something on screen changes by itself (a spinner, a running call's time)."""
        return not self.text or any(call.finished is None for call in self.calls.values())

    def call_line(self, call: turn_so_far.Call, frame: str) -> Text:
        name = printable(f"{call.name}{_on(call.server)}")
        if call.finished is None:
            said = f"{call.progress}{turn_so_far.percent(call.fraction)}"
            said = f" — {printable(said)}" if said else ""
            mark, timing = (frame, "cyan"), f"running {took(self._clock() - call.started)}{said}"
        else:
            mark, timing = ("✓", "green") if call.ok else ("✗", "red"), took(call.finished - call.started)
        return Text.assemble("  ", mark, " ", (name, "bold"), (f"  {timing}", "dim"))


class LiveAnswer:
    """The turn drawn live on a terminal while it runs; `async with`, then pass `progress` on."""

    def __init__(self, console: Console, *, hint: str = "") -> None:
        self.turn = TurnSoFar()
        self._console = console
        self._hint = hint
        self._live = self._region()
        self._changed = asyncio.Event()
        self._painter: asyncio.Task[None] | None = None
        self._paused = False

    def _region(self) -> Live:
        return Live(
            self,
            console=self._console,
            auto_refresh=False,
            transient=True,
            redirect_stdout=False,
            redirect_stderr=False,
        )

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        """One drawing of the region, never taller than the terminal (rich cannot scroll a live
        region: what does not fit would be left behind on the screen), so the answer shows its end."""
        turn = self.turn
        frame = SPINNER[int(time.monotonic() / 0.08) % len(SPINNER)]
        one_line = options.update(no_wrap=True, overflow="ellipsis")
        lines: list[list[Segment]] = []
        for call in turn.calls.values():
            lines += console.render_lines(turn.call_line(call, frame), one_line, pad=False)
        if turn.text:
            lines += console.render_lines(answer_markdown(turn.text), options, pad=False)
        else:
            status = Text.assemble((frame, "cyan"), " ", printable(turn.status), (self._hint, "dim"))
            lines += console.render_lines(status, one_line, pad=False)
        # The cursor sits below the last line: one row fewer than the screen holds.
        room = max(1, options.size.height - 1)
        for index, line in enumerate(lines[-room:]):
            if index:
                yield Segment.line()
            yield from line

    @contextlib.contextmanager
    def paused(self) -> Iterator[None]:
        """Take the region off the screen while the person answers a question below it, then draw
        it anew under what was printed (a fresh region: the old one would erase those lines)."""
        self._paused = True
        self._live.stop()
        try:
            yield
        finally:
            self._live = self._region()
            self._live.start(refresh=True)
            self._paused = False
            self._changed.set()

    async def progress(self, event: TurnEvent) -> None:
        self.turn.apply(event)
        self._changed.set()

    async def __aenter__(self) -> LiveAnswer:
        self._live.start(refresh=True)
        self._painter = asyncio.create_task(self._paint(), name="nerve-live-answer")
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._painter is not None:
            self._painter.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._painter
        self._live.stop()

    async def _paint(self) -> None:
        while True:
            wait = TICK_SECONDS if self.turn.moving else None
            # Not `wait_for`: on Python 3.11 it swallows a cancel that lands just as the event is
            # set (a question's pause ending as the turn ends), and the painter would never stop.
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(wait):
                    await self._changed.wait()
            self._changed.clear()
            if not self._paused:
                self._live.refresh()
            await asyncio.sleep(1 / FRAMES_PER_SECOND)


class PlainAnswer:
    """The answer as plain text as it arrives (`out`), unpadded and unwrapped; progress to `notes`."""

    def __init__(self, out: IO[str], notes: IO[str] | None = None) -> None:
        self._out = out
        self._notes = notes
        # The turn so far (its round's text written so far), and whether `out` is mid-line.
        self._turn = turn_so_far.TurnSoFar()
        self._mid_line = False
        # The turn's notices (a shared file not read), which its final text carries on top.
        self._notices: list[str] = []

    async def progress(self, event: TurnEvent) -> None:
        kind = event.kind
        call = self._turn.calls.get(event.tool_call_id or "")
        started = call.started if call is not None and call.finished is None else None
        shown, now = self._turn.text, time.monotonic()
        self._turn.record(event, now)
        if kind == "text":
            self._write(event.message)
        elif kind == "thinking":
            self._end_line()
        elif kind == "tool_started":
            # Text next to tool calls is a draft: its line ends before the calls are listed.
            self._end_line()
            self._note(f"  ▸ {event.tool}{_on(event.server)}…")
        elif kind == "tool_finished":
            time_taken = f" {took(now - started)}" if started is not None else ""
            self._note(f"  {'✓' if event.ok else '✗'} {event.tool}{_on(event.server)}{time_taken}")
        elif kind == "tool_progress":
            self._note(f"  … {event.tool}: {printable(event.message + turn_so_far.percent(event.fraction))}")
        elif shown == "" and (kind in ("retrying", "notice") or _signs_in(event)):
            # A status line, only before text, never inside it. The chat asks what a turn asks a
            # person itself; a sign-in that `nerve ask` cannot take is said like a status.
            self._note(f"  {event.message}")
        if kind == "notice":
            self._notices.append(event.message)

    def finish(self, text: str) -> None:
        """End the answer as `text` (the reply's own): write only what is not on screen yet. Notices
        the reply carries on top of an answer already written (a shared file not read) end it instead."""
        shown = self._turn.text
        on_top = "\n".join(self._notices) + "\n\n"
        if self._notices and shown.strip() and text.startswith(on_top):
            self._finish(text[len(on_top) :], shown)
            self._end_line()
            self._write("\n" + on_top.rstrip("\n"))
        else:
            self._finish(text, shown)
        self.interrupted()  # the line ended, the turn forgotten

    def _finish(self, text: str, shown: str) -> None:
        if shown and text.startswith(shown):
            rest = text[len(shown) :]
        elif shown.strip() and text.startswith(kept := shown.rstrip()):
            # The final text lost the trailing space of what was shown (a cut-off answer goes on with
            # a note): go on from there, without repeating the line breaks already written.
            rest = text[len(kept) :]
            written = shown[len(kept) :].count("\n")
            rest = rest[min(written, len(rest) - len(rest.lstrip("\n"))) :]
        else:
            self._end_line()
            rest = text
        self._write(rest)

    def after_prompt(self) -> None:
        """Off a terminal the typed line is not echoed: the answer starts on a line apart from the prompt."""
        self._mid_line = True

    def interrupted(self) -> None:
        """The turn stopped (cancelled, failed): end the line so what follows starts on its own."""
        self._end_line()
        self._turn = turn_so_far.TurnSoFar()
        self._notices = []

    def _write(self, text: str) -> None:
        if not text:
            return
        self._out.write(printable(text))
        self._out.flush()
        self._mid_line = not text.endswith("\n")

    def _end_line(self) -> None:
        if self._mid_line:
            self._write("\n")

    def _note(self, line: str) -> None:
        if self._notes is not None:
            self._notes.write(printable(line) + "\n")
            self._notes.flush()


def _on(server: str | None) -> str:
    """Which server a call went to, beside its name (a tool name alone can be a look-alike's)."""
    return f" · {printable(server)}" if server else ""


def _signs_in(event: TurnEvent) -> bool:
    return event.kind == "ask" and event.ask is not None and event.ask.kind == "sign_in"
