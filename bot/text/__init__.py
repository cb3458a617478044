"""Text for people and models: scrubbing, truncation and nesting limits.

The front ends reach what they show people through this package, so `from bot.text import …` is their
one way in and the modules behind it can be split or merged without touching a front end.
"""

from bot.text.render import neutralize_mentions, pretty_json, show_link_targets, split_markdown, truncate
from bot.text.scrubbing import question_too_long, scrub, scrub_bytes

__all__ = [
    "neutralize_mentions",
    "pretty_json",
    "question_too_long",
    "scrub",
    "scrub_bytes",
    "show_link_targets",
    "split_markdown",
    "truncate",
]
