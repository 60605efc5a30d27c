"""Serving files from disk: path checks, MIME types, and the conditional/Range logic around
Starlette's FileResponse (which answers single ranges with 206 + Content-Range, unsatisfiable
ones with 416, and sets ETag / Last-Modified / Accept-Ranges)."""

from __future__ import annotations

import mimetypes
import os
from email.utils import parsedate_to_datetime
from pathlib import Path

from starlette.datastructures import Headers
from starlette.requests import Request
from starlette.responses import FileResponse, PlainTextResponse, Response

# Explicit types for what we serve: the platform's mimetypes table varies (and browsers refuse
# to stream-compile .wasm or import .mjs served with the wrong type).
MIME_TYPES = {
    ".wasm": "application/wasm",
    ".mjs": "text/javascript",
    ".js": "text/javascript",
    ".json": "application/json",
    ".map": "application/json",
    ".webmanifest": "application/manifest+json",
    ".whl": "application/zip",
    ".zip": "application/zip",
    ".gguf": "application/octet-stream",
    ".safetensors": "application/octet-stream",
    ".html": "text/html",
    ".css": "text/css",
    ".svg": "image/svg+xml",
    ".png": "image/png",
    ".ico": "image/x-icon",
    ".jinja": "text/plain",
    ".wgsl": "text/plain",
    ".txt": "text/plain",
}


def media_type(path: Path) -> str:
    suffix = path.suffix.lower()
    return MIME_TYPES.get(suffix) or mimetypes.guess_type(path.name)[0] or "application/octet-stream"


def safe_path(root: Path, rel: str, within: Path | None = None) -> Path | None:
    """The regular file `rel` names under `root`, or None (within: the folder its real path must
    be in, default root).

    `rel` is the already percent-decoded URL path, so "%2e%2e" arrives here as "..". Refused:
    empty, absolute or backslashed paths, NUL, "." / ".." / hidden segments (also keeps .git and
    editor droppings private), and anything whose real path (symlinks followed) leaves `root`.
    """
    if not rel or "\\" in rel or "\0" in rel:
        return None
    if any(part in ("", ".", "..") or part.startswith(".") for part in rel.split("/")):
        return None  # a leading "/" (absolute path) gives an empty first part
    try:
        base = root.resolve(strict=True)
        path = (base / rel).resolve(strict=True)
        fence = within.resolve(strict=True) if within else base
    except (OSError, RuntimeError):  # missing, or a symlink loop
        return None
    if not path.is_relative_to(fence) or not path.is_file():
        return None
    return path


def not_found() -> Response:
    return PlainTextResponse("Not Found", status_code=404)


def file_response(request: Request, path: Path) -> Response:
    """GET/HEAD of one file: 304 when If-None-Match (or If-Modified-Since) says the client has it,
    else the FileResponse, which handles Range and If-Range itself."""
    try:
        stat = os.stat(path)
    except OSError:
        return not_found()
    # no-cache: browsers revalidate every use (a cheap 304), so a rebuilt wheel is never stale.
    headers = {"Cache-Control": "no-cache", "X-Content-Type-Options": "nosniff"}
    response = FileResponse(path, stat_result=stat, media_type=media_type(path), headers=headers)
    if _not_modified(response.headers, request.headers):
        keep = {k: response.headers[k] for k in ("etag", "last-modified", "cache-control")}
        return Response(status_code=304, headers=keep)
    return response


def _not_modified(response_headers: Headers, request_headers: Headers) -> bool:
    """RFC 9110 §13.1: If-None-Match wins over If-Modified-Since when both are present."""
    if_none_match = request_headers.get("if-none-match")
    if if_none_match is not None:
        if if_none_match.strip() == "*":
            return True
        tags = [tag.strip().removeprefix("W/") for tag in if_none_match.split(",")]
        return response_headers["etag"] in tags
    since = request_headers.get("if-modified-since")
    if since is None:
        return False
    try:
        return parsedate_to_datetime(response_headers["last-modified"]) <= parsedate_to_datetime(since)
    except (TypeError, ValueError):
        return False
