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
is built from them at the next recall). Here the lines' work; memory.py's export and import_lines
open the collection's files and the embedder around it."""

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


class ImportBatch:
    """One memory_import message: its header read (ExportReader), then its lines stored by store()."""

    def __init__(self, message: dict, model: str):
        self.request, self.label = message["id"], message.get("name") or "the import"
        self.lines, self.first = message["lines"], message["line"]
        self.reader = ExportReader(message["header"], model, f"{self.label}: its first line")
        self.same = self.reader.same  # the collection's model: the vectors are taken as they are
        self.dimensions = self.reader.dimensions or None

    async def store(self, state, shelf, collection, embedder) -> tuple[int, int]:
        """The batch's documents into the shelf's store (through `collection`, the index, where it is
        built), another model's embedded again by `embedder` first; (imported, skipped)."""
        known = {doc.id for doc in shelf.store.documents()}
        documents, skipped, problem = [], 0, None
        for number, line in enumerate(self.lines, self.first):
            if not line.strip():
                continue
            try:
                doc = self.reader.document(line, f"{self.label}: line {number}")
            except WispError as exc:
                problem = exc  # the documents before it go in; it and the lines after it do not
                break
            if doc.id in known:
                skipped += 1
                continue
            known.add(doc.id)
            documents.append(doc)
        if not self.same and documents:

            def progress(done: int, total: int) -> None:
                state.emit("memory_progress", self.request, file=self.label, phase="embed", done=done, total=total)

            progress(0, 0)
            await embed_again(embedder, collection.prompts["document"], documents, progress)
        if collection is not None:
            collection.restore_many(documents)
        else:
            shelf.store.add_many(documents)
        if problem is not None:
            raise problem
        return len(documents), skipped
