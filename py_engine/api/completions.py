"""Chat and text completions in OpenAI's shape, on a loaded model: an async iterator of chunk
dicts, exactly what a streaming response carries. Both transports use it as is: the desktop server
writes each chunk as a server-sent event, the browser worker posts each as a `chunk` event; a
request without `stream` gets `collect(chunks)`. The last chunk is always the usage chunk
(`choices: []`), which a transport drops unless stream_options.include_usage asked for it.

A model here is anything with `engine`, `tok`, `stop_ids` and `cache` (a PromptCache): the worker's
LoadedModel, a ChatModel."""

from __future__ import annotations

import secrets
import time
from dataclasses import dataclass

from ..chat_prompt import fit_to_context
from .constraints import response_constraint, tool_constraint
from .request import ChatRequest, CompletionRequest, RequestError
from .stop_strings import StopStrings
from .tool_calls import ToolCallStream, require_format


@dataclass
class ChatModel:
    """A loaded chat model as this module wants it (session.load_model's, with a PromptCache)."""

    id: str
    engine: object
    tok: object
    stop_ids: set
    cache: object


def _ids(kind: str) -> tuple[str, int]:
    return f"{kind}-{secrets.token_hex(12)}", int(time.time())


async def chat_chunks(model, request: ChatRequest, cancelled=lambda: False):
    """The chat completion's chunks (chat.completion.chunk objects); cancelled() is asked after
    every token (the page's Stop, a client that went away)."""
    tok, engine = _tokenizer(model), model.engine
    fmt = require_format(tok) if request.tools and request.tool_choice != "none" else None
    variables = {"tools": request.tools} if fmt else {}
    room = request.max_tokens or engine.context
    ids, _ = fit_to_context(tok, request.messages, engine.context, room, **variables)
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
    answer = Answer(model, ids, request, constraint, cancelled)
    async for piece in answer:
        text = calls.push(piece) if calls else piece
        if text:
            yield chunk({"content": text})
    finish = answer.finish
    if calls:
        text, found = calls.finish()
        if text:
            yield chunk({"content": text})
        if found:
            finish = "tool_calls"
            yield chunk({"tool_calls": [_tool_call(i, call) for i, call in enumerate(found)]})
    yield chunk({}, finish)
    yield chunk({}, usage=answer.usage(len(ids)))


def _tool_call(index: int, call: dict) -> dict:
    function = {"name": call["name"], "arguments": call["arguments"]}
    return {"index": index, "id": f"call_{secrets.token_hex(12)}", "type": "function", "function": function}


async def completion_chunks(model, request: CompletionRequest, cancelled=lambda: False):
    """A text completion's chunks (text_completion objects, as OpenAI streams them)."""
    tok = _tokenizer(model)
    ids = tok.encode(request.prompt, add_special_tokens=True)
    constraint = response_constraint(model, request.response_format)
    chunk_id, created = _ids("cmpl")

    def chunk(text: str, finish=None, usage=None) -> dict:
        out = {"id": chunk_id, "object": "text_completion", "created": created, "model": request.model}
        choice = {"index": 0, "text": text, "logprobs": None, "finish_reason": finish}
        return {**out, "choices": [] if usage else [choice], **({"usage": usage} if usage else {})}

    if request.echo:
        yield chunk(request.prompt)
    answer = Answer(model, ids, request, constraint, cancelled)
    async for piece in answer:
        yield chunk(piece)
    yield chunk("", answer.finish)
    yield chunk("", usage=answer.usage(len(ids)))


def _tokenizer(model):
    if model.tok is None:
        raise RequestError("this model has no tokenizer: it cannot take text", "model")
    return model.tok


class Answer:
    """The answer's text pieces as they stream, stop strings applied; then `finish` (stop, length)
    and `usage`."""

    def __init__(self, model, ids, request, constraint, cancelled):
        self.model, self.ids, self.request = model, ids, request
        self.constraint, self.cancelled = constraint, cancelled
        self.tokens, self.finish = 0, "length"

    def usage(self, prompt_tokens: int) -> dict:
        total = prompt_tokens + self.tokens
        return {"prompt_tokens": prompt_tokens, "completion_tokens": self.tokens, "total_tokens": total}

    def __aiter__(self):
        return self._pieces()

    async def _pieces(self):
        engine, stop_ids = self.model.engine, self.model.stop_ids
        room = engine.context - len(self.ids)
        if room < 1:
            raise RequestError(f"the prompt is {len(self.ids)} tokens; the context holds {engine.context}", "messages")
        most = min(self.request.max_tokens or room, room)
        stream = self.model.tok.stream_decoder(skip_special_tokens=True)
        stops = StopStrings(self.request.stop)
        tokens = self.model.cache.generate(self.ids, most, self.request.sampling, stop_ids, self.constraint)
        try:
            async for token in tokens:
                if token in stop_ids:
                    self.finish = "stop"
                    break
                self.tokens += 1
                text = stops.push(stream.push(token))
                if text:
                    yield text
                if stops.stopped or self.cancelled():
                    self.finish = "stop"
                    break
            else:
                if self.constraint is not None and self.constraint.finished:
                    self.finish = "stop"
        finally:
            await tokens.aclose()
        tail = stops.push(stream.flush()) + stops.flush()
        if tail:
            yield tail


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
