"""A chat request's pictures in the browser: its image_url URLs (data: URLs, the blob: URLs the
chat page makes of the user's files, http(s) where CORS lets the worker fetch) decoded by the worker's JavaScript (worker/pictures.js,
registered as `wisp_pictures`: the browser's decoders, then WebGPU copies out the straight-alpha
RGBA8 bytes; Pyodide has no Pillow) into vision/input.py Pictures for the OpenAI layer
(api/completions.py chat_chunks(pictures=...)). A Picture's bytes stay a JavaScript Uint8Array:
the picture's encode hands it to gpu.js writeBuffer as is, so a photo's pixels (160 MB at the 40
megapixels allowed) never enter Python's heap. The limits are the desktop reader's (vision/files.py)."""

from __future__ import annotations

import time

from ..api.request import RequestError
from ..gpu.device import GpuError
from ..vision.files import MAX_PIXELS, MAX_SIDE
from ..vision.input import Picture


async def read_pictures(urls: list[str]) -> tuple[list[Picture], float]:
    """(the pictures, in order; the seconds their decoding took). A URL that is not a picture (or
    is too large, or cannot be fetched) is the request's error, naming it; a lost device a GpuError."""
    import wisp_pictures
    from pyodide.ffi import JsException

    start, pictures = time.perf_counter(), []
    for url in urls:
        try:
            got = await wisp_pictures.decode(url, MAX_PIXELS, MAX_SIDE)
        except JsException as exc:
            message = getattr(exc, "message", None) or str(exc)
            if getattr(exc, "name", "") == "PictureError":
                raise RequestError(message, "messages") from None
            raise GpuError(message) from None  # gpu.js's: the device is gone (recovery.py reloads)
        pictures.append(Picture(got.rgba, int(got.width), int(got.height), str(got.key)))
    return pictures, time.perf_counter() - start
