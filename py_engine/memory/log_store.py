"""A memory collection's records in an append-only log: the page's store, kept in OPFS (the origin
private file system) through py_engine/web/memory_files.py and worker/memory_files.js. It keeps the
records sqlite_store.py keeps (documents with source, metadata and size; passages with offsets, text,
tokens, place and an f32 vector), has its interface (documents, add, delete, close), so Collection
uses either unchanged, and refuses another embedding model's store as it does.

Why a log of our own and not SQLite in Pyodide: Pyodide's sqlite3 works in its in-memory file system,
so keeping a collection would mean writing the whole database back to OPFS after every change, and
swapping it in atomically; a log writes only what changed (one record an add or a delete) through
OPFS's synchronous access handles, so these methods stay synchronous, as SQLiteStore's are.

A collection is two files (any handle with size, read, write, truncate and flush: OPFS's in the page,
a plain file in the tests); the one whose header is valid with the higher generation holds it:

    header   HEADER bytes at 0: b"WISPMEM1", u32 length, u32 CRC-32, then JSON {format, version,
             model, dimensions, generation}; zeros after it
    records  b"WREC", kind (b"A" add, b"D" delete), u32 length, u32 CRC-32 of kind and payload, payload
             add: u32 length, JSON {id, source, metadata, chars, passages: [[number, start, end, text,
                  tokens, place], ...]}, then the passages' vectors (little-endian f32, in order)
             delete: the document's id (UTF-8)

Atomic: a record goes at the end in one write, then a flush, and the caller hears of success only
after both; a write that did not finish (a crash, a full disk) leaves a tail that starts like a record
and is cut short or fails its CRC, and reading cuts it off: the state before that change. A record
damaged in the middle (a flipped bit) is skipped and named in `damaged`; the records after it still
read, and nothing is cut. Once the dead records (deleted documents, tombstones) pass COMPACT_BYTES
and outweigh the live ones, the live ones are written to the other file, flushed, then its header
with the next generation: a crash before that header leaves the old file current. The old file is
emptied after."""

from __future__ import annotations

import json
import struct
import sys
import zlib
from array import array

from ..errors import StorageQuotaError, WispError
from .sqlite_store import MemoryStoreError, Passage, StoredDocument

FORMAT, VERSION = "wisp-memory-log", 1
MAGIC = b"WISPMEM1"
HEADER = 512  # the header's room: records start here
HEAD = struct.Struct("<8sII")  # magic, JSON length, CRC-32
RECORD = struct.Struct("<4scII")  # magic, kind, payload length, CRC-32 of kind + payload
RECORD_MAGIC = b"WREC"
COMPACT_BYTES = 1 << 20


def _mib(n: int) -> str:
    return f"{n / 1e6:.1f} MB"


class LogStore:
    def __init__(self, name: str, files, model: str, dimensions: int | None = None):
        """The collection in `files` (two handles, empty for a new one) for vectors of `model`;
        dimensions: checked against the store's when given (a store without documents takes the
        first document's). name: how errors name the store (its collection's path)."""
        self.name, self.files = name, list(files)
        self.model, self.dimensions = model, dimensions
        self.room: int | None = None  # bytes the host may still write (its quota); None: unknown
        self._read()

    # ---- reading ----

    def _read(self) -> None:
        self.damaged: list[str] = []  # what could not be read, for the user to hear
        self._docs: dict[str, StoredDocument] = {}
        self._sizes: dict[str, int] = {}  # document id -> bytes of its record
        self.dead = 0  # bytes of records that hold nothing live
        headers = [self._header(f) for f in self.files]
        valid = [(h["generation"], i) for i, h in enumerate(headers) if h is not None]
        if not valid and any(f.size() > HEADER for f in self.files):
            raise MemoryStoreError(
                self.name, "its header is damaged, so its records cannot be trusted; it is left as it is"
            )
        self.current = max(valid)[1] if valid else 0
        for i, f in enumerate(self.files):  # an older generation, or a compaction that did not finish
            if i != self.current and f.size():
                f.truncate(0)
                f.flush()
        header = headers[self.current]
        self.generation = header["generation"] if header else 0
        self.end = HEADER if header else 0
        if header is None:
            return
        if header["model"] != self.model or self.dimensions not in (None, header["dimensions"]):
            raise MemoryStoreError(
                self.name,
                f"holds vectors of {header['model']!r} ({header['dimensions']} values), not {self.model!r}"
                + (f" ({self.dimensions})" if self.dimensions else "")
                + ": open it with that model, or start another collection",
            )
        self.dimensions = header["dimensions"]
        self._replay(self.files[self.current])

    def _header(self, f) -> dict | None:
        if f.size() < HEADER:
            return None
        raw = f.read(0, HEADER)
        magic, length, crc = HEAD.unpack_from(raw)
        body = raw[HEAD.size : HEAD.size + length]
        if magic != MAGIC or len(body) != length or zlib.crc32(body) != crc:
            return None
        try:
            header = json.loads(body)
            ok = header["format"] == FORMAT and header["version"] == VERSION and int(header["dimensions"]) > 0
        except (ValueError, KeyError, TypeError):
            return None
        return header if ok else None

    def _replay(self, f) -> None:
        size, at = f.size(), HEADER
        while at < size:
            record = self._record_at(f, at, size)
            if record is None:
                following = self._next_record(f, at + 1, size)
                if following is None:
                    if f.read(at, min(len(RECORD_MAGIC), size - at)) == RECORD_MAGIC[: size - at]:
                        f.truncate(at)  # a write cut short: the state before it
                        f.flush()
                        size = at
                    else:  # not how a write starts: damage, kept for what it may still hold
                        self.damaged.append(f"bytes {at}-{size - 1} are not records")
                        self.dead += size - at
                        at = size
                    break
                self.damaged.append(f"bytes {at}-{following - 1} are not records")
                self.dead += following - at
                at = following
                continue
            kind, payload = record
            total = RECORD.size + len(payload)
            try:
                self._apply(kind, payload, total)
            except (ValueError, KeyError, TypeError, IndexError, struct.error) as exc:
                self.damaged.append(f"the record at byte {at} does not read ({type(exc).__name__})")
                self.dead += total
            at += total
        self.end = max(size, HEADER)

    def _record_at(self, f, at: int, size: int):
        """(kind, payload) of a whole record at `at` whose CRC checks, else None."""
        if size - at < RECORD.size:
            return None
        magic, kind, length, crc = RECORD.unpack(f.read(at, RECORD.size))
        if magic != RECORD_MAGIC or kind not in (b"A", b"D") or at + RECORD.size + length > size:
            return None
        payload = f.read(at + RECORD.size, length)
        return (kind, payload) if zlib.crc32(kind + payload) == crc else None

    def _next_record(self, f, start: int, size: int) -> int | None:
        """Where the next whole record after damage starts (None: none does)."""
        rest = f.read(start, size - start) if start < size else b""
        found = rest.find(RECORD_MAGIC)
        while found >= 0:
            if self._record_at(f, start + found, size) is not None:
                return start + found
            found = rest.find(RECORD_MAGIC, found + 1)
        return None

    def _apply(self, kind: bytes, payload: bytes, total: int) -> None:
        if kind == b"D":
            gone = payload.decode()
            self.dead += total + self._sizes.pop(gone, 0)
            self._docs.pop(gone, None)
            return
        (length,) = struct.unpack_from("<I", payload)
        info = json.loads(payload[4 : 4 + length])
        vectors = array("f")
        vectors.frombytes(payload[4 + length :])
        if sys.byteorder != "little":
            vectors.byteswap()
        rows, dims = info["passages"], self.dimensions
        if len(vectors) != len(rows) * dims:
            raise ValueError("its vectors do not match its passages")
        passages = [
            Passage(int(n), int(s), int(e), str(text), int(tokens), vectors[i * dims : (i + 1) * dims], str(place))
            for i, (n, s, e, text, tokens, place) in enumerate(rows)
        ]
        doc = StoredDocument(str(info["id"]), str(info["source"]), dict(info["metadata"]), int(info["chars"]), passages)
        self.dead += self._sizes.get(doc.id, 0)  # the same id again: the later one holds
        self._docs[doc.id], self._sizes[doc.id] = doc, total

    # ---- SQLiteStore's interface ----

    def documents(self) -> list[StoredDocument]:
        """Every document with its passages, in the order they were added."""
        return list(self._docs.values())

    def add(self, document: StoredDocument) -> None:
        self.add_many([document])

    def add_many(self, documents: list[StoredDocument]) -> None:
        """Documents (an import's batch) appended in one write and one flush: all of them, or (an
        error reported) none; a crash mid-write keeps the whole records before the cut."""
        seen = set()
        for doc_id in (d.id for d in documents):
            if doc_id in self._docs or doc_id in seen:
                raise WispError(f"{self.name}: a document {doc_id!r} is stored already")
            seen.add(doc_id)
        dimensions = self.dimensions
        for document in documents:
            dims = {len(p.vector) for p in document.passages}
            if dimensions is None and len(dims) == 1:
                dimensions = next(iter(dims))
            if dims != {dimensions}:
                raise WispError(f"{document.source}: vectors of {sorted(dims)} values for a store of {dimensions}")
        records = [_record(b"A", _add_payload(document)) for document in documents]
        needed = sum(map(len, records)) + (HEADER if self.end == 0 else 0)
        if self.room is not None and needed > self.room:
            what = documents[0].source if len(documents) == 1 else f"{len(documents)} documents"
            raise StorageQuotaError(
                f"Not enough storage for {what}: {'its' if len(documents) == 1 else 'their'} passages need "
                f"{_mib(needed)}, {_mib(max(0, self.room))} available; nothing was stored"
            )
        if not records:
            return
        self.dimensions = dimensions
        if self.end == 0:  # a new collection: its header first, the first record after it
            self._write_header(self.files[self.current], 1)
            self.generation, self.end = 1, HEADER
        self._append(b"".join(records))
        for document, record in zip(documents, records):
            self._docs[document.id], self._sizes[document.id] = document, len(record)

    def delete(self, document_id: str) -> None:
        if document_id not in self._docs:
            return
        record = _record(b"D", document_id.encode())
        self._append(record)
        del self._docs[document_id]
        self.dead += len(record) + self._sizes.pop(document_id)
        self._compact()

    def close(self) -> None:
        """Nothing is held between calls: every change is flushed before its call returns."""

    # ---- what the page shows ----

    @property
    def bytes(self) -> int:
        return self.end

    def fingerprint(self) -> tuple:
        """What another writer (the page open in a second tab) would change: refresh() compares it."""
        return (self.current, self.generation, self.end)

    def refresh(self, files) -> bool:
        """The store on `files` (the same collection opened again); True when it changed since it
        was read (another tab wrote it), then it is read again."""
        self.files = list(files)
        headers = [self._header(f) for f in self.files]
        valid = [(h["generation"], i) for i, h in enumerate(headers) if h is not None]
        current = max(valid)[1] if valid else 0
        size = self.files[current].size()
        seen = (current, headers[current]["generation"] if headers[current] else 0, max(size, HEADER) if size else 0)
        if seen == self.fingerprint():
            return False
        self._read()
        return True

    # ---- writing ----

    def _write_header(self, f, generation: int) -> None:
        body = json.dumps(
            {
                "format": FORMAT,
                "version": VERSION,
                "model": self.model,
                "dimensions": self.dimensions,
                "generation": generation,
            }
        ).encode()
        head = HEAD.pack(MAGIC, len(body), zlib.crc32(body)) + body
        if len(head) > HEADER:
            raise WispError(f"{self.name}: the model's name is too long for the store's header")
        f.write(0, head + bytes(HEADER - len(head)))
        f.flush()

    def _append(self, record: bytes) -> None:
        f = self.files[self.current]
        try:
            f.write(self.end, record)
            f.flush()
        except BaseException:
            try:  # the bytes that did land go (reading would cut them off anyway)
                f.truncate(self.end)
                f.flush()
            except Exception:  # noqa: BLE001 - the write's own error is the one to report
                pass
            raise
        self.end += len(record)
        if self.room is not None:
            self.room -= len(record)

    def _compact(self) -> None:
        live = self.end - HEADER - self.dead
        if self.dead < COMPACT_BYTES or self.dead <= live:
            return
        new = 1 - self.current
        target, at, sizes = self.files[new], HEADER, {}
        try:
            target.truncate(0)
            for doc in self._docs.values():
                record = _record(b"A", _add_payload(doc))
                target.write(at, record)
                at += len(record)
                sizes[doc.id] = len(record)
            target.flush()
            self._write_header(target, self.generation + 1)  # last: until it is there, the old file holds
        except Exception:  # noqa: BLE001 - no room for a copy: the log still holds everything, unshrunk
            try:
                target.truncate(0)
                target.flush()
            except Exception:  # noqa: BLE001
                pass
            return
        old = self.files[self.current]
        old.truncate(0)
        old.flush()
        self.current, self.generation, self.end, self.dead, self._sizes = new, self.generation + 1, at, 0, sizes


def _record(kind: bytes, payload: bytes) -> bytes:
    return RECORD.pack(RECORD_MAGIC, kind, len(payload), zlib.crc32(kind + payload)) + payload


def _add_payload(document: StoredDocument) -> bytes:
    rows = [[p.number, p.start, p.end, p.text, p.tokens, p.place] for p in document.passages]
    info = {
        "id": document.id,
        "source": document.source,
        "metadata": document.metadata,
        "chars": document.chars,
        "passages": rows,
    }
    head = json.dumps(info, ensure_ascii=False).encode()
    vectors = array("f")
    for p in document.passages:
        vectors.extend(p.vector)
    if sys.byteorder != "little":
        vectors.byteswap()
    return struct.pack("<I", len(head)) + head + vectors.tobytes()
