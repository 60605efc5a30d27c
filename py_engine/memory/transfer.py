"""A memory collection's export and import: JSON lines, a header then one document a line (its
passages with their offsets, token counts and vectors as base64 of little-endian f32), so a user can
move their memory between the page and the desktop or keep a copy. An import into a collection of
another embedding model (or other dimensions) embeds the passages' texts again; a document already
there (the same id) is left as it is. A malformed export is one WispError naming the line."""

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


def export_lines(collection, model: str) -> str:
    """The collection as JSON lines (`model`: the embedding model its vectors came from)."""
    dimensions = len(collection.documents[0].passages[0].vector) if collection.documents else 0
    lines = [json.dumps({"format": FORMAT, "version": VERSION, "model": model, "dimensions": dimensions})]
    for doc in collection.documents:
        passages = [[p.number, p.start, p.end, p.text, p.tokens, _f32(p.vector), p.place] for p in doc.passages]
        lines.append(
            json.dumps(
                {"id": doc.id, "source": doc.source, "metadata": doc.metadata, "chars": doc.chars, "passages": passages}
            )
        )
    return "\n".join(lines) + "\n"


async def import_lines(collection, text: str, model: str) -> int:
    """Adds an export's documents to the collection (`model`: the collection's embedding model);
    returns how many were added."""
    lines = [line for line in text.splitlines() if line.strip()]
    header = _json(lines[0] if lines else "", "line 1")
    if header.get("format") != FORMAT or header.get("version") != VERSION:
        raise WispError(f"line 1: not a {FORMAT} export of version {VERSION}")
    same = header.get("model") == model
    dimensions = header.get("dimensions")
    added, known = 0, {doc.id for doc in collection.documents}
    for n, line in enumerate(lines[1:], 2):
        where = f"line {n}"
        record = _json(line, where)
        try:
            doc_id, source, metadata, chars = record["id"], record["source"], record["metadata"], record["chars"]
            rows = [
                (int(a), int(b), int(c), str(d), int(e), str(f), str(g)) for a, b, c, d, e, f, g in record["passages"]
            ]
        except (KeyError, TypeError, ValueError):
            raise WispError(f"{where}: not a document of a {FORMAT} export") from None
        if not (isinstance(doc_id, str) and isinstance(source, str) and isinstance(metadata, dict)) or doc_id in known:
            continue
        if same:
            vectors = [_floats(row[5], dimensions, where) for row in rows]
        else:  # another model's vectors: the texts embedded again, as they were stored
            vectors = (
                await collection.embedder.embed([collection.prompts["document"] + row[3] for row in rows])
            ).vectors
        passages = [Passage(a, b, c, d, e, v, g) for (a, b, c, d, e, _, g), v in zip(rows, vectors)]
        collection.restore(StoredDocument(doc_id, source, metadata, int(chars), passages))
        known.add(doc_id)
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
