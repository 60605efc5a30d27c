"""Model: a loaded model as a Python program holds it (what `py_engine.load` returns), in both hosts.

Its calls are the OpenAI layer's (api/completions.py, api/embeddings.py), the same code the desktop
server and the page's worker answer with, so a notebook cell, `wisp serve`'s /v1 and the page give
the same tokens for the same request. One call runs at a time on a model: a second waits for the
first (in order), as the server serves its requests."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncGenerator, AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from ..errors import WispError

if TYPE_CHECKING:
    from ..session import LoadedModel

Message = Mapping[str, Any]  # {"role": "user", "content": "..."}, as OpenAI's chat messages
Messages = str | Sequence[Message]  # a string is one user message
Prompt = str | Sequence[int]  # text, or token ids
FinishReason = Literal["stop", "length", "tool_calls"]


@dataclass(frozen=True)
class Answer:
    """A whole answer: its text, the ids the model generated (a final stop id included), why it
    ended ("stop": a stop id, stop string or finished JSON; "length": max_tokens or the context;
    "tool_calls") and the prompt's and answer's token counts."""

    text: str
    token_ids: list[int]
    finish_reason: FinishReason
    prompt_tokens: int
    completion_tokens: int
    tool_calls: list[dict[str, Any]] = field(default_factory=list)


class Model:
    """A loaded model: `generate`/`chat` stream text as async iterators, `complete`/`reply` give the
    whole Answer, `embed` gives vectors (an embedding model), and `chat_completion`, `completion`
    and `embeddings` take and give OpenAI's request and response objects. Made by `py_engine.load`."""

    def __init__(self, loaded: LoadedModel, precision: str):
        self._loaded = loaded
        self._precision = precision
        self._turn = asyncio.Lock()  # one call at a time, in the order they came
        self._holder: asyncio.Task[Any] | None = None  # the task whose call holds the turn
        self._ending = False  # the holder's answer is ending (its stream was left or closed)
        self._last: tuple[Any, list[dict[str, Any]]] | None = None  # the last answer's AnswerStream, tool calls

    @property
    def id(self) -> str:
        """The name it was loaded as (a catalog name, or the file's or folder's name)."""
        return str(self._loaded.id)

    @property
    def kind(self) -> Literal["chat", "embedding"]:
        """ "embedding" for an embedding model (it embeds; it cannot generate), else "chat"."""
        return "embedding" if self._loaded.engine is None else "chat"

    @property
    def context(self) -> int:
        """Tokens its context holds (prompt and answer together)."""
        engine = self._loaded.engine or self._loaded.embedder
        return int(engine.context)

    @property
    def precision(self) -> str:
        """Its arithmetic: "fast" (int8 activations, f16 where the GPU has it) or "exact" (f32)."""
        return self._precision

    @property
    def sees_pictures(self) -> bool:
        """Whether it reads pictures (a vision-language model: image_url parts in chat messages)."""
        return self._loaded.vision is not None

    def __repr__(self) -> str:
        return f"<wisp.Model {self.id!r} {self.kind}, context {self.context}, {self.precision}>"

    # ---- text: the answer as it streams, or whole ----

    async def generate(
        self,
        prompt: Prompt,
        *,
        max_tokens: int = 128,
        temperature: float = 0.0,
        top_p: float = 1.0,
        top_k: int = 0,
        repetition_penalty: float = 1.0,
        seed: int | None = None,
        stop: str | Sequence[str] | None = None,
        json_schema: Mapping[str, Any] | None = None,
    ) -> AsyncIterator[str]:
        """The continuation of `prompt` (text, the tokenizer's special tokens added; or token ids),
        piece by piece as the tokens come. Greedy unless temperature > 0; at most max_tokens;
        stop: up to 4 strings that end it; json_schema: the answer is JSON of this schema."""
        body = _sampling(max_tokens, temperature, top_p, top_k, repetition_penalty, seed, stop, json_schema)
        async with contextlib.aclosing(self._stream("completion", {"prompt": _prompt(prompt), **body})) as chunks:
            async for chunk in chunks:
                for choice in chunk["choices"]:
                    if choice["text"]:
                        yield choice["text"]

    async def complete(self, prompt: Prompt, **options: Any) -> Answer:
        """generate's answer whole, with its token ids (options: generate's)."""
        return await self._whole(self.generate(prompt, **options))

    async def chat(
        self,
        messages: Messages,
        *,
        system: str | None = None,
        max_tokens: int = 512,
        temperature: float = 0.0,
        top_p: float = 1.0,
        top_k: int = 0,
        repetition_penalty: float = 1.0,
        seed: int | None = None,
        stop: str | Sequence[str] | None = None,
        json_schema: Mapping[str, Any] | None = None,
        tools: Sequence[Mapping[str, Any]] | None = None,
    ) -> AsyncIterator[str]:
        """The assistant's reply to `messages` (a string: one user message; or OpenAI's chat
        messages, pictures as image_url parts for a vision model), rendered by the model's own
        chat template, piece by piece. system: a system message put first. tools: OpenAI's tool
        definitions; the calls the reply makes are in `reply(...)`'s Answer.tool_calls. The
        KV cache is reused where the conversation repeats what came before. Options: generate's."""
        body = _sampling(max_tokens, temperature, top_p, top_k, repetition_penalty, seed, stop, json_schema)
        body["messages"] = _messages(messages, system)
        if tools:
            body["tools"] = list(tools)
        async with contextlib.aclosing(self._stream("chat", body)) as chunks:  # left early: closed with this one
            async for chunk in chunks:
                for choice in chunk["choices"]:
                    if choice["delta"].get("content"):
                        yield choice["delta"]["content"]

    async def reply(self, messages: Messages, **options: Any) -> Answer:
        """chat's reply whole, with its token ids and tool calls (options: chat's)."""
        return await self._whole(self.chat(messages, **options))

    # ---- vectors ----

    async def embed(
        self, texts: str | Sequence[str], *, dimensions: int | None = None, prompt_name: str | None = None
    ) -> list[list[float]]:
        """One L2-normalised vector per text, in order (an embedding model). dimensions: a
        Matryoshka model's shorter size; prompt_name: one of the model's named prompts ("query")."""
        body: dict[str, Any] = {"input": [texts] if isinstance(texts, str) else list(texts)}
        body |= {"dimensions": dimensions} if dimensions is not None else {}
        body |= {"prompt_name": prompt_name} if prompt_name is not None else {}
        response = await self.embeddings(**body)
        return [item["embedding"] for item in response["data"]]

    # ---- OpenAI's objects ----

    async def chat_completion(self, **body: Any) -> dict[str, Any] | AsyncIterator[dict[str, Any]]:
        """POST /v1/chat/completions' body (model may be left out) → its chat.completion object, or
        with stream=True an async iterator of chat.completion.chunk objects."""
        return await self._openai("chat", body)

    async def completion(self, **body: Any) -> dict[str, Any] | AsyncIterator[dict[str, Any]]:
        """POST /v1/completions' body (model may be left out) → its text_completion object, or an
        async iterator of its chunks with stream=True."""
        return await self._openai("completion", body)

    async def embeddings(self, **body: Any) -> dict[str, Any]:
        """POST /v1/embeddings' body (model may be left out) → its list of embedding objects."""
        from ..api.embeddings import response
        from ..api.request import parse_embeddings

        if self._loaded.embedder is None:
            raise WispError(f"{self.id} is not an embedding model: it generates (generate, chat)")
        request = parse_embeddings({"model": self.id, **body})
        async with self._taking_turn():
            answer: dict[str, Any] = await response(self._loaded.embedder, request)
        return answer

    # ---- the one path every text call takes ----

    async def _openai(self, kind: str, body: dict[str, Any]) -> dict[str, Any] | AsyncIterator[dict[str, Any]]:
        from ..api.completions import collect

        if body.get("stream"):
            return self._stream(kind, body, usage=bool((body.get("stream_options") or {}).get("include_usage")))
        whole: dict[str, Any] = await collect(self._stream(kind, body, usage=True))
        return whole

    async def _stream(
        self, kind: str, body: dict[str, Any], usage: bool = False
    ) -> AsyncGenerator[dict[str, Any], None]:
        """The request's chunks; the last (usage) one only where asked. Leaving early (a break, an
        exception in the loop) ends the answer at its next token, so the model is ready for the next
        call; the Answer of the last one is kept for _whole."""
        from ..api.completions import chat_chunks, completion_chunks
        from ..api.request import parse_chat, parse_completion

        if self._loaded.engine is None:
            raise WispError(f"{self.id} is an embedding model: it embeds (embed, embeddings), it cannot generate")
        request = (parse_chat if kind == "chat" else parse_completion)({**body, "model": self.id})
        if request.precision not in (None, self._precision):
            raise WispError(f"{self.id} was loaded with precision {self._precision!r}: load it again to change it")
        left = False
        ended: list[Any] = []
        calls: list[dict[str, Any]] = []
        make = chat_chunks if kind == "chat" else completion_chunks
        async with self._taking_turn():
            chunks = make(self._loaded, request, cancelled=lambda: left, ended=lambda answer, _: ended.append(answer))
            try:
                async for chunk in chunks:
                    for choice in chunk["choices"]:
                        calls += choice.get("delta", {}).get("tool_calls", [])
                    if "usage" in chunk:
                        self._last = (ended[0], calls)
                    if chunk["choices"] or usage:
                        yield chunk
            finally:
                left = self._ending = True
                async for _ in chunks:  # the answer ends at its next token (AnswerStream asks cancelled)
                    pass

    def _ended(self) -> tuple[Any, list[dict[str, Any]]]:
        """The last answer's AnswerStream and tool calls (its usage chunk came: it ended)."""
        assert self._last is not None
        return self._last

    @contextlib.asynccontextmanager
    async def _taking_turn(self) -> AsyncIterator[None]:
        """The model's turn; a call made while the same task still streams another would wait for
        itself forever: refused instead."""
        task = asyncio.current_task()
        if task is not None and task is self._holder:
            # A stream left by `break` is closed by asyncio's finalizer hook in a task of its own,
            # created on the loop's next turn and started on the one after: let it begin (it marks
            # the answer ending).
            for _ in range(3):
                await asyncio.sleep(0)
            if task is self._holder and not self._ending:
                raise WispError(f"a call on {self.id} is still streaming in this task: finish it (or break out) first")
        async with self._turn:
            self._holder, self._ending = task, False
            try:
                yield
            finally:
                self._holder = None

    async def _whole(self, pieces: AsyncIterator[str]) -> Answer:
        self._last = None
        text = "".join([piece async for piece in pieces])
        answer, calls = self._ended()
        tool_calls = [{k: v for k, v in call.items() if k != "index"} for call in calls]
        finish: FinishReason = "tool_calls" if tool_calls else "length" if answer.stop == "length" else "stop"
        return Answer(text, list(answer.tokens), finish, len(answer.ids), answer.completion_tokens, tool_calls)


def _sampling(
    max_tokens: int,
    temperature: float,
    top_p: float,
    top_k: int,
    repetition_penalty: float,
    seed: int | None,
    stop: str | Sequence[str] | None,
    json_schema: Mapping[str, Any] | None,
) -> dict[str, Any]:
    """The OpenAI body fields of the text calls' keyword options (api/request.py checks them)."""
    body: dict[str, Any] = {
        "stream": True,
        "max_tokens": max_tokens,
        "temperature": temperature,
        "top_p": top_p,
        "top_k": top_k,
        "repetition_penalty": repetition_penalty,
    }
    if seed is not None:
        body["seed"] = seed
    if stop is not None:
        body["stop"] = stop if isinstance(stop, str) else list(stop)
    if json_schema is not None:
        body["response_format"] = {
            "type": "json_schema",
            "json_schema": {"name": "answer", "schema": dict(json_schema)},
        }
    return body


def _prompt(prompt: Prompt) -> str | list[int]:
    return prompt if isinstance(prompt, str) else list(prompt)


def _messages(messages: Messages, system: str | None) -> list[dict[str, Any]]:
    listed = [{"role": "user", "content": messages}] if isinstance(messages, str) else [dict(m) for m in messages]
    return ([{"role": "system", "content": system}] if system is not None else []) + listed
