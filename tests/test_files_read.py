"""Reading shared files (`bot.files.read_file`): real images made with Pillow, PDFs written byte by
byte, text in several encodings; refusals are `FileRefused` naming the file and what nerve reads."""

from __future__ import annotations

import bz2
import gzip
import io
import os
import tarfile
import zipfile

import pytest
from PIL import Image, PngImagePlugin

from bot.errors import FileRefused
from bot.files import SUPPORTED, FileLimits, read_file
from bot.types.files import StoredFile
from tests.file_samples import bomb_png, encrypted_pdf, image_bytes, make_pdf


def opened(file: StoredFile) -> Image.Image:
    assert file.image is not None
    return Image.open(io.BytesIO(file.image))


async def refusal(name: str, data: bytes, mime: str | None = None, **limits: int) -> str:
    with pytest.raises(FileRefused) as caught:
        await read_file("f_x", name, mime, data, limits=FileLimits(**limits))
    message = caught.value.message
    assert message.startswith(f"{name}: "), message
    assert "Traceback" not in message
    return message


# Images


async def test_a_big_photo_is_scaled_to_the_long_side_and_its_exif_is_gone():
    exif = Image.Exif()
    exif[0x010F] = "CanaryCam"  # Make
    exif[0x0131] = "secret-software-4471"  # Software
    data = image_bytes((4000, 3000), "JPEG", exif=exif.tobytes())
    assert b"CanaryCam" in data and Image.open(io.BytesIO(data)).getexif()
    file = await read_file("f_1", "photo.jpg", "image/jpeg", data)
    assert (file.kind, file.mime, file.image_mime) == ("image", "image/jpeg", "image/jpeg")
    assert file.size == len(data) and file.text == ""
    image = opened(file)
    assert image.size == (1568, 1176)
    assert not image.getexif()
    assert file.image is not None
    assert b"CanaryCam" not in file.image and b"secret-software" not in file.image
    assert file.summary == "4000×3000 JPEG image, scaled to 1568×1176"


async def test_the_long_side_is_a_limit_and_a_small_image_keeps_its_size():
    tall = await read_file(
        "f_1", "tall.png", None, image_bytes((300, 900), "PNG"), limits=FileLimits(image_side=600)
    )
    assert opened(tall).size == (200, 600)
    small = await read_file("f_2", "small.png", None, image_bytes((120, 80), "PNG"))
    assert opened(small).size == (120, 80)
    assert small.summary == "120×80 PNG image"


async def test_an_exif_rotation_is_applied_before_the_exif_is_dropped():
    exif = Image.Exif()
    exif[0x0112] = 6  # Orientation: rotate 90° clockwise to view
    file = await read_file("f_1", "phone.jpg", None, image_bytes((200, 100), "JPEG", exif=exif.tobytes()))
    image = opened(file)
    assert image.size == (100, 200)
    assert not image.getexif()


async def test_a_png_keeps_its_transparency_and_loses_its_text_chunks():
    info = PngImagePlugin.PngInfo()
    info.add_text("Author", "canary-author-9931")
    data = image_bytes((64, 48), "PNG", mode="RGBA", color=(10, 20, 30, 0), pnginfo=info)
    assert b"canary-author-9931" in data
    file = await read_file("f_1", "logo.png", "image/png", data)
    assert file.image_mime == "image/png"
    assert file.image is not None and b"canary-author-9931" not in file.image
    image = opened(file)
    assert image.mode == "RGBA" and image.getpixel((0, 0)) == (10, 20, 30, 0)
    assert "Author" not in image.info


async def test_an_opaque_png_is_sent_as_jpeg():
    file = await read_file("f_1", "shot.png", None, image_bytes((50, 40), "PNG"))
    assert (file.mime, file.image_mime) == ("image/png", "image/jpeg")
    assert opened(file).format == "JPEG"


async def test_a_cmyk_jpeg_and_a_16_bit_grey_png_come_out_as_rgb():
    cmyk = await read_file(
        "f_1", "print.jpg", None, image_bytes((40, 30), "JPEG", mode="CMYK", color=(0, 255, 255, 0))
    )
    red, green, blue = opened(cmyk).getpixel((20, 15))  # type: ignore[misc]
    assert opened(cmyk).mode == "RGB" and red > 200 and green < 60 and blue < 60
    grey = await read_file("f_2", "depth.png", None, image_bytes((40, 30), "PNG", mode="I;16", color=40_000))
    assert opened(grey).mode == "RGB"


async def test_the_bytes_decide_the_type_not_the_name():
    file = await read_file("f_1", "notes.txt", "text/plain", image_bytes((30, 20), "PNG"))
    assert (file.kind, file.mime) == ("image", "image/png")


async def test_a_decompression_bomb_is_refused_before_its_pixels_are_read():
    data = bomb_png(100_000, 100_000)
    assert len(data) < 200
    message = await refusal("bomb.png", data)
    assert "10,000,000,000 pixels" in message and "50,000,000" in message


async def test_an_image_over_the_pixel_limit_is_refused_with_its_size():
    message = await refusal("scan.png", image_bytes((40, 30), "PNG"), max_image_pixels=1_000)
    assert message == "scan.png: it has 40×30 pixels; nerve reads images of up to 1,000 pixels."


async def test_a_gif_is_read_from_its_first_frame_and_its_other_frames_are_never_unpacked():
    frames = [Image.new("P", (40, 40), index) for index in (1, 2, 3)]
    for frame in frames:
        frame.putpalette([0, 0, 0, 250, 0, 0, 0, 0, 250, 0, 250, 0] + [0] * 756)
    out = io.BytesIO()
    frames[0].save(out, format="GIF", save_all=True, append_images=frames[1:], duration=100)
    data = out.getvalue()
    # Cut the file inside its last frame: unpacking it would fail, the first frame is whole.
    broken = data[: len(data) - 12]
    with pytest.raises((OSError, EOFError, ValueError)):
        gif = Image.open(io.BytesIO(broken))
        gif.seek(2)
        gif.load()
    file = await read_file("f_1", "anim.gif", "image/gif", broken)
    assert file.summary == "40×40 GIF image (first frame)"
    red, green, blue = opened(file).convert("RGB").getpixel((20, 20))  # type: ignore[misc]
    assert red > 230 and green < 20 and blue < 20  # the first frame's red, through JPEG


async def test_a_webp_is_read():
    file = await read_file("f_1", "pic.webp", None, image_bytes((80, 60), "WEBP", color=(0, 200, 0)))
    assert file.mime == "image/webp" and file.summary == "80×60 WebP image"
    red, green, blue = opened(file).convert("RGB").getpixel((40, 30))  # type: ignore[misc]
    assert green > 180 and red < 40 and blue < 40


async def test_a_damaged_image_is_refused_plainly():
    data = image_bytes((200, 200), "PNG", color=(1, 2, 3))
    message = await refusal("cut.png", data[: len(data) // 2])
    assert "damaged or incomplete" in message


async def test_an_image_type_nerve_does_not_read_is_refused_naming_what_it_reads():
    message = await refusal("old.bmp", image_bytes((10, 10), "BMP"), "image/bmp")
    assert "an image type nerve does not read" in message and SUPPORTED in message


# PDF


async def test_a_pdf_gives_its_text_page_by_page():
    data = make_pdf(["Quarterly revenue rose (a lot)", "Costs fell by 3%", "Outlook: sunny"])
    file = await read_file("f_1", "report.pdf", "application/pdf", data)
    assert (file.kind, file.mime, file.summary) == ("pdf", "application/pdf", "PDF, 3 pages")
    assert file.text.split("\n\n") == [
        "[page 1]\nQuarterly revenue rose (a lot)",
        "[page 2]\nCosts fell by 3%",
        "[page 3]\nOutlook: sunny",
    ]


async def test_a_pdf_past_the_page_cap_keeps_the_first_pages_and_says_so():
    file = await read_file(
        "f_1", "long.pdf", None, make_pdf(["one", "two", "three", "four"]), limits=FileLimits(pdf_pages=2)
    )
    assert "two" in file.text and "three" not in file.text
    assert file.summary == "PDF, 4 pages, text of the first 2 pages only (nerve reads up to 2)"


async def test_the_pdf_time_cap_is_checked_between_pages():
    file = await read_file(
        "f_1", "slow.pdf", None, make_pdf(["one", "two"]), limits=FileLimits(pdf_seconds=0)
    )
    assert file.text == "[page 1]\none"
    assert file.summary == "PDF, 2 pages, text of the first page only (reading stopped after 0 s)"


async def test_a_password_protected_pdf_is_refused_plainly():
    message = await refusal("locked.pdf", encrypted_pdf(["top secret"], user_password="hunter2"))
    assert message == "locked.pdf: it is protected by a password; share a copy without one."


async def test_a_pdf_encrypted_only_against_editing_is_read():
    file = await read_file("f_1", "owner.pdf", None, encrypted_pdf(["readable anyway"], user_password=""))
    assert file.text == "[page 1]\nreadable anyway"


async def test_a_broken_pdf_is_refused_plainly():
    message = await refusal("broken.pdf", b"%PDF-1.7\n1 0 obj << /Type /Catalog >>\ngarbage")
    assert message == "broken.pdf: it is not a PDF nerve can read (damaged or incomplete?)."


async def test_a_pdf_without_text_is_refused_as_a_scan():
    message = await refusal("scan.pdf", make_pdf([""]))
    assert "no text to read (a scan?)" in message


# Text


async def test_a_csv_is_summed_up_by_its_columns_and_rows():
    data = b'city,country,population\r\nParis,France,2102650\r\n"Lyon, Rhone",France,522250\r\n'
    file = await read_file("f_1", "cities.csv", None, data)
    assert (file.kind, file.mime) == ("text", "text/csv")
    assert file.summary == "CSV: 3 columns (city, country, population), 2 rows"
    assert "\r" not in file.text and file.text.startswith("city,country,population\nParis")


async def test_a_semicolon_csv_and_a_wide_one_are_summed_up():
    semicolons = await read_file("f_1", "de.csv", None, "Name;Stadt\nAnna;Köln\n".encode())
    assert semicolons.summary == "CSV: 2 columns (Name, Stadt), 1 row"
    wide = ",".join(f"c{index}" for index in range(12)) + "\n" + ",".join("1" * 12) + "\n"
    file = await read_file("f_2", "wide.csv", "text/csv", wide.encode())
    assert file.summary == "CSV: 12 columns (c0, c1, c2, c3, c4, c5, c6, c7, …), 1 row"


async def test_a_json_is_summed_up_by_its_keys_or_items():
    obj = await read_file("f_1", "config.json", None, b'{"name": "nerve", "tools": [1, 2], "debug": false}')
    assert obj.summary == "JSON object: 3 keys (name, tools, debug)"
    assert obj.mime == "application/json"
    array = await read_file("f_2", "list.json", None, b"[1, 2, 3]")
    assert array.summary == "JSON array: 3 items"
    bad = await read_file("f_3", "bad.json", None, b'{"name": ')
    assert bad.summary == "JSON that does not parse" and bad.text == '{"name": '


async def test_a_minified_json_is_indented_so_it_can_be_read_by_line():
    data = (
        "[" + ",".join(f'{{"id": {index}, "name": "item {index}"}}' for index in range(300)) + "]"
    ).encode()
    file = await read_file("f_1", "min.json", None, data)
    assert file.summary == "JSON array: 300 items"
    assert file.text.count("\n") > 300 and '"name": "item 299"' in file.text


async def test_latin1_text_is_decoded():
    text = "Le café était déjà fermé quand nous sommes arrivés à la gare.\n"
    file = await read_file("f_1", "note.txt", None, text.encode("latin-1"))
    assert file.text == text
    assert file.summary == "1 line, cp1252"


async def test_utf16_text_is_decoded():
    text = "Grüße aus München\nzweite Zeile\n"
    file = await read_file("f_1", "ps.log", None, text.encode("utf-16"))
    assert file.text == text
    assert file.summary.startswith("2 lines, utf-16")


async def test_utf16_without_a_byte_order_mark_is_decoded():
    text = "Event log\nERROR disk full on C:\\\n"
    little = await read_file("f_1", "events.log", None, text.encode("utf-16-le"))
    big = await read_file("f_2", "events.log", None, text.encode("utf-16-be"))
    assert little.text == big.text == text
    assert little.summary == "2 lines, utf-16-le"


async def test_utf8_with_a_bom_and_markdown_and_yaml():
    md = await read_file("f_1", "README.md", None, "\ufeff# Titre\n\nÉté\n".encode())
    assert (md.text, md.mime, md.summary) == ("# Titre\n\nÉté\n", "text/markdown", "3 lines")
    yaml = await read_file("f_2", "compose.yml", None, b"services:\n  web: {}\n")
    assert yaml.mime == "application/yaml"
    code = await read_file("f_3", "main.py", "text/x-python", b"print('hi')")
    assert (code.mime, code.summary) == ("text/x-python", "1 line")


def zipped(inner: str = "secret.txt") -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as archive:
        archive.writestr(inner, "never unpacked\n")
    return out.getvalue()


def tarred() -> bytes:
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w") as archive:
        body = b"never unpacked\n"
        info = tarfile.TarInfo("secret.txt")
        info.size = len(body)
        archive.addfile(info, io.BytesIO(body))
    return out.getvalue()


REFUSED = [
    ("backup.zip", zipped(), "a ZIP archive"),
    ("report.docx", zipped("word/document.xml"), "a Word document"),
    ("slides.pptx", zipped("ppt/presentation.xml"), "a presentation"),
    ("dump.tar", tarred(), "a tar archive"),
    ("notes.txt.bz2", bz2.compress(b"text " * 100), "a bzip2 archive"),
    ("log.gz", gzip.compress(b"text " * 100, mtime=0), "a gzip archive"),
    ("sheet.xls", b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + os.urandom(200), "a spreadsheet"),
    ("tool", b"\x7fELF" + os.urandom(200), "a program"),
    ("setup.exe", b"MZ\x90\x00\x03\x00\x00\x00" + os.urandom(200), "a program"),
    ("data.7z", b"7z\xbc\xaf\x27\x1c" + os.urandom(200), "a 7-Zip archive"),
    ("notes.zip", b"just text named like an archive", "an archive"),
]


@pytest.mark.parametrize(("name", "data", "what"), REFUSED, ids=[name for name, _, _ in REFUSED])
async def test_archives_programs_and_office_files_are_refused_naming_what_nerve_reads(name, data, what):
    message = await refusal(name, data)
    assert message == f"{name}: it is {what}, which nerve does not open; {SUPPORTED}."


async def test_text_that_starts_like_a_magic_number_is_still_text():
    for text in ("MZ Holdings: minutes of the meeting\n", "BZh is not bzip2\n", "ID3 tags explained\n"):
        file = await read_file("f_1", "doc.txt", None, text.encode())
        assert file.text == text


async def test_a_key_file_is_text_not_a_presentation():
    pem = b"-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"
    file = await read_file("f_1", "server.key", None, pem)
    assert file.text == pem.decode() and file.summary == "3 lines"


async def test_a_csv_row_may_span_lines_inside_quotes():
    file = await read_file("f_1", "notes.csv", None, b'id,note\n1,"first\nsecond"\n2,plain\n')
    assert file.summary == "CSV: 2 columns (id, note), 2 rows"


async def test_binary_junk_is_refused_whatever_its_name():
    junk = bytes(range(256)) * 8 + os.urandom(4096)
    message = await refusal("readme.txt", junk)
    assert message == f"readme.txt: it is binary data, not text; {SUPPORTED}."


async def test_an_empty_file_is_refused():
    assert await refusal("empty.txt", b"") == "empty.txt: the file is empty."


async def test_a_refusal_names_the_file_on_one_line():
    with pytest.raises(FileRefused) as caught:
        await read_file("f_1", "evil\nname.zip", None, b"PK\x03\x04" + b"0" * 50)
    assert caught.value.message.startswith("evil name.zip: it is a ZIP archive")


async def test_a_damaged_webp_is_named_as_people_write_it():
    message = await refusal("pic.webp", image_bytes((80, 60), "WEBP")[:40])
    assert "WebP" in message and "WEBP" not in message
