"""Damaged shared files: real images, PDFs and texts with bytes flipped, cut short or spliced, under
any name and type. Whatever arrives, reading gives a `StoredFile` or a plain `FileRefused` naming the
file (never another exception, which a person would see as a failed turn), and what the model reads
of a file that was read (`fit`, `short`, `lines`, `search`) never fails and keeps to its bounds.

Derandomized: the same cases on every run, so a failure reproduces.
"""

from __future__ import annotations

import io
import json

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from PIL import Image

from bot.errors import FileRefused
from bot.files import fit, lines, search, short
from bot.files.read import FileLimits, display_name, read_file_sync
from bot.model.tokens import estimate_tokens
from tests.file_samples import image_bytes, make_pdf

FUZZ = settings(
    max_examples=300,
    derandomize=True,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
    database=None,
)
LIMITS = FileLimits(max_image_pixels=4_000_000, image_side=256, pdf_pages=20, pdf_seconds=5)


def animated_gif() -> bytes:
    frames = [Image.new("P", (60, 40), index) for index in range(3)]
    out = io.BytesIO()
    frames[0].save(out, format="GIF", save_all=True, append_images=frames[1:], duration=50)
    return out.getvalue()


SAMPLES = [
    image_bytes((300, 200), "PNG", mode="RGBA", color=(1, 2, 3, 128)),
    image_bytes((300, 200), "JPEG"),
    image_bytes((120, 90), "WEBP"),
    animated_gif(),
    make_pdf(["first page text", "second (page) text", "third"]),
    b"id,name\n1,a\n2,b\n" * 20,
    json.dumps({"a": [1, 2, {"b": "c"}], "d": "e" * 50}).encode(),
    "Grüße\nLe café\n".encode("utf-16"),
    "naïve café\n".encode("latin-1") * 10,
]
NAMES = st.sampled_from(
    ["photo.png", "scan.jpg", "report.pdf", "data.csv", "a.json", "notes.txt", "x", "..", ""]
)
MIMES = st.sampled_from(
    [None, "image/png", "application/pdf", "text/csv", "application/octet-stream", "text/plain"]
)


@st.composite
def damaged(draw: st.DrawFn) -> bytes:
    data = bytearray(draw(st.sampled_from(SAMPLES)))
    for _ in range(draw(st.integers(0, 8))):
        at = draw(st.integers(0, len(data) - 1))
        data[at] = draw(st.integers(0, 255))
    if draw(st.booleans()):
        data = data[: draw(st.integers(0, len(data)))]
    if draw(st.booleans()):
        at = draw(st.integers(0, len(data)))
        data[at:at] = draw(st.binary(max_size=64))
    return bytes(data)


@FUZZ
@given(data=damaged(), name=NAMES, mime=MIMES, budget=st.integers(1, 3_000), start=st.integers(-5, 60))
def test_a_damaged_file_is_read_or_refused_plainly_and_what_was_read_fits(data, name, mime, budget, start):
    try:
        file = read_file_sync("f_fz", name, mime, data, LIMITS)
    except FileRefused as refused:
        assert refused.message.startswith(display_name(name) + ": ")
        assert "\n" not in refused.message and "Traceback" not in refused.message
        return
    if file.kind == "image":
        assert file.image is not None
        assert max(Image.open(io.BytesIO(file.image)).size) <= LIMITS.image_side
    block = fit(file, budget)
    if file.kind != "image" and estimate_tokens(block.split("\n", 1)[0]) + 80 < budget:
        assert estimate_tokens(block) <= budget
    assert short(file).startswith("[file f_fz: ")
    assert len(lines(file, start, start + 20, max_chars=500)) <= 500
    assert len(search(file, "a", 5, max_chars=500)) <= 500
