"""The benchmarks (`make bench`) and the MCP conformance client (`make conformance`) import the core
the way the product does; `make test` does not run them, so a module of the core that moves must
not leave one of them broken until someone runs those targets."""

from __future__ import annotations

import importlib

import pytest

from tests.conftest import ROOT

SCRIPTS = sorted(
    f"{path.parent.name}.{path.stem}"
    for folder in ("bench", "conformance")
    for path in (ROOT / folder).glob("*.py")
    if path.stem not in ("__init__", "__main__")
)


def test_the_scripts_are_found() -> None:
    assert "conformance.client" in SCRIPTS and "bench.kill_restart" in SCRIPTS


@pytest.mark.parametrize("module", SCRIPTS)
def test_each_benchmark_and_conformance_module_imports(module: str) -> None:
    importlib.import_module(module)
