"""Pictures that a chat request names by http(s) URL, fetched by the desktop server before the
answer (the engine's OpenAI layer reads data: URLs only: the page has no server to fetch for it,
and a browser fetches where CORS allows). Only http and https, at most MAX_BYTES a picture, a
timeout: the server listens on loopback unless told otherwise, but a URL is the client's input."""

from __future__ import annotations

import asyncio
import base64
import urllib.error
import urllib.request

from py_engine.api.request import RequestError

MAX_BYTES = 64 << 20
TIMEOUT_SECONDS = 30


def _fetch(url: str) -> str:
    """The picture at url as a data: URL."""
    try:
        with urllib.request.urlopen(url, timeout=TIMEOUT_SECONDS) as response:
            raw = response.read(MAX_BYTES + 1)
            kind = response.headers.get_content_type()
    except (urllib.error.URLError, OSError, ValueError) as exc:
        raise RequestError(f"{url}: the picture could not be fetched ({exc})", "messages") from None
    if len(raw) > MAX_BYTES:
        raise RequestError(f"{url}: a picture of more than {MAX_BYTES >> 20} MB", "messages")
    return f"data:{kind};base64,{base64.b64encode(raw).decode()}"


async def fetch_pictures(request) -> None:
    """A chat request's http(s) picture URLs replaced by the pictures' data: URLs, in a thread."""
    pictures = getattr(request, "pictures", None) or []
    for i, url in enumerate(pictures):
        if url.startswith(("http://", "https://")):
            pictures[i] = await asyncio.to_thread(_fetch, url)
