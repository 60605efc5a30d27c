"""A memory collection's two files in OPFS (worker/memory_files.js, the JS module `wisp_memory_files`)
as memory/log_store.py's file handles, opened for one memory message at a time. Their errors come out
typed: a full disk a StorageQuotaError, anything else a MemoryStoreError naming the collection."""

from __future__ import annotations

import contextlib

from ..errors import StorageQuotaError
from ..memory.sqlite_store import MemoryStoreError


def where(collection: str) -> str:
    """How errors name a collection's files."""
    return f"the documents of {collection!r} (this browser's wisp-memory/{collection})"


def typed(exc, collection: str) -> Exception:
    message = getattr(exc, "message", None) or str(exc)
    if getattr(exc, "name", "") == "QuotaExceededError":
        return StorageQuotaError(f"Storage is full: {where(collection)} could not grow; nothing was stored")
    return MemoryStoreError(where(collection), message)


class OpfsFile:
    """One file's synchronous access handle (memory_files.js wraps it): what LogStore writes through."""

    def __init__(self, handle, collection: str):
        self.handle, self.collection = handle, collection

    def _call(self, name: str, *args):
        from pyodide.ffi import JsException

        try:
            return getattr(self.handle, name)(*args)
        except JsException as exc:
            raise typed(exc, self.collection) from None

    def size(self) -> int:
        return int(self._call("size"))

    def read(self, at: int, n: int) -> bytes:
        return self._call("read", at, n).to_bytes()

    def write(self, at: int, data: bytes) -> None:
        from pyodide.ffi import to_js

        self._call("write", at, to_js(memoryview(data)))

    def truncate(self, n: int) -> None:
        self._call("truncate", n)

    def flush(self) -> None:
        self._call("flush")


@contextlib.asynccontextmanager
async def opened(collection: str):
    """The collection's [a, b] files, closed after (a reload or another tab may then open them)."""
    import wisp_memory_files
    from pyodide.ffi import JsException

    try:
        handles = await wisp_memory_files.open(collection)
    except JsException as exc:
        raise typed(exc, collection) from None
    try:
        yield [OpfsFile(handle, collection) for handle in handles]
    finally:
        for handle in handles:
            handle.close()


async def room() -> tuple[int, int, int]:
    """(usage, quota, the bytes left) of the origin's storage."""
    import wisp_memory_files

    found = (await wisp_memory_files.estimate()).to_py()
    usage, quota = int(found["usage"]), int(found["quota"])
    return usage, quota, max(0, quota - usage)
