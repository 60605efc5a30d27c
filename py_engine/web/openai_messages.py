"""The worker's `openai` message: an OpenAI request body from the page (static/openai.js),
answered by the loaded model through py_engine/api/ exactly as the desktop's /v1 answers it.
Streams are posted as `chunk` events (the usage chunk only when stream_options asked for it), and
every request ends with one `response`: the whole completion (chunks added up) or embeddings."""

from __future__ import annotations

from ..api import completions, embeddings
from ..api.request import RequestError, parse_chat, parse_completion, parse_embeddings
from ..errors import WispError

PARSERS = {"chat.completions": parse_chat, "completions": parse_completion, "embeddings": parse_embeddings}


async def answer(state, message: dict) -> None:
    request, endpoint = message["id"], message["endpoint"]
    body = PARSERS[endpoint](message["body"])
    model = state.model
    if model is None:
        raise WispError("no model loaded")
    if body.model != model.id:
        raise RequestError(f"model '{body.model}' is not the one loaded ('{model.id}')", "model")
    if endpoint == "embeddings":
        if model.embedder is None:
            raise RequestError(f"'{model.id}' is not an embedding model", "model")
        state.emit("response", request, body=await embeddings.response(model.embedder, body))
        return
    if model.engine is None:
        raise RequestError(f"'{model.id}' is an embedding model: it writes no text", "model")
    if body.precision not in (None, model.engine.precision):  # static/openai.js loads it so first
        raise RequestError(f"'{model.id}' is loaded with precision '{model.engine.precision}'", "precision")
    make = completions.chat_chunks if endpoint == "chat.completions" else completions.completion_chunks

    def cancelled() -> bool:
        return request in state.cancelled

    chunks = _posted(state, request, make(model, body, cancelled), body.stream, body.include_usage)
    try:
        state.emit("response", request, body=await completions.collect(chunks))
    finally:
        state.cancelled.discard(request)


async def _posted(state, request, chunks, stream: bool, include_usage: bool):
    """The chunks, each posted as it comes when the page asked for a stream."""
    async for chunk in chunks:
        if stream and (chunk["choices"] or include_usage):
            state.emit("chunk", request, chunk=chunk)
        yield chunk
