"""The sign-in example of the docs on the offline model: "who am I at notes?" through the real CLI
(`nerve connect` then `nerve ask`, and `nerve chat`) as real processes, against the notes server
(its own authorization server) and a BROWSER program that signs in as a person."""

from __future__ import annotations

import json

from tests import test_terminal_sign_in as sign_in
from tests.test_cli import run_nerve
from tests.test_terminal_sign_in import env_for

notes = sign_in.notes  # the notes server as a process of its own, a fixture
QUESTION = "who am I at notes?"


async def test_nerve_ask_on_the_offline_model_answers_who_am_i_at_notes_with_whoami(tmp_path, notes):
    env = env_for(tmp_path, notes, None, "alice")
    code, out, err = await run_nerve("connect", "notes", env=env)
    assert code == 0, err
    assert "Connected notes (your account)." in out
    # nerve ask serves no sign-in of its own: its settings name where one would come back.
    ask_env = {**env, "NERVE_PUBLIC_URL": "http://127.0.0.1:3000"}
    code, out, err = await run_nerve("ask", QUESTION, "--json", env=ask_env)
    assert code == 0, err
    answer = json.loads(out)
    assert [call["name"] for call in answer["tool_calls"]] == ["whoami"]
    assert answer["tool_calls"][0]["server"] == "notes"
    assert "alice" in answer["text"]
    assert notes.log_lines() == ["call whoami by alice"]


async def test_nerve_chat_on_the_offline_model_signs_in_first_then_calls_whoami(tmp_path, notes):
    env = env_for(tmp_path, notes, None, "alice")
    code, out, err = await run_nerve("chat", env=env, stdin=f"{QUESTION}\n/quit\n")
    assert code == 0, err
    assert "Connected to notes." in out
    assert "✓ connect_notes" in out and "✓ whoami" in out
    assert "result=alice" in out
    assert notes.log_lines() == ["call whoami by alice"]
