"""A picture file read into a Picture (RGBA8 bytes and its size) where Pillow is installed (the
desktop's CLI and server; the browser decodes pictures itself, with createImageBitmap). Model files
are not the only untrusted input: a picture that is not one, is cut short, moves, or is larger than
MAX_PIXELS gets one clear error naming the file."""

from __future__ import annotations

from ..errors import WispError
from .input import Picture

MAX_PIXELS = 40_000_000  # a 40-megapixel photo; its RGBA8 bytes (160 MB) are staged on the GPU once
MAX_SIDE = 16_384


def read_picture(path) -> Picture:
    try:
        from PIL import Image
    except ImportError:
        raise WispError(f"{path}: reading picture files needs Pillow (pip install pillow)") from None
    try:
        with Image.open(path) as image:
            if getattr(image, "n_frames", 1) > 1:
                raise WispError(f"{path}: an animated picture ({image.n_frames} frames); give one frame")
            width, height = image.size
            if width > MAX_SIDE or height > MAX_SIDE or width * height > MAX_PIXELS:
                raise WispError(
                    f"{path}: {width} x {height} pixels is larger than this engine reads "
                    f"({MAX_SIDE} a side, {MAX_PIXELS // 1_000_000} megapixels)"
                )
            rgba = image.convert("RGBA").tobytes()
    except WispError:
        raise
    except (OSError, ValueError, SyntaxError, Image.DecompressionBombError) as exc:  # what Pillow raises on bad files
        raise WispError(f"{path}: not a picture Pillow can read ({exc})") from None
    return Picture(rgba, width, height)
