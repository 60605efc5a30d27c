"""A picture file read into a Picture (RGBA8 bytes and its size) where Pillow is installed (the
desktop's CLI and server; the browser decodes pictures itself, with createImageBitmap). Model files
are not the only untrusted input: a picture that is not one, is cut short, moves, or is larger than
MAX_PIXELS gets one clear error naming the file."""

from __future__ import annotations

import base64
import hashlib
import io

from ..errors import WispError
from .input import Picture

MAX_PIXELS = 40_000_000  # a 40-megapixel photo; its RGBA8 bytes (160 MB) are staged on the GPU once
MAX_SIDE = 16_384


def read_picture(path) -> Picture:
    """The picture in the file at `path`."""
    return _decode(path, path)


def picture_from_url(url: str) -> Picture:
    """The picture in a data: URL (base64). An http(s) URL is the host's to fetch first (the desktop
    server does: app/pictures.py), as the engine does no I/O of its own here."""
    head, comma, data = url.partition(",")
    label = (url[:40] + "...") if len(url) > 40 else url
    if not head.startswith("data:") or not comma:
        raise WispError(
            f"{label}: only data: URLs of pictures are read here (base64; the desktop server fetches http(s))"
        )
    if not head.endswith(";base64"):
        raise WispError(f"{label}: a picture's data: URL must be base64")
    try:
        raw = base64.b64decode(data, validate=True)
    except ValueError:
        raise WispError(f"{label}: the data: URL's base64 is malformed") from None
    return _decode(io.BytesIO(raw), head)


def _decode(stream, label) -> Picture:
    try:
        from PIL import Image
    except ImportError:
        raise WispError(f"{label}: reading pictures needs Pillow (pip install pillow)") from None
    try:
        with Image.open(stream) as image:
            if getattr(image, "n_frames", 1) > 1:
                raise WispError(f"{label}: an animated picture ({image.n_frames} frames); give one frame")
            width, height = image.size
            if width > MAX_SIDE or height > MAX_SIDE or width * height > MAX_PIXELS:
                raise WispError(
                    f"{label}: {width} x {height} pixels is larger than this engine reads "
                    f"({MAX_SIDE} a side, {MAX_PIXELS // 1_000_000} megapixels)"
                )
            rgba = image.convert("RGBA").tobytes()
    except WispError:
        raise
    except (OSError, ValueError, SyntaxError, Image.DecompressionBombError) as exc:  # what Pillow raises on bad files
        raise WispError(f"{label}: not a picture Pillow can read ({exc})") from None
    return Picture(rgba, width, height, hashlib.blake2b(rgba, digest_size=16).hexdigest())
