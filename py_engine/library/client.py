"""Wisp: OpenAI's client shape over models loaded in this process, as static/openai.js's Wisp is in
the page: `await client.chat.completions.create(model=..., messages=..., stream=True)` loads the
model it names (once; a request naming another loads that one in its place) and answers with
OpenAI's objects. Code written against AsyncOpenAI runs here with the client swapped."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from .hosts import Precision, Progress, load
from .model import Model


class Wisp:
    """An OpenAI-shaped client: chat.completions.create, completions.create, embeddings.create and
    models.list, each awaited (stream=True gives an async iterator of chunks). One generating model
    and one embedding model are held at a time; context, precision and progress are load's."""

    def __init__(
        self,
        *,
        context: int = 4096,
        precision: Precision = "fast",
        progress: Progress | None = None,
        server: str | None = None,
    ):
        self._options: dict[str, Any] = {"context": context, "precision": precision, "progress": progress}
        self._options["server"] = server
        self._held: dict[str, tuple[str, Model]] = {}  # "chat" / "embedding" -> (the name asked for, the model)
        self.chat = _Chat(self)
        self.completions = _Completions(self)
        self.embeddings = _Embeddings(self)
        self.models = _Models(self)

    async def model(self, name: str, kind: str = "chat") -> Model:
        """The loaded model `name`, loaded now if it is not the one held for `kind`."""
        asked, held = self._held.get(kind, (None, None))
        if held is None or asked != name:
            self._held.pop(kind, None)  # the old one's GPU buffers go before the new one's come
            held = await load(name, **self._options)
            self._held[held.kind] = (name, held)
        return held


class _Completions:
    """client.completions: text completions (POST /v1/completions)."""

    def __init__(self, client: Wisp):
        self._client = client

    async def create(self, *, model: str, **body: Any) -> dict[str, Any] | AsyncIterator[dict[str, Any]]:
        """A text_completion object, or with stream=True an async iterator of its chunks."""
        return await (await self._client.model(model)).completion(**body)


class _ChatCompletions:
    """client.chat.completions (POST /v1/chat/completions)."""

    def __init__(self, client: Wisp):
        self._client = client

    async def create(self, *, model: str, **body: Any) -> dict[str, Any] | AsyncIterator[dict[str, Any]]:
        """A chat.completion object, or with stream=True an async iterator of chat.completion.chunk objects."""
        return await (await self._client.model(model)).chat_completion(**body)


class _Chat:
    def __init__(self, client: Wisp):
        self.completions = _ChatCompletions(client)


class _Embeddings:
    """client.embeddings (POST /v1/embeddings)."""

    def __init__(self, client: Wisp):
        self._client = client

    async def create(self, *, model: str, **body: Any) -> dict[str, Any]:
        """A list object of embedding objects, one per input, in order."""
        return await (await self._client.model(model, "embedding")).embeddings(**body)


class _Models:
    """client.models: the models held now."""

    def __init__(self, client: Wisp):
        self._client = client

    async def list(self) -> dict[str, Any]:
        data = [{"id": name, "object": "model", "owned_by": "wisp"} for name, _ in self._client._held.values()]
        return {"object": "list", "data": data}
