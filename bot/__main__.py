"""`python -m bot` runs the `nerve` command line, which lives above the core in `adapters.cli`.

The core never imports the front ends; this entry point only hands the process over by name, so
the dependency still points one way (adapters → bot) for every module that is imported.
"""

import runpy

runpy.run_module("adapters", run_name="__main__", alter_sys=True)
