"""A memory collection's export and import: JSON lines, a header then one document a line (its
passages with their offsets, token counts and vectors as base64 of little-endian f32), so a user can
move their memory between the page and the desktop or keep a copy. An import into a collection of
another embedding model (or other dimensions) embeds the passages' texts again; a document already
there (the same id) is left as it is. A malformed export is one WispError naming the line.

The pieces are a line at a time (header_line, document_line; ExportReader), so the page can stream an
export out and take an import in batches of lines: a large export never sits whole in its heap."""

from __future__ import annotations

import base64
import binascii
import json
import sys
from array import array

from ..errors import WispError
from .sqlite_store import Passage, StoredDocument

FORMAT = "wisp-memory"
VERSION = 1
EMBED_BATCH = 64  # passages embedded at a time, as Collection.add does


def _f32(values) -> str:
    packed = array("f", values)
    if sys.byteorder != "little":
        packed.byteswap()
    return base64.b64encode(packed.tobytes()).decode()


def _floats(text: str, dimensions: int, where: str) -> array:
    try:
        raw = base64.b64decode(text, validate=True)
    except (binascii.Error, TypeError):
        raise WispError(f"{where}: a vector is not base64") from None
    if len(raw) != 4 * dimensions:
        raise WispError(f"{where}: a vector of {len(raw) // 4} values where the export has {dimensions}")
    values = array("f", raw)
    if sys.byteorder != "little":
        values.byteswap()
    return values


def header_line(model: str, dimensions: int) -> str:
    """An export's first line (`model`: the embedding model its vectors came from)."""
    return json.dumps({"format": FORMAT, "version": VERSION, "model": model, "dimensions": dimensions})


def document_line(doc: StoredDocument) -> str:
    passages = [[p.number, p.start, p.end, p.text, p.tokens, _f32(p.vector), p.place] for p in doc.passages]
    return json.dumps(
        {"id": doc.id, "source": doc.source, "metadata": doc.metadata, "chars": doc.chars, "passages": passages}
    )


def dimensions_of(documents) -> int:
    return len(documents[0].passages[0].vector) if documents else 0


def export_lines(collection, model: str) -> str:
    """The collection as JSON lines (`model`: the embedding model its vectors came from)."""
    documents = collection.documents
    lines = [header_line(model, dimensions_of(documents)), *(document_line(doc) for doc in documents)]
    return "\n".join(lines) + "\n"


class ExportReader:
    """An export read a line at a time, after its header line. `model`: the embedding model of the
    collection it goes into; where the export's is another, its documents come without vectors
    (`same` is False: embed_again gives them theirs)."""

    def __init__(self, header: str, model: str, where: str = "line 1"):
        found = _json(header, where)
        if found.get("format") != FORMAT or found.get("version") != VERSION:
            raise WispError(f"{where}: not a {FORMAT} export of version {VERSION}")
        self.model, self.dimensions = found.get("model"), found.get("dimensions")
        self.same = self.model == model
        if self.same and (not isinstance(self.dimensions, int) or isinstance(self.dimensions, bool)):
            raise WispError(f"{where}: the export's dimensions are not a whole number")

    def document(self, line: str, where: str) -> StoredDocument:
        """The document of one line (its passages' vectors empty where they are to be embedded again)."""
        record = _json(line, where)
        try:
            doc_id, source, metadata, chars = record["id"], record["source"], record["metadata"], int(record["chars"])
            rows = [
                (int(a), int(b), int(c), str(d), int(e), str(f), str(g)) for a, b, c, d, e, f, g in record["passages"]
            ]
        except (KeyError, TypeError, ValueError):
            raise WispError(f"{where}: not a document of a {FORMAT} export") from None
        if not (isinstance(doc_id, str) and doc_id and isinstance(source, str) and isinstance(metadata, dict)):
            raise WispError(f"{where}: not a document of a {FORMAT} export (its id, source or metadata)")
        if not rows:
            raise WispError(f"{where}: the document {source!r} has no passages")
        passages = [
            Passage(a, b, c, d, e, _floats(f, self.dimensions, where) if self.same else array("f"), g)
            for a, b, c, d, e, f, g in rows
        ]
        return StoredDocument(doc_id, source, metadata, chars, passages)


async def embed_again(embedder, prompt: str, documents: list, progress=None) -> None:
    """Another model's documents given vectors of `embedder`: their passages' texts embedded (behind
    the document prompt, as they were stored) in batches; progress(done, total) after each."""
    passages = [p for doc in documents for p in doc.passages]
    for at in range(0, len(passages), EMBED_BATCH):
        batch = passages[at : at + EMBED_BATCH]
        vectors = (await embedder.embed([prompt + p.text for p in batch])).vectors
        for passage, vector in zip(batch, vectors):
            passage.vector = array("f", vector)
        if progress:
            progress(at + len(batch), len(passages))


async def import_lines(collection, text: str, model: str) -> int:
    """Adds an export's documents to the collection (`model`: the collection's embedding model);
    returns how many were added."""
    numbered = [(n, line) for n, line in enumerate(text.splitlines(), 1) if line.strip()]
    first, header = numbered[0] if numbered else (1, "")
    reader = ExportReader(header, model, f"line {first}")
    added, known = 0, {doc.id for doc in collection.documents}
    for n, line in numbered[1:]:
        doc = reader.document(line, f"line {n}")
        if doc.id in known:
            continue
        if not reader.same:
            await embed_again(collection.embedder, collection.prompts["document"], [doc])
        collection.restore(doc)
        known.add(doc.id)
        added += 1
    return added


def _json(line: str, where: str) -> dict:
    try:
        value = json.loads(line)
    except ValueError:
        raise WispError(f"{where}: not JSON") from None
    if not isinstance(value, dict):
        raise WispError(f"{where}: not a JSON object")
    return value
