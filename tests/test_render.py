import json
import random
import re

import pytest

from bot.text.render import (
    MIN_SPLIT_LIMIT,
    neutralize_mentions,
    pretty_json,
    show_link_targets,
    split_markdown,
    summarize_result,
    truncate,
)
from tests.markdown_links import DISGUISES, EVIL, disguised_links

FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})(.*)$")
WORDS = ["air", "park", "run", "quality", "near", "temperature", "the", "a", "of", "code", "value", "result"]


def fence_lines_balanced(chunk: str) -> bool:
    """Replays the chunk's fences the way CommonMark pairs them; True when none is left open."""
    open_marker: str | None = None
    for line in chunk.split("\n"):
        match = FENCE.match(line)
        if match is None:
            continue
        marker, info = match.group(1), match.group(2)
        if open_marker is None:
            open_marker = marker
        elif not info.strip() and marker[0] == open_marker[0] and len(marker) >= len(open_marker):
            open_marker = None
    return open_marker is None


def without_fences_and_space(text: str) -> str:
    kept = [line for line in text.split("\n") if not FENCE.match(line)]
    return re.sub(r"\s+", "", "".join(kept))


def random_markdown(rng: random.Random) -> str:
    blocks: list[str] = []
    for _ in range(rng.randint(1, 12)):
        kind = rng.choice(["paragraph", "paragraph", "list", "code", "longword"])
        if kind == "paragraph":
            blocks.append(" ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 80))))
        elif kind == "list":
            blocks.append("\n".join(f"- {rng.choice(WORDS)} {rng.randint(0, 999)}" for _ in range(6)))
        elif kind == "code":
            lang = rng.choice(["", "python", "json"])
            body = "\n".join(
                "    " * rng.randint(0, 2) + f"v{i} = {rng.randint(0, 10**6)}"
                for i in range(rng.randint(0, 30))
            )
            blocks.append(f"```{lang}\n{body}\n```")
        else:
            blocks.append("x" * rng.randint(50, 400))
    return "\n\n".join(blocks)


@pytest.mark.parametrize("seed", range(60))
def test_split_chunks_fit_keep_every_character_and_balance_fences(seed):
    rng = random.Random(seed)
    text = random_markdown(rng)
    limit = rng.choice([MIN_SPLIT_LIMIT, 24, 40, 80, 200, 2000])

    chunks = split_markdown(text, limit)

    assert chunks, "non-blank text must give at least one chunk"
    for chunk in chunks:
        assert 0 < len(chunk) <= limit
        assert chunk.strip()
        assert fence_lines_balanced(chunk), chunk
    assert without_fences_and_space("\n".join(chunks)) == without_fences_and_space(text)


def test_text_that_fits_is_one_unchanged_chunk():
    text = "Hello **world**.\n\n```py\nprint(1)\n```"
    assert split_markdown(text, 100) == [text]


@pytest.mark.parametrize("text", ["", "   ", "\n\n\t\n"])
def test_blank_text_gives_no_chunks(text):
    assert split_markdown(text, 100) == []


def test_a_limit_too_small_for_a_fence_is_refused():
    with pytest.raises(ValueError, match="at least"):
        split_markdown("text", MIN_SPLIT_LIMIT - 1)


def test_paragraph_break_is_preferred_over_a_later_line_break():
    first = "alpha beta gamma delta " * 3 + "end."
    second = "line one\nline two\nline three"
    chunks = split_markdown(f"{first}\n\n{second}", len(first) + 15)
    assert chunks[0] == first
    assert chunks[1] == second


def test_a_paragraph_break_near_the_start_does_not_leave_a_tiny_chunk():
    text = "Hi.\n\n" + "\n".join(f"line number {i}" for i in range(20))
    chunks = split_markdown(text, 100)
    assert chunks[0].startswith("Hi.\n\nline number 0\n")
    assert len(chunks[0]) > 75


def test_line_break_is_preferred_over_a_word_break():
    text = "one two three four\nfive six seven eight nine ten"
    assert split_markdown(text, 30)[0] == "one two three four"


def test_words_are_not_cut_when_a_space_is_available():
    text = " ".join(f"word{i}" for i in range(40))
    chunks = split_markdown(text, 50)
    assert all(re.fullmatch(r"(word\d+ ?)+", chunk) for chunk in chunks)
    assert " ".join(chunks).split() == text.split()


def test_a_word_longer_than_the_limit_is_cut_hard():
    word = "y" * 95
    chunks = split_markdown(f"short {word} tail", 40)
    assert all(len(chunk) <= 40 for chunk in chunks)
    assert "".join(chunks).replace(" ", "") == f"short{word}tail"


def test_a_split_inside_code_closes_and_reopens_the_fence_with_its_language():
    code = "\n".join(f"row_{i} = {i}" for i in range(30))
    chunks = split_markdown(f"Here:\n\n```python\n{code}\n```\n\nDone.", 120)

    assert len(chunks) > 2
    for chunk in chunks[1:-1]:
        assert chunk.startswith("```python\n")
        assert chunk.endswith("\n```")
    for i in range(30):
        holder = next(chunk for chunk in chunks if f"row_{i} = {i}\n" in chunk + "\n")
        before = holder.split(f"row_{i} = {i}")[0]
        assert before.count("```") % 2 == 1, f"row_{i} must sit inside a fence"


def test_a_tilde_fence_is_reopened_with_tildes():
    code = "\n".join(f"step {i}" for i in range(20))
    chunks = split_markdown(f"~~~~sh\n{code}\n~~~~", 60)
    assert len(chunks) > 1
    assert all(chunk.startswith("~~~~sh\n") and chunk.endswith("\n~~~~") for chunk in chunks)


def test_an_unclosed_fence_is_closed_in_its_last_chunk():
    chunks = split_markdown("```\nprint('never closed')", 100)
    assert chunks == ["```\nprint('never closed')\n```"]


def test_a_long_language_tag_is_dropped_rather_than_crowding_out_the_code():
    tag = "a-very-long-language-tag"
    chunks = split_markdown(f"```{tag}\n" + "\n".join("code line" for _ in range(10)) + "\n```", 40)
    assert all(len(chunk) <= 40 and fence_lines_balanced(chunk) for chunk in chunks)
    assert chunks[1].startswith("```\ncode line")


def test_truncate_keeps_short_text_and_reports_no_cut():
    assert truncate("short", 10) == ("short", False)
    assert truncate("exactly10!", 10) == ("exactly10!", False)


def test_truncate_cuts_to_the_limit_including_the_marker():
    text, cut = truncate("a fairly long sentence", 10)
    assert cut
    assert len(text) <= 10
    assert text == "a fairly…"
    assert truncate("abcdef", 4, marker=" [cut]") == (" [cu", True)


def test_summary_of_a_json_object_lists_scalar_fields_first():
    content = json.dumps({"nearby": [{"name": "Park"}], "aqi": 42, "level": "good", "meta": {"v": 1}})
    assert summarize_result(content) == "aqi=42, level=good, nearby=[1 item], meta={…}"


def test_summary_of_text_is_its_first_line_and_respects_the_limit():
    assert summarize_result("\n  first line \nsecond line") == "first line"
    summary = summarize_result(json.dumps({f"key{i}": i for i in range(50)}), limit=40)
    assert len(summary) == 40
    assert summary.startswith("key0=0, key1=1")
    assert summary.endswith("…")


def test_summary_of_a_json_list_counts_its_items():
    assert summarize_result("[1, 2, 3]") == "[3 items]: 1"
    assert summarize_result("[]") == "[0 items]"


def test_pretty_json_indents_json_and_leaves_other_text_alone():
    assert pretty_json('{"a":1,"b":["é"]}') == '{\n  "a": 1,\n  "b": [\n    "é"\n  ]\n}'
    assert pretty_json("not json {") == "not json {"


@pytest.mark.parametrize("word", ["@everyone", "@here", "@channel", "@Everyone"])
def test_mass_mentions_are_broken_by_a_zero_width_space(word):
    out = neutralize_mentions(f"ping {word} now")
    assert word not in out
    assert out == f"ping @\u200b{word[1:]} now"


def test_ordinary_mentions_and_emails_are_left_alone():
    text = "ask @alice or mail team@hereford.example about @hereafter"
    assert neutralize_mentions(text) == text


# --- links written by the model or a tool -----------------------------------------------------------


@pytest.mark.parametrize("text", list(DISGUISES.values()), ids=list(DISGUISES))
def test_no_link_form_hides_where_it_goes(text):
    shown = show_link_targets(text)
    assert disguised_links(shown) == [], shown
    assert EVIL in shown


def test_an_inline_link_shows_its_text_then_its_target_and_a_plain_url_stays_as_it_is():
    assert (
        show_link_targets("see [docs](https://evil.example/a?b=1) now")
        == "see docs (https://evil.example/a?b=1) now"
    )
    assert show_link_targets("[https://a.b](https://a.b)") == "https://a.b"
    assert show_link_targets("go to https://a.b/c") == "go to https://a.b/c"


def test_code_keeps_its_brackets():
    fenced = "```python\nhandlers[0](event)\nx: dict[str, int] = {}\n```"
    assert show_link_targets(fenced) == fenced
    # Inline code only gets invisible zero-width spaces: where a span ends is what hostile text fakes.
    inline = "call `handlers[0](event)` first"
    assert show_link_targets(inline).replace("\u200b", "") == inline


def test_a_fence_only_protects_what_every_reader_agrees_is_code():
    # Indented under a list item, the fence ends with the item: the link after it is a link.
    text = "- item\n   ```\n[google.com](https://evil.example)\n```"
    assert disguised_links(show_link_targets(text)) == []
