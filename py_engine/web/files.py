"""The browser's model source: a model served by our origin (app/: /models/<id>/<file>).

Small files (config.json, tokenizer files) are fetched whole into the worker's in-memory file
system, so the path-based readers work unchanged; header prefixes (GGUF metadata, safetensors
JSON) are fetched by Range and kept in memory for parsing. Both go through the weight store
(worker/store.js, the JS module `wisp_store`): stored files are read from it, so a reload works
offline. Weight bytes are only *planned* here:
the placements go to JavaScript (BrowserDevice.upload_plan), which streams them from
fetch into GPU buffers — they never enter the Python heap or wasm memory. The stream starts as soon
as the loader stops placing (its first await: the kernels compiling, asynchronously in the
browser), not at `flush`, which only waits for it: the download overlaps the compile.
"""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

from ..embedding.settings import dense_module_files
from ..errors import ModelFileError, StorageQuotaError, WispError
from ..formats.hf_dir import SMALL_FILES
from ..formats.source import ModelSource

FIRST_PREFIX = 4 << 20  # GGUF headers: SmolLM2 1.8 MB, Qwen2.5 (152k tokens) 6 MB; doubled as needed
# A model the user brought (another origin, or local files) may be refused by the footprint check
# after its header: its first read is small, so what is refused costs little more than its header.
BROUGHT_FIRST_PREFIX = 256 << 10
MAX_PREFIX = 256 << 20
# Ids and file names come from the page, and a brought model's from an untrusted index.json or
# folder: a name is relative path segments of these characters, none "." or "..", so base + name
# stays under base and the in-memory directory below stays under its model's.
_SEGMENT = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._-]{0,127}")


class PrefixTooShort(Exception):
    """A header read went past the bytes fetched so far."""


async def fetch_bytes(url: str, start: int | None = None, length: int | None = None) -> bytes:
    import wisp_store  # worker/store.js, registered by worker/worker.js
    from pyodide.ffi import JsException

    try:
        data = await wisp_store.read(url, start, length)
    except JsException as exc:
        raise store_error(exc, url) from None
    return data.to_bytes()


def store_error(exc, url: str | None = None) -> WispError:
    """A weight store (worker/store.js) exception as a typed error: its QuotaError a
    StorageQuotaError; anything else a ModelFileError naming the file (url), or about the store."""
    message = getattr(exc, "message", None) or str(exc)
    if getattr(exc, "name", "") == "QuotaError":
        return StorageQuotaError(message)
    return ModelFileError(url, message) if url else WispError(f"the weight store: {message}")


def confine(model_id, files: dict) -> None:
    """A WispError unless the id is one safe segment and every file name safe relative segments."""
    if not isinstance(model_id, str) or not _SEGMENT.fullmatch(model_id):
        raise WispError(f"model id {str(model_id)[:80]!r} is not a plain name (letters, digits, . _ -)")
    for rel in files:
        parts = rel.split("/") if isinstance(rel, str) else [None]
        if len(parts) > 4 or not all(isinstance(p, str) and _SEGMENT.fullmatch(p) for p in parts):
            raise WispError(f"{model_id}: the file name {str(rel)[:80]!r} is not a plain relative name")


class RemoteModel(ModelSource):
    def __init__(self, model_id: str, name: str, kind: str, base: str, files: dict):
        self.id, self.label, self.kind, self.base = model_id, name, kind, base
        self.sizes = dict(files)  # relative path → bytes
        self.prefixes: dict[str, bytes] = {}
        self.ranges: dict[str, list] = {}  # rel -> [(start, bytes)] fetched by keep()
        self.dir = Path("/tmp/wisp-models") / model_id
        self.plan: list[tuple] = []
        self.early: asyncio.Future | None = None  # the upload place() started
        self.progress = None  # flush's progress callback, once flush has it
        self.landed = 0  # bytes the early upload landed before that
        self.on_flushed = None  # called once flush is done: every weight placed, the store's pass over

    @classmethod
    async def open(cls, model_id: str, name: str, kind: str, base: str, files: dict) -> RemoteModel:
        confine(model_id, files)
        source = cls(model_id, name, kind, base.rstrip("/") + "/", files)
        source.dir.mkdir(parents=True, exist_ok=True)
        if kind == "gguf":
            await source._fetch_gguf_header(source.files()[0])
        else:
            for rel in SMALL_FILES:
                if rel in source.sizes:  # some are in a folder (an embedding model's 1_Pooling/config.json)
                    await source._fetch_small(rel)
            if "modules.json" in source.sizes:  # its Dense modules' configs (EmbeddingGemma's 2_Dense, 3_Dense)
                for rel in dense_module_files(source.dir / "modules.json"):
                    if rel.endswith("config.json") and rel in source.sizes:
                        await source._fetch_small(rel)
            for rel in source.files():
                if rel.endswith(".safetensors"):
                    head = await fetch_bytes(source.url(rel), 0, 8)
                    header_len = int.from_bytes(head[:8], "little")
                    if header_len > MAX_PREFIX:
                        raise ModelFileError(source.url(rel), f"header length {header_len} is not plausible")
                    source.prefixes[rel] = head + await fetch_bytes(source.url(rel), 8, header_len)
        return source

    async def _fetch_small(self, rel: str) -> None:
        (self.dir / rel).parent.mkdir(parents=True, exist_ok=True)
        (self.dir / rel).write_bytes(await fetch_bytes(self.url(rel)))

    async def _fetch_gguf_header(self, rel: str) -> None:
        """Fetch a prefix that holds the whole header: parse, and on running out fetch as much again
        (only the bytes not yet fetched)."""
        from ..formats.gguf import parse_gguf

        first = FIRST_PREFIX if self.base.startswith("/") else BROUGHT_FIRST_PREFIX  # our origin's: /models/
        want = min(first, self.sizes[rel])
        self.prefixes[rel] = b""
        while True:
            have = len(self.prefixes[rel])
            self.prefixes[rel] += await fetch_bytes(self.url(rel), have, want - have)
            if len(self.prefixes[rel]) != want:
                raise ModelFileError(
                    self.url(rel), f"asked for bytes {have}-{want - 1}, got {len(self.prefixes[rel]) - have}"
                )
            try:
                parse_gguf(lambda start, length: self.read(rel, start, length), self.sizes[rel], self.locate(rel))
                return
            except PrefixTooShort:
                if want >= min(MAX_PREFIX, self.sizes[rel]):
                    raise ModelFileError(self.url(rel), f"GGUF header longer than {MAX_PREFIX >> 20} MiB") from None
                want = min(2 * want, MAX_PREFIX, self.sizes[rel])

    def url(self, rel: str) -> str:
        return self.base + rel

    def size(self, rel: str) -> int:
        if rel not in self.sizes:
            raise ModelFileError(self.url(rel), "file not served")
        return self.sizes[rel]

    async def keep(self, rel: str, start: int, length: int) -> None:
        """Fetch bytes [start, start + length) of `rel` for read(): a small tensor a loader reads on the
        host (Kani-TTS-2's voices and rotary scales, web/speech.py), not a weight bound for the GPU."""
        self.ranges.setdefault(rel, []).append((start, await fetch_bytes(self.url(rel), start, length)))

    def read(self, rel: str, start: int, length: int) -> bytes:
        for at, data in self.ranges.get(rel, ()):
            if at <= start and start + length <= at + len(data):
                return data[start - at : start - at + length]
        prefix = self.prefixes.get(rel, b"")
        end = min(start + length, self.sizes.get(rel, 0))
        if end > len(prefix):
            raise PrefixTooShort(rel)
        return prefix[start:end]

    def locate(self, rel: str) -> str:
        return self.url(rel)

    def small_dir(self) -> Path:
        return self.dir

    def exists(self, rel: str) -> bool:
        return rel in self.sizes

    def files(self) -> list[str]:
        gguf = [rel for rel in self.sizes if rel.endswith(".gguf")]
        return gguf + sorted(rel for rel in self.sizes if rel not in gguf)

    def place(self, device, buffer, pieces) -> int:
        self.plan.extend((buffer, dst, location, start, length) for dst, location, start, length in pieces)
        if self.early is None:  # runs at the loader's first await, with every placement made before it
            self.early = asyncio.ensure_future(self._upload(device))
        return 0

    async def _upload(self, device) -> None:
        plan, self.plan = self.plan, []

        def report(nbytes):
            if self.progress is None:
                self.landed += nbytes
            else:
                self.progress(nbytes)

        await device.upload_plan(plan, report)

    async def flush(self, device, progress=None) -> None:
        self.progress, early, self.early = progress, self.early, None
        if progress is not None and self.landed:
            progress(self.landed)
        self.landed = 0
        if early is not None:
            await early
        plan, self.plan = self.plan, []  # placed after the upload started (none on the loaders' path)
        if plan:
            await device.upload_plan(plan, progress)
        self.progress = None
        if self.on_flushed is not None:
            self.on_flushed()

    async def settle(self) -> None:
        """A load that failed before `flush` (a compile error, a lost device) stops the upload place()
        started and waits for it: nothing of it goes on writing GPU buffers or the store after."""
        early, self.early = self.early, None
        if early is None:
            return
        import wisp_gpu  # worker/gpu.js

        wisp_gpu.cancelWeights()
        try:
            await early
        except Exception:  # cancelled, or failed on its own: the load's own error is the one to report
            pass
