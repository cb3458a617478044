"""Runs `python -m bot` with this process's arguments (started warm or not, see the package)."""

import runpy

runpy.run_module("bot", run_name="__main__", alter_sys=True)
