"""Reading a request to remember, recall or forget out of a person's message.

Only a message that says so in so many words is one: it starts with "remember", "forget" or asks
"what do you remember/know about me". Anything else is left to the tool ranking, so "what do you
know about A1001?" still asks the tools that read about A1001.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from bot.model.offline.question import STOP

Kind = Literal["remember", "recall", "forget"]
About = Literal["me", "here"]


@dataclass(frozen=True, slots=True)
class MemoryRequest:
    """What the person asked for. `text`: the fact as a statement about its subject ("area code is
    A1001"); `query`: the words to search memories for ("" lists the most recent); `memory_id`: an
    id given outright to forget; `hint`: a reply of its own when the request cannot be carried out."""

    kind: Kind
    text: str = ""
    about: About = "me"
    anywhere: bool = False
    query: str = ""
    memory_id: str | None = None
    hint: str | None = None


# A mention or a name the message opens with ("<@U123> remember …", "nerve, forget …").
_ADDRESS = re.compile(r"^(?:<[@!#][^>]*>|@[\w.-]+|(?:hey|hi|ok|okay|so)\b|nerve\b)[\s,:;!-]*", re.I)
_POLITE = re.compile(r"^(?:please|pls|kindly|(?:can|could|would|will)\s+you(?:\s+please)?)\s+", re.I)
_REMEMBER = re.compile(r"^remember\b(?!\s+to\b)[\s,:;-]*(?P<rest>.*)$", re.I | re.S)
_FORGET = re.compile(r"^forget\b[\s,:;-]*(?P<rest>.*)$", re.I | re.S)
_PLACE = r"(?:channel|server|guild|place|group|team|chat|room|thread|conversation|workspace)"
_EVERYONE = r"(?:everyone|everybody|all\s+of\s+us|us\s+all)"
# "for this channel", "in this server", "for everyone here", "for everyone in this channel".
_HERE = (
    rf"(?:(?:for|in|to)\s+(?:this|the|our)\s+{_PLACE}"
    rf"|for\s+{_EVERYONE}(?:\s+(?:here|in\s+(?:this|the)\s+{_PLACE}))?)"
)
_HERE_FIRST = re.compile(rf"^(?:{_HERE}|here(?=\s*[:,]))\b[\s,:;-]*", re.I)
_HERE_LAST = re.compile(rf"[\s,;:-]*\(?\s*{_HERE}\s*\)?[\s.!]*$", re.I)
_ANYWHERE_FIRST = re.compile(r"^(?:anywhere|everywhere)\b[\s,:;-]*", re.I)
_ANYWHERE_LAST = re.compile(
    r"[\s,;:.—–-]*\(?\s*(?:and\s+)?(?:(?:you\s+)?(?:can|may)\s+)?(?:use|share)\s+(?:it|this|that)\s+"
    r"(?:anywhere|everywhere)(?:\s+else)?\s*\)?[\s.!]*$"
    r"|[\s,;:—–-]*\(\s*(?:anywhere|everywhere)\s*\)[\s.!]*$",
    re.I,
)
_THAT = re.compile(r"^(?:that|this|about)\b[\s,:;-]*", re.I)
_SAID = re.compile(r"^(?:what|everything)\s+(?:i|we)\s+(?:said|told\s+you|mentioned)\s+(?:about\s+)?", re.I)
_EVERYTHING = re.compile(r"^(?:everything|all|it\s+all)(?:\s+(?:about|of)\s+(?:me|us))?[\s.!]*$", re.I)
_QUOTES = "\"'“”‘’`"
# A memory's id: one letter-and-digit word in lowercase hex after an optional letter ("m3f9a2c1").
_ID = re.compile(r"(?<![\w-])(?=[a-z]?[0-9a-f]*\d)(?=[a-z0-9]*[a-z])[a-z]?[0-9a-f]{6,}(?![\w-])")

_WHAT = (
    r"^(?:what|which\s+things?)\s+(?:else\s+)?(?:do|did|have|can)\s+you\s+(?:still\s+|already\s+)?"
    r"(?P<verb>remember(?:ed)?|recall(?:ed)?|know|saved?|stored?|kept|keep)"
)
_RECALL_WHAT = re.compile(rf"{_WHAT}(?:\s+(?:about|of|regarding|for|on)\s+(?P<what>.*?))?\s*[?.!]*$", re.I)
_RECALL_DO = re.compile(
    r"^do\s+you\s+(?:still\s+)?(?P<verb>remember|recall|know)\s+(?:anything\s+(?:about\s+)?)?(?P<what>.+?)\s*[?.!]*$",
    re.I,
)
_RECALL_LIST = re.compile(
    r"^(?:list|show(?:\s+me)?|give\s+me|what\s+are)\s+(?:all\s+)?(?:of\s+)?(?:my|your|the|our)\s+(?:saved\s+)?"
    r"memor(?:y|ies)(?:\s+(?:about|of|for)\s+(?P<what>.*?))?\s*[?.!]*$",
    re.I,
)
_ME = re.compile(r"^(?:me|myself|i|mine)$", re.I)
_HERE_WORDS = re.compile(
    rf"^(?:us|ourselves|here|(?:this|the|our)\s+{_PLACE}|{_EVERYONE}(?:\s+here)?)$", re.I
)
# Words that say a message is about the person: "know my area code" is a question for memory.
_PERSONAL = re.compile(r"^(?:my|our|what\s+i|where\s+i|who\s+i|how\s+i|when\s+i)\b", re.I)
_ADVERBS = {"also", "always", "never", "often", "sometimes", "still", "just", "only", "usually", "mostly"}
_MODALS = {
    "can",
    "can't",
    "cannot",
    "could",
    "will",
    "won't",
    "would",
    "should",
    "must",
    "may",
    "might",
    "was",
}
# How a fact's opening words read about its subject: the person ("I'm" → "is"), or the place.
_SUBJECT: dict[About, dict[str, str]] = {
    "me": {"i'm": "is", "i am": "is", "i've": "has", "i have": "has", "i'd": "would", "i don't": "doesn't"}
    | {"i do not": "does not"},
    "here": {"we're": "are", "we are": "are", "we've": "have"},
}


def _opening(message: str) -> tuple[str, bool]:
    """The message without the mention or "please" it opens with, and whether it was asked politely."""
    text = message.strip()
    while (found := _ADDRESS.match(text)) and found.end() > 0:
        text = text[found.end() :]
    polite = _POLITE.match(text)
    return (text[polite.end() :] if polite else text), polite is not None


def _third_person(verb: str) -> str:
    """ "like" → "likes", "watch" → "watches", "study" → "studies"; a modal or past form as it is."""
    lowered = verb.lower()
    if lowered in _MODALS or lowered.endswith("ed"):
        return verb
    if lowered in ("have", "do", "go"):
        return {"have": "has", "do": "does", "go": "goes"}[lowered]
    if lowered.endswith(("s", "sh", "ch", "x", "z", "o")):
        return verb + "es"
    if len(lowered) > 2 and lowered.endswith("y") and lowered[-2] not in "aeiou":
        return verb[:-1] + "ies"
    return verb + "s"


def statement(text: str, about: About) -> str:
    """The fact as a statement about its subject: "my area code is A1001" → "area code is A1001",
    "I like tea" → "likes tea"; for a place, "our standup is at 10" → "standup is at 10"."""
    text = text.strip().strip(_QUOTES).strip()
    text = re.sub(r"[\s.!?。？]+$", "", text)
    lowered = text.lower()
    for said, becomes in _SUBJECT[about].items():
        if lowered.startswith(said + " "):
            return f"{becomes} {text[len(said) + 1 :].lstrip()}"
    if lowered.startswith("my " if about == "me" else "our "):
        return text.split(None, 1)[1]
    words = text.split(" ")
    if about == "me" and len(words) > 2 and words[0].lower() == "i":
        verb = 2 if words[1].lower() in _ADVERBS or words[1].lower().endswith("ly") else 1
        return " ".join([*words[1:verb], _third_person(words[verb]), *words[verb + 1 :]])
    return text


def search_words(text: str) -> str:
    """The words worth searching memories for: the statement without stop words or punctuation."""
    return " ".join(w for w in re.findall(r"[\w'-]+", text) if w.lower() not in STOP and len(w) > 1)


def _remember(rest: str) -> MemoryRequest:
    about: About = "me"
    anywhere = False
    text = rest.strip()
    while True:
        before = text
        if found := _HERE_FIRST.match(text) or _HERE_LAST.search(text):
            about, text = "here", (text[: found.start()] + text[found.end() :]).strip()
        if found := _ANYWHERE_FIRST.match(text) or _ANYWHERE_LAST.search(text):
            anywhere, text = True, (text[: found.start()] + text[found.end() :]).strip()
        text = _THAT.sub("", text, count=1).strip()
        if text == before:
            break
    fact = statement(text, about)
    if not fact:
        return MemoryRequest("remember", hint="What should I remember? Say, for example, “remember that …”.")
    return MemoryRequest("remember", text=fact, about=about, anywhere=anywhere)


def _forget(rest: str) -> MemoryRequest:
    text = _SAID.sub("", _THAT.sub("", rest.strip(), count=1).strip()).strip()
    if _EVERYTHING.match(text):
        hint = (
            "I forget one memory at a time. Ask “what do you remember about me?” to see them with "
            "their ids, then say “forget <id>”."
        )
        return MemoryRequest("forget", hint=hint)
    if found := _ID.search(text):
        return MemoryRequest("forget", memory_id=found.group(0))
    fact = statement(text, "me")
    query = search_words(fact)
    if not query:
        return MemoryRequest("forget", hint="What should I forget? Say, for example, “forget that …”.")
    return MemoryRequest("forget", text=fact, query=query)


def _recall(what: str, verb: str) -> MemoryRequest | None:
    what = re.sub(r"^(?:anything|everything)\s+(?:about\s+)?", "", what.strip(), flags=re.I)
    what = what.strip().strip(_QUOTES).strip()
    if not what or _ME.match(what):
        return MemoryRequest("recall")
    if _HERE_WORDS.match(what):
        return MemoryRequest("recall", about="here")
    if verb.lower() == "know" and not _PERSONAL.match(what):
        return None  # "what do you know about A1001?" asks the tools, not the memory
    return MemoryRequest("recall", query=search_words(statement(what, "me")), text=what)


def read_request(message: str) -> MemoryRequest | None:
    """The memory request a message makes, or None when it makes none."""
    text, polite = _opening(message)
    if found := _REMEMBER.match(text):
        if text.rstrip().endswith("?") and not polite:
            return None  # "remember when …?" asks, it does not tell
        return _remember(found.group("rest"))
    if found := _FORGET.match(text):
        return _forget(found.group("rest"))
    if found := _RECALL_WHAT.match(text) or _RECALL_LIST.match(text):
        verb = found.groupdict().get("verb") or "remember"
        return _recall(found.group("what") or "", verb)
    if found := _RECALL_DO.match(text):
        return _recall(found.group("what"), found.group("verb"))
    return None
