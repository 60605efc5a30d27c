"""Wisp's memory extension of OpenAI's chat API (not OpenAI's): a chat request's `memory` names a
collection of the user's documents; the passages nearest the conversation's last user message are
recalled and put before the conversation as a system message that numbers them, and the answer
carries them as `memory.citations` (so a client can show the source passage of each [n]).

    "memory": "notes"                      # a collection's name
    "memory": {"collection": "notes", "k": 5, "token_budget": 1024, "filter": {"kind": "pdf"}}

The same parsing and prompt serve the desktop server (app/) and the page's module."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from .request_error import RequestError

COLLECTION_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,63}")
INSTRUCTION = (
    "Passages from the user's own documents follow, numbered. Where they answer the question, answer from "
    "them and cite each passage you use as [n]; where they do not, say so."
)


@dataclass
class MemoryOptions:
    collection: str
    k: int = 5
    token_budget: int = 1024
    filter: dict = field(default_factory=dict)


def collection_name(value, param: str = "memory.collection") -> str:
    """A collection's name as a file name may hold it (letters, digits, - and _; at most 64)."""
    if not isinstance(value, str) or not COLLECTION_NAME.fullmatch(value):
        raise RequestError(
            f"'{param}' must be 1-64 letters, digits, '-' or '_', starting with a letter or digit", param
        )
    return value


def parse_memory(value) -> MemoryOptions | None:
    """A chat request's `memory` field (None: absent)."""
    if value is None:
        return None
    if isinstance(value, str):
        return MemoryOptions(collection_name(value, "memory"))
    if not isinstance(value, dict):
        raise RequestError("'memory' must be a collection's name or an object with 'collection'", "memory")
    unknown = sorted(set(value) - {"collection", "k", "token_budget", "filter"})
    if unknown:
        raise RequestError(f"'memory.{unknown[0]}' is not a memory option", f"memory.{unknown[0]}")
    options = MemoryOptions(collection_name(value.get("collection")))
    for name, low, high in (("k", 1, 64), ("token_budget", 1, 1 << 20)):
        got = value.get(name, getattr(options, name))
        if type(got) is not int or not low <= got <= high:
            raise RequestError(f"'memory.{name}' must be an integer from {low} to {high}", f"memory.{name}")
        setattr(options, name, got)
    options.filter = {} if value.get("filter") is None else value["filter"]
    if not isinstance(options.filter, dict):
        raise RequestError("'memory.filter' must be an object of metadata keys and values", "memory.filter")
    return options


def last_user_text(messages: list[dict]) -> str:
    """The text of the conversation's last user message (its text parts joined): what is recalled for."""
    for message in reversed(messages):
        if message["role"] == "user":
            content = message["content"]
            if isinstance(content, str):
                return content
            return " ".join(part["text"] for part in content if part.get("type") == "text")
    raise RequestError("'memory' needs a user message to recall passages for", "messages")


def with_passages(messages: list[dict], hits) -> list[dict]:
    """The conversation with the recalled passages (memory.collection.Recalled, best first) before
    it: in its first system message, or a new one (templates that allow one system message take it)."""
    if not hits:
        return messages
    numbered = "\n\n".join(f"[{n}] ({where(hit)})\n{hit.text}" for n, hit in enumerate(hits, 1))
    note = f"{INSTRUCTION}\n\n{numbered}"
    first = messages[0]
    if first["role"] == "system" and isinstance(first["content"], str):
        return [{**first, "content": f"{first['content']}\n\n{note}"}, *messages[1:]]
    return [{"role": "system", "content": note}, *messages]


def where(hit) -> str:
    """A passage's source, and its place there where known: "notes.pdf, page 3"."""
    return f"{hit.source}, {hit.place}" if hit.place else hit.source


def citations(collection: str, hits) -> dict:
    """The answer's `memory` object: each recalled passage by its number in the prompt."""
    return {
        "collection": collection,
        "citations": [
            {
                "n": n,
                "source": hit.source,
                "place": hit.place,
                "document": hit.document,
                "start": hit.start,
                "end": hit.end,
                "text": hit.text,
                "score": round(hit.score, 6),
            }
            for n, hit in enumerate(hits, 1)
        ],
    }


def document_json(document) -> dict:
    """A stored document as /v1/memory and the page's panel list it (its passages counted, not sent)."""
    return {
        "id": document.id,
        "source": document.source,
        "metadata": document.metadata,
        "chars": document.chars,
        "passages": len(document.passages),
    }
