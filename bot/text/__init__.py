"""Text for people and models: scrubbing, truncation and nesting limits.

The front ends reach what they show people through this package, so `from bot.text import …` is their
one way in and the modules behind it can be split or merged without touching a front end.
"""

from bot.text.render import neutralize_mentions as neutralize_mentions
from bot.text.render import outside as outside
from bot.text.render import pretty_json as pretty_json
from bot.text.render import show_link_targets as show_link_targets
from bot.text.render import split_markdown as split_markdown
from bot.text.render import truncate as truncate
from bot.text.scrubbing import question_too_long as question_too_long
from bot.text.scrubbing import scrub as scrub
