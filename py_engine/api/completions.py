"""Chat and text completions in OpenAI's shape, on a loaded model: an async iterator of chunk
dicts, exactly what a streaming response carries. Both transports use it as is: the desktop server
writes each chunk as a server-sent event, the browser worker posts each as a `chunk` event; a
request without `stream` gets `collect(chunks)`. The last chunk is always the usage chunk
(`choices: []`), which a transport drops unless stream_options.include_usage asked for it.

A model here is a session.LoadedModel; its answer's text comes from answer_stream.py."""

from __future__ import annotations

import secrets
import time

from ..decode.answer_stream import AnswerStream
from ..errors import WispError
from ..tokenizer.template.prompt import fit_to_context
from .constraints import response_constraint, tool_constraint
from .request import ChatRequest, CompletionRequest, RequestError
from .tool_calls import ToolCallStream, require_format


def _ids(kind: str) -> tuple[str, int]:
    return f"{kind}-{secrets.token_hex(12)}", int(time.time())


async def chat_chunks(model, request: ChatRequest, cancelled=lambda: False, ended=None, pictures=None):
    """The chat completion's chunks (chat.completion.chunk objects); cancelled() is asked after
    every token (the page's Stop, a client that went away). ended(answer, dropped), once the
    answer has ended: its AnswerStream and the exchanges left out to fit the context (the
    worker's stats). pictures: the request's pictures already decoded by a host that reads them
    itself (the browser worker: web/pictures.py), one for each image_url URL, in order; without
    it, Pillow reads the URLs here."""
    tok, engine = _tokenizer(model), model.engine
    fmt = require_format(tok) if request.tools and request.tool_choice != "none" else None
    variables = {"tools": request.tools} if fmt else {}
    room = request.max_tokens or engine.context
    pictures = _pictures(model, request, pictures)
    if pictures:  # every exchange kept: their pictures are the request's
        text, _ = model.vision.expand(tok.apply_chat_template(request.messages, **variables), pictures)
        ids, dropped = tok.encode(text, add_special_tokens=False), 0
    else:
        ids, dropped = fit_to_context(tok, request.messages, engine.context, room, **variables)
    constraint = (
        tool_constraint(model, fmt, request.tools, request.tool_choice)
        if fmt and request.tool_choice != "auto"
        else response_constraint(model, request.response_format)
    )
    calls = ToolCallStream(fmt, [t["function"]["name"] for t in request.tools]) if fmt else None
    chunk_id, created = _ids("chatcmpl")

    def chunk(delta: dict, finish=None, usage=None) -> dict:
        choices = [] if usage else [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}]
        out = {"id": chunk_id, "object": "chat.completion.chunk", "created": created, "model": request.model}
        return {**out, "choices": choices, **({"usage": usage} if usage else {})}

    yield chunk({"role": "assistant", "content": ""})
    answer = _answer(model, ids, request, constraint, cancelled, pictures)
    async for piece in answer:
        text = calls.push(piece) if calls else piece
        if text:
            yield chunk({"content": text})
    if ended:
        ended(answer, dropped)
    finish = _finish(answer)
    if calls:
        text, found = calls.finish()
        if text:
            yield chunk({"content": text})
        if found:
            finish = "tool_calls"
            yield chunk({"tool_calls": [_tool_call(i, call) for i, call in enumerate(found)]})
    yield chunk({}, finish)
    yield chunk({}, usage=_usage(answer))


def _tool_call(index: int, call: dict) -> dict:
    function = {"name": call["name"], "arguments": call["arguments"]}
    return {"index": index, "id": f"call_{secrets.token_hex(12)}", "type": "function", "function": function}


async def completion_chunks(model, request: CompletionRequest, cancelled=lambda: False, ended=None):
    """A text completion's chunks (text_completion objects, as OpenAI streams them); a prompt of
    token ids needs no tokenizer unless echoed or constrained (without one, the answer is tokens
    only: no text). cancelled and ended: as chat_chunks' (nothing is dropped)."""
    given_text = isinstance(request.prompt, str)
    tok = _tokenizer(model) if given_text or request.echo or request.response_format else model.tok
    ids = tok.encode(request.prompt, add_special_tokens=True) if given_text else request.prompt
    constraint = response_constraint(model, request.response_format)
    chunk_id, created = _ids("cmpl")

    def chunk(text: str, finish=None, usage=None) -> dict:
        out = {"id": chunk_id, "object": "text_completion", "created": created, "model": request.model}
        choice = {"index": 0, "text": text, "logprobs": None, "finish_reason": finish}
        return {**out, "choices": [] if usage else [choice], **({"usage": usage} if usage else {})}

    if request.echo:
        yield chunk(request.prompt if given_text else tok.decode(ids))
    answer = _answer(model, ids, request, constraint, cancelled)
    async for piece in answer:
        yield chunk(piece)
    if ended:
        ended(answer, 0)
    yield chunk("", _finish(answer))
    yield chunk("", usage=_usage(answer))


def _tokenizer(model):
    if model.tok is None:
        raise RequestError("this model has no tokenizer: it cannot take text", "model")
    return model.tok


def _pictures(model, request: ChatRequest, decoded=None) -> list:
    """The request's pictures (its image_url parts), read (or as the host decoded them); a model
    without pictures refuses them."""
    if not request.pictures:
        return []
    if getattr(model, "vision", None) is None:
        raise RequestError(f"{request.model} is a text-only model: image_url parts need a vision model", "messages")
    if decoded is not None:
        if len(decoded) != len(request.pictures):
            raise ValueError(f"{len(decoded)} decoded pictures for {len(request.pictures)} image_url parts")
        return list(decoded)
    from ..vision.files import picture_from_url

    try:
        return [picture_from_url(url) for url in request.pictures]
    except WispError as exc:
        raise RequestError(str(exc), "messages") from None


def _answer(model, ids: list[int], request, constraint, cancelled, pictures=()) -> AnswerStream:
    """The answer to `ids`, at most max_tokens and what the context leaves."""
    room = model.engine.context - len(ids)
    if room < 1:
        raise RequestError(f"the prompt is {len(ids)} tokens; the context holds {model.engine.context}", "messages")
    most = min(request.max_tokens or room, room)
    return AnswerStream(
        model,
        ids,
        most,
        request.sampling,
        stop_strings=request.stop,
        constraint=constraint,
        cancelled=cancelled,
        ignore_eos=request.ignore_eos,
        pictures=pictures,
    )


def _finish(answer: AnswerStream) -> str:
    return "length" if answer.stop == "length" else "stop"


def _usage(answer: AnswerStream) -> dict:
    prompt, completion = len(answer.ids), answer.completion_tokens
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}


async def collect(chunks) -> dict:
    """The non-streaming response (chat.completion or text_completion) the chunks add up to."""
    text, calls, finish, usage, first = [], [], None, None, None
    async for chunk in chunks:
        first = first or chunk
        usage = chunk.get("usage", usage)
        for choice in chunk["choices"]:
            delta = choice.get("delta", {})
            text.append(delta.get("content") or choice.get("text") or "")
            calls += [{k: v for k, v in c.items() if k != "index"} for c in delta.get("tool_calls", [])]
            finish = choice["finish_reason"] or finish
    out = {"id": first["id"], "created": first["created"], "model": first["model"], "usage": usage}
    if first["object"] == "text_completion":
        choice = {"index": 0, "text": "".join(text), "logprobs": None, "finish_reason": finish}
        return {**out, "object": "text_completion", "choices": [choice]}
    message = {"role": "assistant", "content": "".join(text) or (None if calls else ""), "refusal": None}
    if calls:
        message["tool_calls"] = calls
    choice = {"index": 0, "message": message, "logprobs": None, "finish_reason": finish}
    return {**out, "object": "chat.completion", "choices": [choice]}
