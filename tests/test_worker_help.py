"""`nerve worker --help` says what is true of Discord's turns: they are jobs on a queue the
`nerve discord` processes share, and a worker takes none of them."""

from __future__ import annotations

import subprocess
import sys

from tests.conftest import ROOT


def test_worker_help_says_discord_turns_are_jobs_the_discord_processes_share() -> None:
    shown = subprocess.run(
        [sys.executable, "-m", "bot", "worker", "--help"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
        check=True,
    ).stdout
    text = " ".join(shown.split())
    assert "are not jobs" not in text
    assert "Discord turns are jobs too" in text
    assert "a worker takes none of them" in text
