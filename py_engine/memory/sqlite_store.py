"""A memory collection's documents and passages in one SQLite file (the desktop's store; the page
keeps the same records in OPFS). A document and all its passages go in, or out, in one transaction,
so a failure leaves the file as it was. The file also records the embedding model and dimensions its
vectors came from: opening it with another is refused (the vectors would not compare)."""

from __future__ import annotations

import json
import sqlite3
from array import array
from collections.abc import Sequence
from dataclasses import dataclass, field

from ..errors import WispError

SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS documents (id TEXT PRIMARY KEY, source TEXT NOT NULL, metadata TEXT NOT NULL,
                                      chars INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS passages (document TEXT NOT NULL REFERENCES documents(id) ON DELETE CASCADE,
                                     number INTEGER NOT NULL, start INTEGER NOT NULL, end INTEGER NOT NULL,
                                     text TEXT NOT NULL, tokens INTEGER NOT NULL, vector BLOB NOT NULL,
                                     place TEXT NOT NULL DEFAULT '', PRIMARY KEY (document, number));
"""


class MemoryStoreError(WispError):
    """A memory store that cannot be used (another model's vectors, a damaged file). Names the file."""

    def __init__(self, path, problem: str):
        self.path, self.problem = str(path), problem
        super().__init__(f"{self.path}: {problem}")


@dataclass
class Passage:
    number: int  # its place in its document
    start: int  # text[start:end] of the document
    end: int
    text: str
    tokens: int
    vector: Sequence[float]  # array('f') once stored: 4 bytes a value, not a Python float's 32
    place: str = ""  # where in its document it starts: "page 3", "Garden > Tomatoes" ("": not known)


@dataclass
class StoredDocument:
    id: str
    source: str  # its name (a file name, a URL, what the caller said)
    metadata: dict
    chars: int
    passages: list[Passage] = field(default_factory=list)


class SQLiteStore:
    def __init__(self, path, model: str, dimensions: int):
        """Opens (or creates) the store at `path` for vectors of `model` with `dimensions` values."""
        self.path = str(path)
        try:
            self._db = sqlite3.connect(self.path)
            self._db.execute("PRAGMA foreign_keys = ON")
            with self._db:
                self._db.executescript(SCHEMA)
                stored = dict(self._db.execute("SELECT key, value FROM meta"))
                if not stored:
                    self._db.executemany(
                        "INSERT INTO meta VALUES (?, ?)", [("model", model), ("dimensions", str(dimensions))]
                    )
        except sqlite3.DatabaseError as exc:
            raise MemoryStoreError(self.path, f"not a memory store SQLite can read ({exc})") from None
        if stored and (stored.get("model"), stored.get("dimensions")) != (model, str(dimensions)):
            raise MemoryStoreError(
                self.path,
                f"holds vectors of {stored.get('model')!r} ({stored.get('dimensions')} values), "
                f"not {model!r} ({dimensions}): open it with that model, or start another store",
            )

    def documents(self) -> list[StoredDocument]:
        """Every document with its passages, in the order they were added."""
        docs = {
            row[0]: StoredDocument(row[0], row[1], json.loads(row[2]), row[3])
            for row in self._db.execute("SELECT id, source, metadata, chars FROM documents ORDER BY rowid")
        }
        rows = self._db.execute(
            "SELECT document, number, start, end, text, tokens, vector, place FROM passages ORDER BY document, number"
        )
        for doc, number, start, end, text, tokens, blob, place in rows:
            docs[doc].passages.append(Passage(number, start, end, text, tokens, array("f", blob), place))
        return list(docs.values())

    def add(self, document: StoredDocument) -> None:
        self.add_many([document])

    def add_many(self, documents: list[StoredDocument]) -> None:
        """Documents (an import's batch) in one transaction: all of them, or none."""
        with self._db:
            for document in documents:
                self._db.execute(
                    "INSERT INTO documents VALUES (?, ?, ?, ?)",
                    (document.id, document.source, json.dumps(document.metadata), document.chars),
                )
                self._db.executemany(
                    "INSERT INTO passages VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                    [
                        (
                            document.id,
                            p.number,
                            p.start,
                            p.end,
                            p.text,
                            p.tokens,
                            array("f", p.vector).tobytes(),
                            p.place,
                        )
                        for p in document.passages
                    ],
                )

    def delete(self, document_id: str) -> None:
        with self._db:
            self._db.execute("DELETE FROM documents WHERE id = ?", (document_id,))

    def close(self) -> None:
        self._db.close()
