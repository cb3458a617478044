"""The dependency rule of the layout: front ends depend on the core, never the other way round."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# Packages the core may never import: the front ends and the platform SDKs they wrap.
FORBIDDEN = ("adapters", "slack_bolt", "slack_sdk", "discord")
# `python -m bot` hands the process to the command line by module name (runpy), without importing it.
ENTRY_POINT = ROOT / "bot" / "__main__.py"


def imported_modules(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    found: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.append(node.module)
    return found


def forbidden_imports(path: Path) -> list[str]:
    return [
        name
        for name in imported_modules(path)
        if any(name == banned or name.startswith(banned + ".") for banned in FORBIDDEN)
    ]


def test_no_module_of_the_core_imports_a_front_end_or_platform_sdk():
    offenders = {
        str(path.relative_to(ROOT)): names
        for path in sorted((ROOT / "bot").rglob("*.py"))
        if (names := forbidden_imports(path))
    }
    assert offenders == {}


def test_no_module_of_the_core_names_a_platform():
    """What a platform is (its places, its people's ids, its commands) is told by its front end
    (`adapters.settings.PLATFORMS`): the core speaks of "a platform", never of one by name."""
    named = re.compile(r"slack|discord", re.IGNORECASE)
    offenders = [
        f"{path.relative_to(ROOT)}:{number}"
        for path in sorted((ROOT / "bot").rglob("*.py"))
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1)
        if named.search(line)
    ]
    assert offenders == []


def test_the_rule_catches_an_import_of_the_front_ends(tmp_path):
    module = tmp_path / "wiring.py"
    module.write_text("import os\nfrom adapters.cli import main\nimport discord.ext\nimport slack_sdk\n")
    assert forbidden_imports(module) == ["adapters.cli", "discord.ext", "slack_sdk"]


def test_python_dash_m_bot_only_hands_over_by_name():
    assert imported_modules(ENTRY_POINT) == ["runpy"]


def test_discord_commands_do_not_import_the_discord_bot_module():
    commands = ROOT / "adapters" / "discord" / "commands.py"
    assert "adapters.discord.app" not in imported_modules(commands)
