"""The page's memory (issue 31): collections of the user's documents kept in OPFS (memory/log_store.py
through memory_files.py), embedded by an embedding model the worker holds beside the chat model, and
searched on the GPU (memory/vector_index.py). Here: the worker's memory_* messages (protocol.py) and
the recall of a chat request's `memory` (api/memory.py builds the prompt and the citations, as for the
desktop's /v1).

The embedder loads on first use, its weights through the weight store like any model's, onto the chat
model's device, and stays loaded until that device goes (an unload, another device, a loss). The
records stay on the host between messages (a store is read once, and again only when another tab
changed it); a collection's GPU index is built from them whenever the embedder is (again) there.
Listing and deleting need no GPU, so they never wait for one; adding and recalling take the worker's
one GPU request at a time. A document's bytes come as the page's transferred ArrayBuffer: input
data, read here by read_document (a bad one is its DocumentError, and the store is left as it was)."""

from __future__ import annotations

import asyncio
from dataclasses import asdict, dataclass, field

from ..api.memory import collection_name, document_json, parse_memory
from ..api.request_error import RequestError
from ..errors import WispError
from ..memory.log_store import LogStore
from ..memory.sqlite_store import MemoryStoreError
from .memory_files import opened, room, where


@dataclass
class Shelf:
    """One collection: its store (the records, on the host) and, once built, its Collection (the index)."""

    store: LogStore
    collection: object = None


@dataclass
class PageMemory:
    """What the worker holds for memory (WorkerState.memory)."""

    embedder: object = None  # the embedding model's Embedder, on the worker's device
    embedder_id: str | None = None
    kernels: object = None  # the vector index's KernelCache on that device
    shelves: dict = field(default_factory=dict)  # collection name -> Shelf
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)  # one message in the files at a time

    def drop_gpu(self) -> None:
        """The device went: the embedder and every index with it (the records stay)."""
        self.embedder = self.embedder_id = self.kernels = None
        for shelf in self.shelves.values():
            shelf.collection = None

    def shelf(self, name: str, files, model: str, dimensions: int | None = None) -> Shelf:
        shelf = self.shelves.get(name)
        if shelf is None or shelf.store.model != model:
            shelf = Shelf(LogStore(where(name), files, model, dimensions))
            self.shelves[name] = shelf
        elif shelf.store.refresh(files):
            shelf.collection = None  # another tab changed it: the index is built again
        if dimensions is not None and shelf.store.dimensions not in (None, dimensions):
            raise MemoryStoreError(
                where(name), f"holds vectors of {shelf.store.dimensions} values, not {model!r}'s {dimensions}"
            )
        return shelf


async def memory_message(state, message: dict) -> None:
    """memory_list / memory_delete / memory_export (the store alone) and memory_add / memory_import /
    memory_recall (the embedder too, where they need it), each answered by one `memory` event (an
    export's lines come before it: memory_transfer.py)."""
    kind, request = message["type"], message["id"]
    state.memory = state.memory or PageMemory()
    name = collection_name(message["collection"], "collection")
    model = message["embedder"]
    if kind in ("memory_list", "memory_delete", "memory_export"):
        from .memory_transfer import export

        async with state.memory.lock, opened(name) as files:
            shelf = state.memory.shelf(name, files, model["id"])
            done = {"deleted": delete(shelf, str(message["document"]))} if kind == "memory_delete" else {}
            if kind == "memory_export":
                done = {"exported": export(state, request, shelf)}
            state.emit("memory", request, **await report(name, shelf), **done)
        return
    from .recovery import settled

    await settled(state)  # after a device loss: on the reloaded device
    with state.busy(request):
        if kind in ("memory_add", "memory_import"):
            await (add if kind == "memory_add" else import_lines)(state, message, name, model)
            return
        query = message["query"]
        if not query.strip():
            raise RequestError("'query' must be a non-empty string", "query")
        asked = {key: message[key] for key in ("k", "token_budget", "filter") if key in message}
        hits = await recall(state, parse_memory({"collection": name, **asked}), query, model, request, message)
        state.emit("memory", request, collection=name, hits=[asdict(hit) for hit in hits])


def delete(shelf: Shelf, document_id: str) -> str:
    if shelf.collection is not None:
        shelf.collection.delete(document_id)  # the index too
    elif any(d.id == document_id for d in shelf.store.documents()):
        shelf.store.delete(document_id)
    else:
        raise WispError(f"no document {document_id!r} in this memory")
    return document_id


async def add(state, message: dict, name: str, model: dict) -> None:
    """A document read, cut into passages, embedded and stored: all of it, or nothing."""
    from ..memory.documents import read_document

    request, source = message["id"], message["name"]
    if not source or len(source) > 256:
        raise RequestError("'name' must be the document's name (1-256 characters)", "name")

    def progress(phase: str, done: int = 0, total: int = 0) -> None:
        state.emit("memory_progress", request, file=source, phase=phase, done=done, total=total)

    progress("read")
    if isinstance(message.get("text"), str):
        text, places = message["text"], None
    elif message.get("data") is not None:
        document = read_document(source, bytes(message["data"]), message.get("media_type"))
        text, places = document.text, document.place_at
    else:
        raise RequestError("a document needs 'text' or 'data' (its file's bytes)", "data")
    metadata = message.get("metadata") or {}
    embedder = await ensure_embedder(state, model, message, request)
    async with state.memory.lock, opened(name) as files:
        shelf = state.memory.shelf(name, files, model["id"], embedder.dimensions)
        collection = await indexed(state, shelf)
        shelf.store.room = (await room())[2]  # an add that would not fit is refused before it writes
        progress("embed")  # cutting it into passages: their count comes with the first batch embedded
        added = await collection.add(
            text, metadata, source=source, places=places, progress=lambda done, total: progress("embed", done, total)
        )
        state.emit("memory", request, **await report(name, shelf), added=document_json(added))


async def import_lines(state, message: dict, name: str, model: dict) -> None:
    """One batch of an export's lines (memory_transfer.py): the embedder only for another model's."""
    from .memory_transfer import ImportBatch

    batch = ImportBatch(message, model["id"])
    embedder = None if batch.same else await ensure_embedder(state, model, message, batch.request)
    async with state.memory.lock, opened(name) as files:
        shelf = state.memory.shelf(name, files, model["id"], embedder.dimensions if embedder else batch.dimensions)
        # where the index is built (or must be, to embed), it takes the documents too
        collection = await indexed(state, shelf) if embedder else shelf.collection
        shelf.store.room = (await room())[2]  # a batch that would not fit is refused before it writes
        imported, skipped = await batch.store(state, shelf, collection, embedder)
        state.emit(
            "memory", batch.request, collection=name, imported=imported, skipped=skipped, bytes=shelf.store.bytes
        )


async def recall(state, options, query: str, model: dict | None, request, message: dict):
    """The passages for `query` (api/memory.py's MemoryOptions say where and how many). message: the
    request's, for the device options where no device is open yet."""
    if model is None:
        raise RequestError("'memory' needs the page's embedding model: send the request through static/openai.js")
    state.memory = state.memory or PageMemory()
    embedder = await ensure_embedder(state, model, message, request)
    async with state.memory.lock, opened(options.collection) as files:
        shelf = state.memory.shelf(options.collection, files, model["id"], embedder.dimensions)
        collection = await indexed(state, shelf)
        return await collection.recall(query, options.k, options.token_budget, options.filter)


async def indexed(state, shelf: Shelf):
    """The shelf's Collection, its index built on the device from the records when it is not there."""
    memory = state.memory
    if shelf.collection is None or shelf.collection.embedder is not memory.embedder:
        from ..memory.collection import Collection
        from ..memory.vector_index import VectorIndex

        index = VectorIndex(state.device, memory.kernels, memory.embedder.dimensions)
        shelf.collection = await Collection.open(memory.embedder, shelf.store, index)
    return shelf.collection


async def ensure_embedder(state, model: dict, message: dict, request):
    """The embedding model `model` (a load message's model) on the worker's device, loaded on first use.
    No device yet (no chat model loaded): one opened as a load with the message's options would."""
    memory = state.memory
    if memory.embedder is not None and memory.embedder_id == model["id"] and state.device is not None:
        return memory.embedder
    from .. import session
    from ..runtime.kernels import KernelCache
    from .files import RemoteModel

    memory.drop_gpu()  # another embedder's vectors would not compare
    device = state.device or await open_device_for(state, message.get("options") or {})
    label = model.get("name", model["id"])
    state.emit("memory_progress", request, file=label, phase="embedder", done=0, total=0)
    await begin_store_for(model, request)
    source = await RemoteModel.open(model["id"], label, model["kind"], model["base"], dict(model["files"]))
    if not session.is_embedding_model(source):
        raise WispError(
            f"{label} is not an embedding model (an encoder such as all-MiniLM-L6-v2): it cannot embed documents"
        )
    try:
        loaded = await session.load(source, device, model_id=model["id"], embedders=True)
    except BaseException:
        await source.settle()  # its upload stops with the load
        raise
    memory.embedder, memory.embedder_id, memory.kernels = loaded.embedder, model["id"], KernelCache(device)
    state.emit("memory_progress", request, file=label, phase="embedder", done=1, total=1)
    return memory.embedder


async def open_device_for(state, options: dict):
    """The worker's device for a model loaded beside the chat's (the embedder, speech.py's models)
    when no load has opened one: as a load message with these options would open it."""
    from ..gpu.submit_strategy import submit_strategy
    from .state import device_for
    from .webkit import load_policy

    platform = options.get("platform") or {}
    policy = load_policy(platform, options)
    submit = submit_strategy(platform, options.get("group"), options.get("probe"))
    device, _ = await device_for(state, policy["allow_f16"], submit["group"])
    return device


async def begin_store_for(model: dict, request) -> None:
    """The weight store's begin for the files of a model loaded beside the chat's (the embedder,
    speech.py's models), as worker.begin_store for a load."""
    import wisp_store
    from js import Object
    from pyodide.ffi import JsException, to_js

    from .files import store_error

    try:
        await wisp_store.begin(to_js(model, dict_converter=Object.fromEntries), request)
    except JsException as exc:
        raise store_error(exc) from None


async def report(name: str, shelf: Shelf) -> dict:
    """The `memory` event's view of a collection: its documents, its bytes, the origin's usage and quota."""
    usage, quota, _ = await room()
    return {
        "collection": name,
        "documents": [document_json(d) for d in shelf.store.documents()],
        "bytes": shelf.store.bytes,
        "usage": usage,
        "quota": quota,
        "damaged": list(shelf.store.damaged),
    }
