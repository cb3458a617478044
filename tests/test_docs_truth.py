"""What the README and the docs pages claim about nerve itself holds: what each make target needs,
which environment the examples run in, the commands nerve has, and what `nerve doctor` prints."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DOCS = ROOT / "docs"
ACTIVATE = "source .venv/bin/activate"
SH_BLOCK = re.compile(r"```sh\n(.*?)```", re.DOTALL)
ASSIGNMENT = re.compile(r"^(?:[A-Z_][A-Z0-9_]*=\S*\s+)+")


def read(page: Path) -> str:
    return page.read_text(encoding="utf-8")


def commands_run_from_the_venv(text: str) -> list[str]:
    """Lines of the page's shell examples that start `nerve`, `python` or `pip` as found on PATH:
    in a fresh shell those are the system's, not the ones `make` installed into .venv."""
    found = []
    for block in SH_BLOCK.findall(text):
        for line in block.splitlines():
            command = ASSIGNMENT.sub("", line.strip())
            if command.split(" ", 1)[0] in {"nerve", "python", "pip"}:
                found.append(line.strip())
    return found


def test_the_readme_says_what_make_run_and_make_test_need_where_it_shows_them():
    text = read(README)
    shown = text.index("make test   #")
    after = text[shown : text.index("```text")]
    run_needs = "`make run` needs only Python 3.11+ and `make`"
    assert run_needs in after
    for needed in ("Node.js 20", "npm", "PostgreSQL", "NERVE_TEST_DATABASE_URL"):
        assert needed in after, needed
    assert "only Python 3.11+ and `make`" not in text.replace(run_needs, ""), "make test needs more"


def test_every_page_that_runs_nerve_or_python_says_to_activate_the_venv_first():
    readme = read(README)
    assert ACTIVATE in readme
    for line in commands_run_from_the_venv(readme):
        assert readme.index(ACTIVATE) < readme.index(line), line
    for page in sorted(DOCS.glob("*.md")):
        text = read(page)
        examples = commands_run_from_the_venv(text)
        if examples:
            assert ACTIVATE in text, f"{page.name}: {examples[0]}"
            assert text.index(ACTIVATE) < text.index(examples[0]), page.name


def test_the_command_table_names_every_command_nerve_has():
    usage = subprocess.run(
        [sys.executable, "-m", "bot", "--help"], capture_output=True, text=True, check=True, cwd=ROOT
    ).stdout
    commands = re.search(r"\{([a-z,-]+)\}", usage)
    assert commands is not None, usage
    table = [line for line in read(DOCS / "commands.md").splitlines() if line.startswith("| `nerve")]
    for command in commands.group(1).split(","):
        assert any(re.search(rf"`nerve (\[)?{command}\b", row) for row in table), command


def test_the_doctor_sample_shows_the_schema_version_nerve_migrates_to():
    newest = max(int(path.name.split("_", 1)[0]) for path in (ROOT / "migrations").glob("[0-9]*.sql"))
    sample = read(DOCS / "commands.md").split("$ nerve doctor\n", 1)[1].split("```", 1)[0]
    [shown] = re.findall(r"schema version (\d+) \(current\)", sample)
    assert int(shown) == newest


def test_every_setting_in_env_example_has_a_row_in_the_settings_page_and_no_other():
    listed = set(re.findall(r"^#?\s*([A-Z][A-Z0-9_]+)=", read(ROOT / ".env.example"), re.MULTILINE))
    documented = set(re.findall(r"^\| `([A-Z][A-Z0-9_]+)` \|", read(DOCS / "settings.md"), re.MULTILINE))
    assert sorted(listed - documented) == [], "settings .env.example lists that docs/settings.md does not"
    assert sorted(documented - listed) == [], "settings docs/settings.md documents that .env.example lacks"
