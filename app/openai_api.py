"""OpenAI's API on the desktop: /v1/chat/completions, /v1/completions, /v1/embeddings and
/v1/models, answered by the same engine the page runs, here on wgpu-py.

One request is served at a time, in the order they came (an asyncio.Lock is first come, first
served): one GPU, one model in memory per kind (a chat model and an embedding model). The device
is opened, and a model loaded, by the first request that needs it; a request naming another model
replaces it. Streams are server-sent events ending in `data: [DONE]`, as OpenAI's."""

from __future__ import annotations

import asyncio
import json
import logging

from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from py_engine.api import completions, embeddings
from py_engine.api.memory import citations, last_user_text, with_passages
from py_engine.api.request import RequestError, parse_chat, parse_completion, parse_embeddings
from py_engine.errors import WispError
from py_engine.runtime.memory import ModelTooLargeError

from .audio_api import audio_routes
from .memory_api import Memories, memory_routes
from .models import ModelRegistry
from .pictures import fetch_pictures
from .request_body import json_body

log = logging.getLogger("wisp.api")
CONTEXT = 4096  # tokens per chat model; --context would be the place to change it


class Models:
    """The device and the models loaded on it, one of each kind."""

    def __init__(self, registry: ModelRegistry, context: int = CONTEXT, precision: str = "fast"):
        """precision: a chat model's arithmetic (Engine.load's) where a request's `precision`
        does not say (python -m app --precision)."""
        self.registry, self.context, self.precision = registry, context, precision
        self.lock = asyncio.Lock()
        self.device = None
        self.chat = None  # the chat model's session.LoadedModel
        self.embedder = None
        self.speech = {}  # "transcriber" / "speaker" -> py_engine.speech's Transcriber / Speaker

    def _find(self, model_id: str):
        served = self.registry.find(model_id)
        if served is None:
            raise RequestError(
                f"no model '{model_id}' here (GET /v1/models lists them)", "model", 404, "model_not_found"
            )
        return served

    async def _device(self):
        if self.device is None:
            from py_engine.gpu import open_device

            self.device = await open_device()
        return self.device

    async def chat_model(self, model_id: str, precision: str | None = None):
        """The chat model's LoadedModel, loaded again where the request names another model or precision."""
        precision = precision or self.precision
        if self.chat is None or self.chat.id != model_id or self.chat.engine.precision != precision:
            from py_engine.session import load

            served, self.chat = self._find(model_id), None
            device = await self._device()
            self.chat = await load(
                served.path,
                device,
                model_id=model_id,
                context=self.context,
                precision=precision,
                mmproj=served.mmproj_path(),  # a text GGUF's vision projector, when it was given one
            )
        return self.chat

    async def embedding_model(self, model_id: str):
        if self.embedder is None or self.embedder.model_id != model_id:
            from py_engine.embedding import load_embedder

            served, self.embedder = self._find(model_id), None
            self.embedder = await load_embedder(served.path, await self._device(), model_id=model_id)
        return self.embedder

    async def speech_model(self, kind: str, model_id: str):
        """The speech-to-text ("transcriber") or text-to-speech ("speaker") model: py_engine.speech's
        load_transcriber / load_speaker, as embedding_model loads an embedder."""
        held = self.speech.get(kind)
        if held is None or held.model_id != model_id:
            import py_engine.speech as speech

            served, self.speech[kind] = self._find(model_id), None
            load = getattr(speech, f"load_{kind}")
            self.speech[kind] = await load(served.path, await self._device(), model_id=model_id)
        return self.speech[kind]


def error_response(exc: Exception) -> JSONResponse:
    if isinstance(exc, RequestError):
        return JSONResponse(exc.body(), status_code=exc.status)
    if isinstance(exc, ModelTooLargeError):
        return JSONResponse(RequestError(str(exc), "model", 507).body(), status_code=507)
    if isinstance(exc, WispError):  # a model that does not load, a template that fails: the request's
        return JSONResponse(RequestError(str(exc), None, 422).body(), status_code=422)
    log.exception("internal error")
    return JSONResponse(RequestError(f"{type(exc).__name__}: {exc}", None, 500).body(), status_code=500)


def openai_routes(
    registry: ModelRegistry, models: Models | None = None, memories: Memories | None = None
) -> list[Route]:
    models = models or Models(registry)
    memories = memories or Memories(models)

    async def list_models(request: Request) -> Response:
        data = [{"id": m.id, "object": "model", "created": 0, "owned_by": "wisp"} for m in registry.models()]
        return JSONResponse({"object": "list", "data": data})

    async def generation(request: Request, parse, chunks) -> Response:
        try:
            parsed = parse(await json_body(request))
            await fetch_pictures(parsed)
        except Exception as exc:  # noqa: BLE001 - every failure becomes OpenAI's error object
            return error_response(exc)
        await models.lock.acquire()
        streaming = False
        try:
            recalled = None  # Wisp's memory extension: passages of the user's documents before the conversation
            if getattr(parsed, "memory", None) is not None:
                hits = await memories.recall(parsed.memory, last_user_text(parsed.messages))
                parsed.messages = with_passages(parsed.messages, hits)
                recalled = citations(parsed.memory.collection, hits)
            stream = chunks(await models.chat_model(parsed.model, parsed.precision), parsed)
            if not parsed.stream:
                return JSONResponse(await completions.collect(stream) | ({"memory": recalled} if recalled else {}))
            first = await anext(stream)  # an error before the first chunk is still an HTTP status
            if recalled:
                first = {**first, "memory": recalled}
            streaming = True  # the stream releases the lock when it ends
            events = _events(first, stream, parsed.include_usage, models.lock)
            return StreamingResponse(events, media_type="text/event-stream")
        except Exception as exc:  # noqa: BLE001
            return error_response(exc)
        finally:
            if not streaming:
                models.lock.release()

    async def chat(request: Request) -> Response:
        return await generation(request, parse_chat, completions.chat_chunks)

    async def complete(request: Request) -> Response:
        return await generation(request, parse_completion, completions.completion_chunks)

    async def embed(request: Request) -> Response:
        try:
            parsed = parse_embeddings(await json_body(request))
            async with models.lock:
                embedder = await models.embedding_model(parsed.model)
                return JSONResponse(await embeddings.response(embedder, parsed))
        except Exception as exc:  # noqa: BLE001
            return error_response(exc)

    return [
        Route("/v1/models", list_models),
        Route("/v1/chat/completions", chat, methods=["POST"]),
        Route("/v1/completions", complete, methods=["POST"]),
        Route("/v1/embeddings", embed, methods=["POST"]),
        *memory_routes(models, memories, error_response, json_body),
        *audio_routes(models, error_response),
    ]


async def _events(first: dict, stream, include_usage: bool, lock: asyncio.Lock):
    """The server-sent events of a stream; the lock is held until it ends (or the client left)."""
    try:
        chunk = first
        while True:
            if include_usage or chunk["choices"]:
                yield f"data: {json.dumps(chunk, ensure_ascii=False)}\n\n"
            try:
                chunk = await anext(stream)
            except StopAsyncIteration:
                break
        yield "data: [DONE]\n\n"
    except Exception as exc:  # noqa: BLE001 - headers are sent: the error goes in the stream
        yield f"data: {error_response(exc).body.decode()}\n\n"
    finally:
        await stream.aclose()
        lock.release()
