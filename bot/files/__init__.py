"""Shared files, read into what nerve keeps and what the model reads: pure functions, no store, no
model, no front end (the core's intake fetches, stores and budgets; this package only reads and cuts).

`read_file` turns bytes into a `StoredFile` or a plain `FileRefused`; `fit` makes the block the model
reads within a token budget, `short` the compact form for earlier turns, `lines` and `search` the
answers of the `read_attachment` and `search_attachment` tools.
"""

from bot.files.fit import READ_TOOL as READ_TOOL
from bot.files.fit import SEARCH_TOOL as SEARCH_TOOL
from bot.files.fit import data_url as data_url
from bot.files.fit import fit as fit
from bot.files.fit import header as header
from bot.files.fit import line_count as line_count
from bot.files.fit import lines as lines
from bot.files.fit import search as search
from bot.files.fit import short as short
from bot.files.fit import size_text as size_text
from bot.files.read import SUPPORTED as SUPPORTED
from bot.files.read import FileLimits as FileLimits
from bot.files.read import display_name as display_name
from bot.files.read import read_file as read_file
