"""Images (PNG, JPEG, GIF's first frame, WebP): checked for decompression bombs, scaled down, and
re-encoded without their metadata before a model sees them.

Why each step: a 40-byte PNG may declare 100,000×100,000 pixels and take 40 GB to decode, so the
declared size is refused before any pixel is read; models downscale big images anyway (and bill the
tokens), so the long side is bounded here; EXIF carries GPS positions and camera serials a person
did not mean to share, so only the pixels are kept (turned upright first, as the EXIF said).
"""

from __future__ import annotations

import io
import re
from dataclasses import dataclass

# Only these decoders run: a file claiming to be a PNG is never handed to a TIFF or PSD parser.
_FORMATS = {"png": "PNG", "jpeg": "JPEG", "gif": "GIF", "webp": "WEBP"}
_JPEG_QUALITY = 85


@dataclass(frozen=True, slots=True)
class Scaled:
    data: bytes
    mime: str
    summary: str


class ImageRefused(Exception):
    """Why an image is not read, in words for the person who shared it (without the file's name)."""


def read_image(sort: str, data: bytes, *, max_pixels: int, long_side: int) -> Scaled:
    """The image in `data` (of the sniffed `sort`) scaled so its long side is at most `long_side`,
    re-encoded as PNG when it has transparency, else JPEG; raises `ImageRefused`."""
    # Pillow loads with the first image read, never at start-up (`nerve ask` loads no file reader).
    from PIL import Image, ImageOps, UnidentifiedImageError

    label = "WebP" if sort == "webp" else _FORMATS[sort]
    try:
        image = Image.open(io.BytesIO(data), formats=[_FORMATS[sort]])
    except Image.DecompressionBombError as error:
        raise _bomb(max_pixels, declared=_declared(str(error))) from None
    except (UnidentifiedImageError, OSError, ValueError, SyntaxError):
        raise ImageRefused(f"it is not a {label} image nerve can read (damaged or incomplete?)") from None
    with image:
        width, height = image.size
        if width * height > max_pixels:
            raise _bomb(max_pixels, declared=f"{width:,}×{height:,} pixels")
        try:
            # A JPEG can decode at 1/2, 1/4 or 1/8 scale: a 48-megapixel photo never fills memory.
            image.draft("RGB", (long_side, long_side))
            # GIF and WebP: only the first frame is decoded (no seek to the others).
            image.load()
        except Image.DecompressionBombError as error:
            raise _bomb(max_pixels, declared=_declared(str(error))) from None
        except (OSError, ValueError, SyntaxError, EOFError):
            raise ImageRefused(f"it is a damaged or incomplete {label} image") from None
        try:
            upright = ImageOps.exif_transpose(image)
        except Exception:  # a malformed EXIF block costs the rotation, not the image
            upright = image.copy()
    alpha = upright.mode in {"RGBA", "LA", "PA"} or "transparency" in upright.info
    pixels = upright.convert("RGBA" if alpha else "RGB")
    pixels.thumbnail((long_side, long_side), Image.Resampling.LANCZOS)
    # The pixels alone: EXIF, ICC, XMP and text chunks travel in `info`, and encoders read it.
    clean = Image.new(pixels.mode, pixels.size)
    clean.paste(pixels)
    out = io.BytesIO()
    if alpha:
        clean.save(out, format="PNG", optimize=True)
    else:
        clean.save(out, format="JPEG", quality=_JPEG_QUALITY, optimize=True)
    summary = f"{width}×{height} {label} image"
    if sort == "gif":
        summary += " (first frame)"
    if clean.size != (width, height):
        summary += f", scaled to {clean.width}×{clean.height}"
    return Scaled(data=out.getvalue(), mime="image/png" if alpha else "image/jpeg", summary=summary)


def _bomb(max_pixels: int, *, declared: str = "more pixels than nerve reads") -> ImageRefused:
    """Too many pixels: a decompression bomb, or a real photo or scan too big to decode safely."""
    return ImageRefused(f"it has {declared}; nerve reads images of up to {max_pixels:,} pixels")


def _declared(message: str) -> str:
    """'10,000,000,000 pixels' from Pillow's own bomb error, which it raises as it opens the file."""
    found = re.search(r"\((\d+) pixels\)", message)
    return f"{int(found.group(1)):,} pixels" if found else "more pixels than nerve reads"
