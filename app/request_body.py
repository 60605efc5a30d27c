"""A request's body read up to a cap: a client that sends a gigabyte is refused (HTTP 413) as soon as
the cap is passed, before the server holds it all. The cap fits the largest document memory reads
(a 256 MiB PDF, base64 in JSON: ~342 MiB) and pictures sent inline; an import of a collection's
export (vectors as base64) may be larger."""

from __future__ import annotations

import json

from starlette.requests import Request

from py_engine.api.request import RequestError
from py_engine.memory.limits import DEFAULT_LIMITS, MIB, size_text

JSON_CAP = DEFAULT_LIMITS.max_pdf_bytes * 4 // 3 + 16 * MIB
IMPORT_CAP = 4096 * MIB


async def read_capped(request: Request, cap: int) -> bytes:
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > cap:
        raise RequestError(too_large(int(declared), cap), None, 413)
    parts, size = [], 0
    async for part in request.stream():
        size += len(part)
        if size > cap:  # a chunked upload declares no length
            raise RequestError(too_large(size, cap, so_far=True), None, 413)
        parts.append(part)
    return b"".join(parts)


def too_large(size: int, cap: int, so_far: bool = False) -> str:
    sent = f"over {size_text(size)} so far" if so_far else size_text(size)
    return f"the request body is {sent}; this server reads at most {size_text(cap)}"


async def json_body(request: Request):
    raw = await read_capped(request, JSON_CAP)
    try:
        return json.loads(raw)
    except ValueError:
        raise RequestError("the request body is not JSON") from None
