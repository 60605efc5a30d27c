"""The page's memory export and import (memory_export / memory_import, protocol.py), in
memory/transfer.py's JSON lines, so a collection moves between the page and the desktop's
/v1/memory/{c}/export and import, or into a backup file.

Neither ever holds a whole export: an export leaves in `memory_lines` events of about PART_CHARS
each (the page joins them into a Blob), and an import comes as batches of lines (static/client.js
reads the user's file in pieces), each batch stateless (its message carries the export's header
line) and stored in one append of its documents (LogStore.add_many). A malformed line is one error
naming the file and the line; the documents before it in its batch are stored (as the desktop's
import keeps them), the line's own document is not, and a document already there is skipped, so the
same file imported again after a fix adds only what is missing. An export of another embedding model
has its passages' texts embedded again (progress as an add's `embed` steps); the same model's needs
no GPU at all where the collection's index is not built yet (the records go to the store, the index
is built from them at the next recall)."""

from __future__ import annotations

from ..errors import WispError
from ..memory.transfer import ExportReader, dimensions_of, document_line, embed_again, header_line

PART_CHARS = 1 << 20  # an export's event carries about this many characters (a few documents at least)


def export(state, request, shelf) -> int:
    """The shelf's collection as `memory_lines` events (the header first); returns its documents."""
    documents = shelf.store.documents()
    part, size = [header_line(shelf.store.model, dimensions_of(documents))], 0
    for done, doc in enumerate(documents, 1):
        line = document_line(doc)
        part.append(line)
        size += len(line)
        if size >= PART_CHARS or done == len(documents):
            state.emit("memory_lines", request, text="\n".join(part) + "\n", done=done, total=len(documents))
            part, size = [], 0
    if not documents:
        state.emit("memory_lines", request, text=part[0] + "\n", done=0, total=0)
    return len(documents)


async def import_batch(state, message: dict, name: str, model: dict) -> None:
    """One batch of an export's lines into the collection `name`, answered by a `memory` event with
    `imported` (documents added) and `skipped` (already there)."""
    from . import memory  # its opened() and room(): the files' seam (tests put plain files there)

    request, label = message["id"], message.get("name") or "the import"
    reader = ExportReader(message["header"], model["id"], f"{label}: its first line")
    embedder = None if reader.same else await memory.ensure_embedder(state, model, message, request)
    async with state.memory.lock, memory.opened(name) as files:
        dimensions = embedder.dimensions if embedder else reader.dimensions or None
        shelf = state.memory.shelf(name, files, model["id"], dimensions)
        # where the index is built (or must be, to embed), it takes the documents too
        collection = await memory.indexed(state, shelf) if embedder else shelf.collection
        known = {doc.id for doc in shelf.store.documents()}
        documents, skipped, problem = [], 0, None
        for number, line in enumerate(message["lines"], message["line"]):
            if not line.strip():
                continue
            try:
                doc = reader.document(line, f"{label}: line {number}")
            except WispError as exc:
                problem = exc  # the documents before it go in; it and the lines after it do not
                break
            if doc.id in known:
                skipped += 1
                continue
            known.add(doc.id)
            documents.append(doc)
        if embedder and documents:

            def progress(done: int, total: int) -> None:
                state.emit("memory_progress", request, file=label, phase="embed", done=done, total=total)

            progress(0, 0)
            await embed_again(embedder, collection.prompts["document"], documents, progress)
        shelf.store.room = (await memory.room())[2]  # a batch that would not fit is refused before it writes
        if collection is not None:
            collection.restore_many(documents)
        else:
            shelf.store.add_many(documents)
        if problem is not None:
            raise problem
        state.emit(
            "memory",
            request,
            collection=name,
            imported=len(documents),
            skipped=skipped,
            bytes=shelf.store.bytes,
        )
