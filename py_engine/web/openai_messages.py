"""The worker's `openai` message, its one generation message: an OpenAI request body from the page
(static/openai.js, and the chat through static/client.js's generate), answered by the loaded model
through py_engine/api/ exactly as the desktop's /v1 answers it. Streams are posted as `chunk`
events (the usage chunk only when stream_options asked for it), and every request ends with one
`response`: the whole completion (chunks added up) or embeddings; a completion's with its `stats`
(the page's stats line, benchmarks/browser.py's numbers). A chat's pictures (image_url parts) are
decoded here, by the worker's JavaScript (pictures.py), and handed to the OpenAI layer decoded. A
chat's `memory` (Wisp's extension) recalls passages of the page's documents (memory.py) before the
conversation, and the answer cites them as the desktop's does (api/memory.py)."""

from __future__ import annotations

from ..api import completions, embeddings
from ..api.memory import citations, last_user_text, with_passages
from ..api.request import RequestError, parse_chat, parse_completion, parse_embeddings
from ..decode.answer_stream import AnswerStream
from ..errors import WispError
from .pictures import read_pictures

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
    recalled = None  # Wisp's memory extension: passages of the user's documents before the conversation
    if getattr(body, "memory", None) is not None:
        from .memory import recall

        hits = await recall(
            state, body.memory, last_user_text(body.messages), message.get("embedder"), request, message
        )
        body.messages = with_passages(body.messages, hits)
        recalled = citations(body.memory.collection, hits)

    def cancelled() -> bool:
        return request in state.cancelled

    ended, decode_s = [], 0.0
    buffers_before = _command_buffers(state)
    if endpoint == "chat.completions":
        pictures = None  # a text-only model refuses them in the OpenAI layer, undecoded
        if body.pictures and model.vision is not None:
            pictures, decode_s = await read_pictures(body.pictures)
        answer = completions.chat_chunks(model, body, cancelled, lambda *args: ended.append(args), pictures=pictures)
    else:
        answer = completions.completion_chunks(model, body, cancelled, lambda *args: ended.append(args))
    chunks = _posted(state, request, answer, body.stream, body.include_usage, recalled)
    try:
        response = await completions.collect(chunks)
    finally:
        state.cancelled.discard(request)
    state.losses = 0  # an answer completed: the device works again
    stats = generation_stats(*ended[0], model, _command_buffers(state) - buffers_before, decode_s)
    if recalled:  # as the desktop's: the whole response, and a stream's first chunk, carry the citations
        response = {**response, "memory": recalled}
    state.emit("response", request, body=response, stats=stats)


def generation_stats(answer: AnswerStream, dropped: int, model, command_buffers: int, decode_s: float = 0.0) -> dict:
    """protocol.py's STATS of an answer: its tokens, the prompt's (those computed, those left out
    to fit the context), the time to the first token and both speeds, why it stopped, the host's
    time per decode token and the command buffers submitted; with pictures, their tokens and
    their time (decode_s: decoding them, before the answer started; none where the prompt cache
    had them: a second question about the same picture)."""
    times, engine, prefilled = answer.token_times, model.engine, model.cache.prefilled
    ttft = times[0] - answer.started if times else 0.0
    decode = (len(times) - 1) / (times[-1] - times[0]) if len(times) > 1 and times[-1] > times[0] else 0.0
    pictures = {}
    if answer.pictures:  # their tokens, and the time they took to decode and encode (none: the cache had them)
        pictures = {"pictures": len(answer.pictures), "picture_tokens": answer.ids.count(model.vision.image_token_id)}
        if answer.encoded is not None:
            pictures["picture_ms"] = round(1000 * (decode_s + answer.encoded - answer.started), 1)
    return {
        **pictures,
        "tokens": answer.tokens,
        "prompt_tokens": len(answer.ids),
        "dropped_exchanges": dropped,
        "prefilled_tokens": prefilled,
        "ttft_ms": round(1000 * ttft, 1),
        "prefill_tok_s": round(prefilled / ttft, 1) if ttft else 0.0,
        "decode_tok_s": round(decode, 1),
        "stop": answer.stop,
        "command_buffers": command_buffers,
        "host_ms_per_token": round(1000 * engine.stats.host_seconds / max(engine.stats.tokens, 1), 3),
    }


def _command_buffers(state) -> int:
    """The browser device's command buffers submitted so far (0 where it does not count them)."""
    return state.device.command_buffers() if hasattr(state.device, "command_buffers") else 0


async def _posted(state, request, chunks, stream: bool, include_usage: bool, recalled=None):
    """The chunks, each posted as it comes when the page asked for a stream (the first with the
    memory's citations, when recalled)."""
    async for chunk in chunks:
        if stream and (chunk["choices"] or include_usage):
            state.emit("chunk", request, chunk={**chunk, "memory": recalled} if recalled else chunk)
            recalled = None
        yield chunk
