"""Fuzzed Markdown from the model or a tool: no link hides where it goes, no URL gets a preview.

Texts are built from the pieces link syntax is made of (brackets, parentheses, angle brackets,
backticks and fences, list and quote markers, reference definitions, escapes, URLs and a trusted
looking label), 1,000 of them, and every renderer nerve has for model text is read back with a real
CommonMark parser: Slack's markdown, Discord's message text and the shared `show_link_targets`.
Derandomized, so a failure reproduces.
"""

from __future__ import annotations

import re

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from markdown_it import MarkdownIt

from adapters.discord.render import safe_text
from adapters.slack.render import safe_markdown
from bot.text.render import show_link_targets
from tests.markdown_links import disguised_links

FUZZ = settings(
    max_examples=1000,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow],
)
PIECES = [
    "[", "]", "(", ")", "<", ">", "`", "``", "```", "~~~", "\n", "\n\n", " ", "   ", "!", "\\", ":",
    "|", "'", '"', "- ", "> ", "1. ", "    ", "*", "google.com", "https://evil.example/c?d=secret",
    "<https://evil.example>", "[google.com]", "(https://evil.example)", "[g]: https://evil.example",
    "]: ", "][", "](", "](<", "#", "&lt;", "<!here>", "@everyone", "x",
]  # fmt: skip
# Link-shaped pieces, each a near miss or a hit of some link form, so the fuzz meets them often.
links = st.builds(
    "".join,
    st.tuples(
        st.sampled_from(["", "!", "[", "\\", "`", "x"]),
        st.just("["),
        st.sampled_from(["google.com", "[google.com]", "google\n.com", "", "`x`", "a]b"]),
        st.sampled_from(["](", "] (", "][", "]", "]\n(", "][]"]),
        st.sampled_from(["https://evil.example", "<https://evil.example/a b>", "https://evil.example 'T'"]),
        st.sampled_from([")", "]", "", ")`", "))"]),
    ),
)
BLOCKS = [
    "\n\n[g]: https://evil.example", "\n[google.com]: <https://evil.example>", "\n```\n", "```",
    "~~~\n", "- item\n   ```\n", "> ```\n", "\\`", "`", "\n    ", "\n\n", "<div>\n```\n\n",
]  # fmt: skip
blocks = st.sampled_from(BLOCKS)
texts = st.lists(st.one_of(st.sampled_from(PIECES), links, blocks), max_size=16).map("".join)
_PARSER = MarkdownIt("commonmark", {"html": False})
_URL = re.compile(r"<?https?://[^\s<>]+>?")


def code_lines(text: str) -> set[int]:
    """The lines CommonMark reads as a code block (fenced or indented)."""
    lines: set[int] = set()
    for token in _PARSER.parse(text):
        if token.type in ("fence", "code_block") and token.map:
            lines.update(range(*token.map))
    return lines


def previewed(text: str) -> list[str]:
    """Bare URLs outside what CommonMark calls a code block: Discord would preview them."""
    code = code_lines(text)
    return [
        url
        for number, line in enumerate(text.split("\n"))
        if number not in code
        for url in _URL.findall(line)
        if not (url.startswith("<") and url.endswith(">"))
    ]


@FUZZ
@given(text=texts)
def test_no_rendering_of_model_text_makes_a_disguised_link(text: str) -> None:
    assert disguised_links(show_link_targets(text)) == []
    assert disguised_links(safe_markdown(text)) == []
    assert disguised_links(safe_text(text)) == []


@FUZZ
@given(text=texts)
def test_discord_text_previews_no_url(text: str) -> None:
    assert previewed(safe_text(text)) == []
