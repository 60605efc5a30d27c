"""A memory collection: documents cut into passages (chunking.py), embedded by an embedding model,
their vectors searched on the GPU (vector_index.py), the records kept by a store that outlives the
process (sqlite_store.py on the desktop; the page's keeps the same records in OPFS).

    memory = await Collection.open(embedder, store, index)
    doc = await memory.add(text, {"title": ...}, source="notes.md")
    for hit in await memory.recall("question", k=5, token_budget=1024): hit.text, hit.source, hit.start

A redaction hook sees every text before it is embedded or stored. Recall takes the GPU's best
CANDIDATES passages, keeps those whose document's metadata matches the filter, and packs the best
under a token budget; where the filter leaves fewer than k of those, every score is read back and the
matching passages ranked on the host (exact, slower)."""

from __future__ import annotations

import uuid
from array import array
from collections.abc import Callable
from dataclasses import dataclass

from ..decode.row_draw import CANDIDATES
from ..errors import DocumentError, WispError
from .chunking import chunk_text
from .limits import DEFAULT_LIMITS, size_text
from .sqlite_store import Passage, StoredDocument


@dataclass(frozen=True)
class Recalled:
    text: str
    score: float  # cosine similarity with the query
    document: str  # its document's id
    source: str  # its document's source name
    start: int  # text = document[start:end]
    end: int
    tokens: int
    metadata: dict
    place: str = ""  # where in its document: "page 3", "Garden > Tomatoes" ("": not known)


class Collection:
    def __init__(self, embedder, store, index, *, window: int = 256, overlap: int = 32, redact=None, prompts=None):
        """Use Collection.open. embedder: an embedding.embedder.Embedder (or anything with its
        embed() and tokenizer); store: a SQLiteStore (or the page's); index: an empty VectorIndex of
        the embedder's dimensions. window / overlap: passages' tokens (chunking.chunk_text).
        redact(text) -> text: applied to every text before it is embedded or stored. prompts:
        {"query": ..., "document": ...} prefixes the model wants (EmbeddingGemma's task prompts)."""
        self.embedder, self.store, self.index = embedder, store, index
        self.window, self.overlap = window, overlap
        self.redact: Callable[[str], str] = redact or (lambda text: text)
        self.prompts = {"query": "", "document": "", **(prompts or {})}
        self._documents: dict[str, StoredDocument] = {}
        self._slots: list[tuple[str, int]] = []  # slot -> (document id, passage number)

    @classmethod
    async def open(cls, embedder, store, index, **options) -> Collection:
        memory = cls(embedder, store, index, **options)
        for document in store.documents():
            memory._place(document)
        return memory

    def _passage_input(self, chunk):
        """What embed() is given for a passage: the ids chunking counted where the embedder reads
        them as it would the text (tokenizing a passage again cost a third of an ingest's time in
        Pyodide), else the text after the document prompt."""
        text_ids = getattr(self.embedder, "text_ids", None)
        ids = text_ids(chunk.ids) if text_ids and chunk.ids is not None and not self.prompts["document"] else None
        return ids if ids is not None else self.prompts["document"] + chunk.text

    @property
    def documents(self) -> list[StoredDocument]:
        return list(self._documents.values())

    async def add(
        self, text: str, metadata: dict | None = None, *, source: str = "text", places=None, progress=None
    ) -> StoredDocument:
        """A document's passages embedded and stored (all of them, or none); returns it. places(offset):
        where in the document a passage starting there lies (documents.Document.sections_at's titles).
        progress(embedded, passages): called after each batch (a 200-page PDF is ~50 of them)."""
        cap = DEFAULT_LIMITS.max_text_bytes  # the readers' cap, for texts that come as text too
        if len(text) > cap:  # characters: a cheap bound before any work (UTF-8 is at least as long)
            raise DocumentError(source, f"is over {size_text(cap)} of text; longer documents are not remembered")
        text = self.redact(text)
        if not text.strip():
            raise WispError(f"{source}: the document has no text to remember")
        chunks = chunk_text(text, self.embedder.tokenizer.encode, self.window, self.overlap)
        vectors = []
        for at in range(0, len(chunks), 64):  # embedded in batches: a 200-page PDF is thousands of passages
            batch = [self._passage_input(chunk) for chunk in chunks[at : at + 64]]
            vectors += (await self.embedder.embed(batch)).vectors
            if progress:
                progress(len(vectors), len(chunks))
        where = places or (lambda offset: "")
        passages = [
            Passage(n, c.start, c.end, c.text, c.tokens, v, where(c.start))
            for n, (c, v) in enumerate(zip(chunks, vectors))
        ]
        document = StoredDocument(uuid.uuid4().hex, source, dict(metadata or {}), len(text), passages)
        self.store.add(document)  # stored first: a failure there leaves the index as it was
        self._place(document)
        return document

    def restore(self, document: StoredDocument) -> None:
        """A document embedded before (an import: memory/transfer.py), stored and indexed as it is."""
        self.restore_many([document])

    def restore_many(self, documents: list[StoredDocument]) -> None:
        """Documents embedded before (an import's batch), stored at once (the store's add_many: all or
        none), then indexed."""
        for document in documents:
            if not document.passages:
                raise WispError(f"{document.source}: a document without passages")
        self.store.add_many(documents)
        for document in documents:
            self._place(document)

    def delete(self, document_id: str) -> None:
        if document_id not in self._documents:
            raise WispError(f"no document {document_id!r} in this memory")
        self.store.delete(document_id)
        del self._documents[document_id]
        gone = sorted((s for s, (doc, _) in enumerate(self._slots) if doc == document_id), reverse=True)
        for slot in gone:  # from the last: the vector moved into a slot is never one still to go
            moved = self.index.remove(slot)
            last = self._slots.pop()
            if moved is not None:
                self._slots[slot] = last

    async def recall(
        self, query: str, k: int = 8, token_budget: int | None = None, filter: dict | None = None
    ) -> list[Recalled]:
        """The passages closest to `query`, best first: at most k, whose tokens sum to at most
        token_budget (a passage that does not fit is skipped for a smaller one), from documents whose
        metadata has every key and value of `filter`."""
        if k < 1:
            raise WispError("recall needs k >= 1")
        if not self._slots:
            return []
        vector = (await self.embedder.embed([self.prompts["query"] + self.redact(query)])).vectors[0]
        hits = [
            h for h in await self.index.search(vector, min(CANDIDATES, len(self._slots))) if self._matches(h[0], filter)
        ]
        if len(hits) < k and len(self._slots) > CANDIDATES and filter:
            scores = await self.index.scores(vector)
            hits = sorted(
                ((s, v) for s, v in enumerate(scores) if self._matches(s, filter)), key=lambda h: (-h[1], h[0])
            )
        found, spent = [], 0
        for slot, score in hits:
            doc_id, number = self._slots[slot]
            document = self._documents[doc_id]
            passage = document.passages[number]
            if token_budget is not None and spent + passage.tokens > token_budget:
                continue
            spent += passage.tokens
            found.append(
                Recalled(
                    passage.text,
                    score,
                    doc_id,
                    document.source,
                    passage.start,
                    passage.end,
                    passage.tokens,
                    document.metadata,
                    passage.place,
                )
            )
            if len(found) == k:
                break
        return found

    def _matches(self, slot: int, filter: dict | None) -> bool:
        if not filter:
            return True
        metadata = self._documents[self._slots[slot][0]].metadata
        return all(key in metadata and metadata[key] == value for key, value in filter.items())

    def _place(self, document: StoredDocument) -> None:
        self._documents[document.id] = document
        slots = self.index.add([p.vector for p in document.passages])
        for passage in document.passages:  # kept for export as 4 bytes a value: a list of Python floats
            passage.vector = array("f", passage.vector)  # costs 32 (2.4 GB at 100k passages of 768)
        self._slots += [(document.id, p.number) for p in document.passages]
        assert len(self._slots) == slots.stop
