"""What the model reads of a stored file (`bot.files.fit`, `short`) and what the attachment tools
return (`lines`, `search`): whole when it fits, else head and tail with the left-out lines named."""

from __future__ import annotations

import base64
import re

from bot.files import data_url, fit, header, line_count, lines, read_file, search, short, size_text
from bot.model.tokens import estimate_tokens
from bot.types.files import StoredFile
from tests.file_samples import image_bytes

ROWS = 5_000


def csv_text(rows: int = ROWS) -> str:
    return "id,name,amount\n" + "".join(f"{row},customer {row},{row * 3}.50\n" for row in range(1, rows + 1))


async def big_csv() -> StoredFile:
    return await read_file("f_ab12", "sales.csv", "text/csv", csv_text().encode())


def text_file(text: str, *, file_id: str = "f_t1") -> StoredFile:
    return StoredFile(id=file_id, name="notes.txt", kind="text", mime="text/plain", size=len(text), text=text)


def test_the_header_names_id_name_type_size_and_summary():
    file = StoredFile(
        id="f_1",
        name="r.csv",
        kind="text",
        mime="text/csv",
        size=12_345,
        text="a\n",
        summary="CSV: 1 column (a), 0 rows",
    )
    assert header(file) == "[file f_1: r.csv · text/csv · 12 KB · CSV: 1 column (a), 0 rows]"
    assert [size_text(size) for size in (1, 820, 2048, 3_565_158)] == [
        "1 byte",
        "820 bytes",
        "2 KB",
        "3.4 MB",
    ]


async def test_a_file_that_fits_is_sent_whole_under_its_header():
    file = await read_file("f_1", "small.csv", None, csv_text(20).encode())
    block = fit(file, 2_000)
    assert block == header(file) + "\n" + file.text
    assert block.startswith("[file f_1: small.csv · text/csv · ")
    assert "CSV: 3 columns (id, name, amount), 20 rows]" in block


async def test_a_big_csv_is_cut_to_its_head_and_tail_with_a_note_naming_the_tools_and_the_lines():
    file = await big_csv()
    assert file.summary == f"CSV: 3 columns (id, name, amount), {ROWS:,} rows"
    block = fit(file, 1_500)
    assert estimate_tokens(block) <= 1_500
    assert estimate_tokens(block) > 1_000  # the budget is used, not wasted
    top, head_first, *_ = block.split("\n")
    assert top == header(file)
    assert head_first == "id,name,amount"  # the CSV's header row leads the head
    note = re.search(
        r"\[lines ([\d,]+)–([\d,]+) of ([\d,]+) left out: call read_attachment\(([^)]*)\)", block
    )
    assert note, block
    first, last, total = (int(group.replace(",", "")) for group in note.groups()[:3])
    assert total == ROWS + 1 == line_count(file.text)
    assert f'attachment_id="f_ab12", start_line={first}' in note.group(4)
    assert 'search_attachment(attachment_id="f_ab12"' in block
    shown = block.split("\n")
    at = next(index for index, line in enumerate(shown) if line.startswith("[lines "))
    every = file.text.split("\n")
    # The head is lines 1..first-1, the tail lines last+1..total, exactly: the note does not lie.
    assert shown[1:at] == every[: first - 1]
    assert shown[at + 1 :] == every[last:total]
    assert shown[-1] == f"{ROWS},customer {ROWS},{ROWS * 3}.50"
    assert 1 < first < last < total


async def test_the_left_out_lines_are_what_read_attachment_returns():
    file = await big_csv()
    block = fit(file, 800)
    first = int(re.search(r"\[lines ([\d,]+)–", block).group(1).replace(",", ""))  # type: ignore[union-attr]
    page = lines(file, first, first + 2)
    assert page.split("\n") == [
        f"[file f_ab12: lines {first:,}–{first + 2:,} of {ROWS + 1:,}]",
        f"{first}| {first - 1},customer {first - 1},{(first - 1) * 3}.50",
        f"{first + 1}| {first},customer {first},{first * 3}.50",
        f"{first + 2}| {first + 1},customer {first + 1},{(first + 1) * 3}.50",
    ]


def test_a_tiny_budget_still_gives_the_header_and_the_note():
    file = text_file("word " * 5_000 + "\nsecond line\n")
    block = fit(file, 120)
    assert block.startswith(header(file))
    assert "left out: call read_attachment" in block


def test_a_single_huge_line_shows_its_beginning_marked_as_cut():
    file = text_file("x" * 200_000)
    block = fit(file, 500)
    assert "… (line 1 goes on)" in block and "[lines 1–1 of 1 left out" in block
    assert estimate_tokens(block) <= 500


def test_lines_are_numbered_clamped_and_bounded():
    file = text_file("".join(f"line {number}\n" for number in range(1, 101)))
    assert lines(file, 99, 500).split("\n") == [
        "[file f_t1: lines 99–100 of 100]",
        " 99| line 99",
        "100| line 100",
    ]
    assert lines(file, 0, 1).split("\n")[1] == "1| line 1"
    assert lines(file, 101, 120) == "The file f_t1 has 100 lines; line 101 is past its end."
    bounded = lines(file, 1, 100, max_chars=200)
    assert len(bounded) <= 200
    assert bounded.split("\n")[-1].startswith("[stopped before line ")
    next_start = int(re.search(r"start_line=(\d+)", bounded).group(1))  # type: ignore[union-attr]
    assert f"{next_start - 1:>3}| line {next_start - 1}" in bounded
    assert f"| line {next_start}\n" not in bounded + "\n"


def test_a_line_longer_than_the_output_limit_is_cut():
    file = text_file("a" * 50_000 + "\nshort\n")
    page = lines(file, 1, 2, max_chars=1_000)
    assert len(page) <= 1_000
    assert "… (line cut: output limit)" in page
    assert page.split("\n")[-1] == "[stopped before line 2 (output limit): call again with start_line=2]"


async def test_search_returns_numbered_matching_lines_up_to_the_limit():
    file = await big_csv()
    found = search(file, "CUSTOMER 4999", limit=5)
    assert found.split("\n") == [
        "[file f_ab12: 1 matching line of 5,001]",
        f"5000| 4999,customer 4999,{4999 * 3}.50",
    ]
    many = search(file, "customer 12", limit=3)
    rows = many.split("\n")
    assert rows[0] == "[file f_ab12: 111 matching lines of 5,001]"
    assert rows[1:4] == [
        "13| 12,customer 12,36.50",
        "121| 120,customer 120,360.50",
        "122| 121,customer 121,363.50",
    ]
    assert rows[4] == "[108 more: narrow the query, or read_attachment around a line]"


def test_search_falls_back_to_every_word_and_says_when_nothing_matches():
    file = text_file("the red fox\nthe fox is red\nblue whale\n")
    assert search(file, "fox red", 10).split("\n")[1:] == ["1| the red fox", "2| the fox is red"]
    assert search(file, "zebra", 10) == "No line of f_t1 (3 lines) contains 'zebra'."
    assert search(file, "  ", 10) == "Give a word or phrase to search for."


def test_search_cuts_long_lines_around_the_match_and_bounds_its_output():
    file = text_file("a" * 5_000 + " needle " + "b" * 5_000 + "\n" + "needle\n" * 2_000)
    found = search(file, "needle", limit=10_000, max_chars=2_000)
    assert len(found) <= 2_000
    first = found.split("\n")[1]
    assert "needle" in first and first.startswith("1| …") and len(first) < 320


def test_short_is_the_header_and_the_first_lines():
    file = text_file("one\ntwo\nthree\nfour\n" + "x" * 500 + "\n")
    assert short(file).split("\n") == [
        header(file),
        "one",
        "two",
        "three",
        '[more: read_attachment(attachment_id="f_t1", start_line=…, end_line=…)]',
    ]
    assert short(text_file("only\n")) == header(text_file("only\n")) + "\nonly"


async def test_an_image_is_its_header_and_a_data_url():
    data = image_bytes((64, 32), "PNG")
    file = await read_file("f_img", "chart.png", "image/png", data)
    assert fit(file, 10_000, shown=True) == f"{header(file)}\n(the image is attached to this message)"
    assert "does not see it" in fit(file, 10_000)
    assert short(file) == header(file)
    assert "image" in lines(file, 1, 5) and "image" in search(file, "x", 5)
    url = data_url(file)
    assert url is not None and url.startswith("data:image/jpeg;base64,")
    assert base64.b64decode(url.split(",", 1)[1]) == file.image
    assert data_url(await big_csv()) is None


def test_search_counts_lines_right_when_lower_casing_lengthens_a_character():
    file = text_file("İstanbul İzmir\nnothing\nthe NEEDLE here\n")
    assert len(file.text.lower()) != len(file.text)
    assert search(file, "needle", 5).split("\n")[1:] == ["3| the NEEDLE here"]
    assert search(file, "İZMİR", 5).split("\n")[1:] == ["1| İstanbul İzmir"]
