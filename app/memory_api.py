"""Wisp's memory over /v1 (an extension, not OpenAI's API): collections of the user's documents, each
a SQLite file in the memory folder, embedded by the server's memory model (--memory-model: an
embedding model it serves; default the first it lists), searched on the GPU.

    GET    /v1/memory/{collection}/documents          the documents: id, source, metadata, passages
    POST   /v1/memory/{collection}/documents          {"name", "text" | "data" (base64), "media_type"?, "metadata"?}
    DELETE /v1/memory/{collection}/documents/{id}
    POST   /v1/memory/{collection}/recall             {"query", "k"?, "token_budget"?, "filter"?}
    GET    /v1/memory/{collection}/export             JSON lines (py_engine/memory/transfer.py)
    POST   /v1/memory/{collection}/import             an export's JSON lines as the body

and a chat request's `memory` field (py_engine/api/memory.py). Requests share the models' lock: one
GPU, one request at a time."""

from __future__ import annotations

import base64
import binascii
from dataclasses import asdict
from pathlib import Path

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from py_engine.api.memory import MemoryOptions, collection_name, document_json, parse_memory
from py_engine.api.request import RequestError
from py_engine.memory.collection import Collection
from py_engine.memory.sqlite_store import SQLiteStore
from py_engine.memory.transfer import export_lines, import_lines
from py_engine.memory.vector_index import VectorIndex

from .request_body import IMPORT_CAP, read_capped

DEFAULT_FOLDER = Path.home() / ".cache" / "wisp" / "memory"


class Memories:
    """The memory folder's collections, opened on first use with the memory model."""

    def __init__(self, models, folder: Path | None = None, model_id: str | None = None):
        self.models, self.folder, self.model_id = models, Path(folder or DEFAULT_FOLDER), model_id
        self._open: dict[str, Collection] = {}
        self._kernels = None

    def _memory_model(self) -> str:
        if self.model_id:
            return self.model_id
        for served in self.models.registry.models():
            if served.task == "embedding":
                return served.id
        raise RequestError("no embedding model is served for memory (python -m app --memory-model ID)", "memory", 404)

    async def collection(self, name: str) -> Collection:
        """The collection (created empty on first use); call with the models' lock held."""
        embedder = await self.models.embedding_model(self._memory_model())
        memory = self._open.get(name)
        if memory is None:
            from py_engine.runtime.kernels import KernelCache

            device = self.models.device
            if self._kernels is None:
                self._kernels = KernelCache(device)
            self.folder.mkdir(parents=True, exist_ok=True)
            store = SQLiteStore(self.folder / f"{name}.sqlite", embedder.model_id, embedder.dimensions)
            index = VectorIndex(device, self._kernels, embedder.dimensions)
            memory = self._open[name] = await Collection.open(embedder, store, index)
        memory.embedder = embedder  # the same model, perhaps loaded again by another request
        return memory

    async def recall(self, options: MemoryOptions, query: str):
        memory = await self.collection(options.collection)
        return await memory.recall(query, options.k, options.token_budget, options.filter)


def document_text(body: dict) -> tuple[str, str, object]:
    """(source name, text, places) of an added document: its text, or its file's bytes read by kind
    (places(offset): its page or headings there, for citations; None for a text)."""
    name = body.get("name")
    if not isinstance(name, str) or not name or len(name) > 256:
        raise RequestError("'name' must be the document's name (1-256 characters)", "name")
    if isinstance(body.get("text"), str):
        return name, body["text"], None
    if not isinstance(body.get("data"), str):
        raise RequestError("a document needs 'text' or 'data' (its file's bytes, base64)", "data")
    try:
        data = base64.b64decode(body["data"], validate=True)
    except binascii.Error:
        raise RequestError("'data' is not base64", "data") from None
    from py_engine.memory.documents import read_document

    document = read_document(name, data, body.get("media_type"))
    return name, document.text, document.place_at


def memory_routes(models, memories: Memories, error_response, read_body) -> list[Route]:
    async def locked(request: Request, work) -> Response:
        """work(collection, body) under the models' lock; every failure OpenAI's error object."""
        try:
            name = collection_name(request.path_params["collection"], "collection")
            body = await read_body(request) if request.method == "POST" else None
            if body is not None and not isinstance(body, dict):
                raise RequestError("the request body must be a JSON object")
            async with models.lock:
                return JSONResponse(await work(await memories.collection(name), body))
        except Exception as exc:  # noqa: BLE001
            return error_response(exc)

    async def list_documents(request: Request) -> Response:
        async def work(memory, _):
            return {"object": "list", "data": [document_json(d) for d in memory.documents]}

        return await locked(request, work)

    async def add_document(request: Request) -> Response:
        async def work(memory, body):
            source, text, places = document_text(body)
            metadata = body.get("metadata") or {}
            if not isinstance(metadata, dict):
                raise RequestError("'metadata' must be an object", "metadata")
            return document_json(await memory.add(text, metadata, source=source, places=places))

        return await locked(request, work)

    async def delete_document(request: Request) -> Response:
        async def work(memory, _):
            memory.delete(request.path_params["document"])
            return {"id": request.path_params["document"], "deleted": True}

        return await locked(request, work)

    async def recall(request: Request) -> Response:
        async def work(memory, body):
            query = body.get("query")
            if not isinstance(query, str) or not query.strip():
                raise RequestError("'query' must be a non-empty string", "query")
            asked = {k: v for k, v in body.items() if k != "query"}
            options = parse_memory({"collection": request.path_params["collection"], **asked})
            hits = await memory.recall(query, options.k, options.token_budget, options.filter)
            return {"object": "list", "data": [asdict(hit) for hit in hits]}

        return await locked(request, work)

    async def export(request: Request) -> Response:
        try:
            name = collection_name(request.path_params["collection"], "collection")
            async with models.lock:
                memory = await memories.collection(name)
                lines = export_lines(memory, memory.embedder.model_id)
            return Response(lines, media_type="application/x-ndjson")
        except Exception as exc:  # noqa: BLE001
            return error_response(exc)

    async def import_(request: Request) -> Response:
        try:
            name = collection_name(request.path_params["collection"], "collection")
            text = (await read_capped(request, IMPORT_CAP)).decode("utf-8", errors="strict")
            async with models.lock:
                memory = await memories.collection(name)
                added = await import_lines(memory, text, memory.embedder.model_id)
            return JSONResponse({"imported": added})
        except UnicodeDecodeError:
            return error_response(RequestError("the body is not UTF-8 text"))
        except Exception as exc:  # noqa: BLE001
            return error_response(exc)

    base = "/v1/memory/{collection}"
    return [
        Route(base + "/documents", list_documents, methods=["GET"]),
        Route(base + "/documents", add_document, methods=["POST"]),
        Route(base + "/documents/{document}", delete_document, methods=["DELETE"]),
        Route(base + "/recall", recall, methods=["POST"]),
        Route(base + "/export", export, methods=["GET"]),
        Route(base + "/import", import_, methods=["POST"]),
    ]
