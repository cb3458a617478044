"""The README and the pages under docs/: every relative link and anchor leads somewhere, every page
is in the site's navigation (mkdocs.yml) and reachable from another page.

Anchors are checked against both slug rules a reader meets: GitHub's, when the Markdown is read on
the forge, and Python-Markdown's (MkDocs), when it is read as the built site.
"""

from __future__ import annotations

import re
import tomllib
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
README = ROOT / "README.md"

FENCE = re.compile(r"^\s*(```|~~~)")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
CODE_SPAN = re.compile(r"`[^`]*`")
# [text](target) and ![alt](target); a target may carry a "title" after a space.
LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
EXTERNAL = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:")


@dataclass(frozen=True)
class Link:
    page: Path
    line: int
    target: str

    def __str__(self) -> str:
        where = self.page.relative_to(ROOT) if self.page.is_relative_to(ROOT) else self.page
        return f"{where}:{self.line}: {self.target}"


def prose_lines(page: Path) -> list[tuple[int, str]]:
    """The page's lines outside fenced code blocks, with code spans blanked: links and headings
    shown as code are examples, not links."""
    lines: list[tuple[int, str]] = []
    fenced = False
    for number, line in enumerate(page.read_text(encoding="utf-8").splitlines(), start=1):
        if FENCE.match(line):
            fenced = not fenced
            continue
        if not fenced:
            lines.append((number, line))
    return lines


def heading_text(raw: str) -> str:
    """What a heading reads as once rendered: code marks and link targets gone."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", raw)
    return text.replace("`", "").replace("*", "")


def github_slug(text: str) -> str:
    slug = re.sub(r"[^\w\- ]", "", text.strip().lower())
    return slug.replace(" ", "-")


def mkdocs_slug(text: str) -> str:
    """Python-Markdown's toc.slugify, the default MkDocs uses."""
    text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode("ascii")
    text = re.sub(r"[^\w\s-]", "", text).strip().lower()
    return re.sub(r"[-\s]+", "-", text)


def anchors(page: Path) -> set[str]:
    """The anchors a link may name on this page: those both slug rules give to one of its headings."""
    headings = [heading_text(m.group(2)) for _, line in prose_lines(page) if (m := HEADING.match(line))]
    return slugs(headings, github_slug) & slugs(headings, mkdocs_slug)


def slugs(headings: list[str], slugify: Callable[[str], str]) -> set[str]:
    """A repeated heading gets -1, -2, … after its slug, under both rules."""
    seen: dict[str, int] = {}
    for heading in headings:
        slug = slugify(heading)
        seen[slug] = seen.get(slug, 0) + 1
    return {slug if n == 0 else f"{slug}-{n}" for slug, count in seen.items() for n in range(count)}


def links(page: Path) -> list[Link]:
    """The relative links of a page (web addresses and mail links are not this test's business)."""
    found = []
    for number, line in prose_lines(page):
        for match in LINK.finditer(CODE_SPAN.sub("", line)):
            target = match.group(1)
            if not EXTERNAL.match(target):
                found.append(Link(page, number, target))
    return found


def broken(link: Link) -> str | None:
    """Why the link leads nowhere, or None when it resolves."""
    path_part, _, anchor = link.target.partition("#")
    target = (link.page.parent / path_part).resolve() if path_part else link.page
    if not target.exists():
        return f"{link}: no such file"
    if anchor:
        if target.suffix != ".md":
            return f"{link}: an anchor into a file that is not a page"
        if anchor not in anchors(target):
            return f"{link}: no heading gives the anchor #{anchor}"
    return None


def found_broken(page: Path) -> list[Link]:
    return [link for link in links(page) if broken(link)]


def pages() -> list[Path]:
    return sorted(DOCS.glob("*.md"))


def nav_pages() -> list[str]:
    """The pages mkdocs.yml's nav lists, in order, whatever the nesting."""
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"))
    listed: list[str] = []

    def walk(entry: object) -> None:
        if isinstance(entry, str):
            listed.append(entry)
        elif isinstance(entry, list):
            for item in entry:
                walk(item)
        elif isinstance(entry, dict):
            for value in entry.values():
                walk(value)

    walk(config["nav"])
    return listed


@pytest.mark.parametrize("page", [README, *pages()], ids=lambda page: str(page.relative_to(ROOT)))
def test_every_relative_link_and_anchor_resolves(page):
    assert [broken(link) for link in found_broken(page)] == []


def test_the_checker_catches_a_missing_page_and_a_missing_anchor(tmp_path):
    page = tmp_path / "page.md"
    page.write_text(
        "# Title\n\n## Health, readiness and metrics\n\n"
        "[ok](#health-readiness-and-metrics) [gone](#healthz) [away](other.md)\n"
        "`[shown as code](nowhere.md)`\n\n```md\n[an example](nowhere.md)\n```\n",
        encoding="utf-8",
    )
    found = [link.target for link in links(page)]
    assert found == ["#health-readiness-and-metrics", "#healthz", "other.md"]
    assert [link.target for link in found_broken(page)] == ["#healthz", "other.md"]


def test_the_slug_rules_agree_on_the_headings_these_pages_use():
    assert github_slug("MCP servers that need sign-in") == "mcp-servers-that-need-sign-in"
    assert mkdocs_slug("MCP servers that need sign-in") == "mcp-servers-that-need-sign-in"
    assert github_slug("Health, readiness and metrics") == mkdocs_slug("Health, readiness and metrics")
    assert heading_text("Run `nerve doctor`") == "Run nerve doctor"


def test_every_docs_page_is_in_the_site_navigation_and_every_entry_exists():
    listed = nav_pages()
    assert sorted(listed) == sorted(page.name for page in pages())
    assert len(listed) == len(set(listed)), "a page listed twice"
    assert listed[0] == "index.md", "the site opens on its index"


def test_no_page_is_orphaned():
    """Each page is linked from the README or from another page, so a reader of either finds it."""
    linked: set[Path] = set()
    for page in [README, *pages()]:
        for link in links(page):
            path_part = link.target.partition("#")[0]
            target = (page.parent / path_part).resolve() if path_part else page
            if target != page:
                linked.add(target)
    orphans = [page.name for page in pages() if page.resolve() not in linked]
    assert orphans == []


def test_the_readme_links_every_docs_page():
    """The README's "where to go next" is the way in from the forge's front page."""
    linked = {link.target.partition("#")[0] for link in links(README)}
    missing = [page.name for page in pages() if f"docs/{page.name}" not in linked]
    assert missing == []


def test_the_site_builds_strictly_with_the_locked_mkdocs():
    """`make docs` fails on a broken link or anchor, with the MkDocs the docs extra pins in the lock."""
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"][
        "optional-dependencies"
    ]
    [pin] = extras["docs"]
    assert pin in (ROOT / "requirements.lock").read_text(encoding="utf-8").splitlines()
    assert pin not in extras["dev"]
    assert "mkdocs build --strict" in (ROOT / "Makefile").read_text(encoding="utf-8")
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"))
    assert config["docs_dir"] == "docs"
    assert config["validation"]["anchors"] == "warn"  # strict turns the warning into a failure
