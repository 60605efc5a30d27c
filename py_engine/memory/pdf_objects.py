"""A PDF file's objects (ISO 32000-1 §7.5): the cross-reference sections from `startxref` back through
/Prev (classic tables, xref streams, and the hybrid files that have both), so an incremental update's
objects replace the ones they revise; objects in object streams; references resolved with guards
against cycles. A file whose cross-reference data is missing or wrong (a cut-off download, an edited
file) is read by scanning it for `N G obj`, as other readers do."""

import re

from .limits import ReadLimits
from .pdf_crypt import decrypt_strings, object_key, rc4
from .pdf_filters import Budget, decode
from .pdf_syntax import Keyword, Lexer, PdfLimit, PdfProblem, Ref, Stream

_STARTXREF = re.compile(rb"startxref[\x00\t\n\f\r ]+(\d+)")
_OBJECT_HEADER = re.compile(rb"(\d+)[\x00\t\n\f\r ]+(\d+)[\x00\t\n\f\r ]+obj\b")
_ANY_OBJECT = re.compile(rb"(?<![0-9])(\d+)[\x00\t\n\f\r ]+\d+[\x00\t\n\f\r ]+obj\b")
_SUBSECTION = re.compile(rb"(\d+)[ \t]+(\d+)[ \t]*[\r\n]")
_XREF_ROW = re.compile(rb"(\d{1,10})[ \t]+(\d{1,5})[ \t]+([nf])")
_END_STREAM = re.compile(rb"\r?\n?endstream")
_RESERVED = object()  # an xref stream entry of a type the spec reserves: read as a null reference
_MISSING = object()  # what _object_at finds where an offset holds no such object
_MAX_HOPS = 32  # references to references before a chain is called a cycle


class PdfFile:
    """`offsets` maps an object number to its byte offset, to (object stream number, index) for an
    object inside an object stream, or to None for a free (deleted) object."""

    def __init__(self, data: bytes, limits: ReadLimits):
        self.data = data
        self.limits = limits
        self.lexer = Lexer(data, limits.max_depth)
        self.budget = Budget(limits.max_stream_bytes, limits.max_decoded_bytes)
        self.offsets: dict[int, int | tuple[int, int] | None] = {}
        self._objects: dict[int, object] = {}
        self._loading: set[int] = set()
        self._object_streams: dict[int, tuple[Lexer, int, list]] = {}
        self._scanned = False
        self._table_freed: frozenset[int] = frozenset()
        self._key: bytes | None = None  # the file key of an encrypted file (pdf_crypt.py)
        self._encrypt_num: int | None = None  # the /Encrypt dictionary's object, never encrypted itself
        try:
            self.trailer = self._read_sections()
        except PdfLimit:
            raise
        except PdfProblem:
            self.trailer = {}
        if not isinstance(self.resolve(self.trailer.get("Root")), dict) and not self._scanned:
            self.trailer = self._scan()

    def resolve(self, obj):
        """The object a reference names (through references to references); other objects as they are."""
        for _ in range(_MAX_HOPS):
            if not isinstance(obj, Ref):
                return obj
            obj = self._load(obj.num)
        raise PdfProblem("its references run in a cycle")

    def get(self, dictionary: dict, key: str, default=None):
        value = self.resolve(dictionary.get(key, default))
        return default if value is None else value

    def decode(self, stream: Stream) -> bytes:
        d = stream.dict
        return decode(stream.raw, self.resolve(d.get("Filter")), self.resolve(d.get("DecodeParms")), self.budget)

    def decrypt_with(self, key: bytes, encrypt) -> None:
        """Decrypt the objects read from now on with the file key; those read before are dropped."""
        self._key = key
        self._encrypt_num = encrypt.num if isinstance(encrypt, Ref) else None
        self._objects.clear()
        self._object_streams.clear()

    # The cross-reference sections

    def _read_sections(self) -> dict:
        found = _STARTXREF.match(self.data, max(0, self.data.rfind(b"startxref")))
        if found is None:
            raise PdfProblem("no startxref")
        trailer, pos, seen = {}, int(found[1]), set()
        while isinstance(pos, int):
            if pos in seen:
                break  # a /Prev chain that loops back: everything on it has been read
            seen.add(pos)
            section = self._read_section(pos)
            for key, value in section.items():
                trailer.setdefault(key, value)  # the newest section's entries win
            if isinstance(section.get("XRefStm"), int):  # a hybrid file's xref stream, read after its table
                self._read_section(section["XRefStm"], revive=self._table_freed)
            pos = section.get("Prev")
        return trailer

    def _read_section(self, pos: int, revive: frozenset[int] = frozenset()) -> dict:
        pos = self.lexer.skip(pos)
        if self.data.startswith(b"xref", pos):
            return self._read_table(pos + 4)
        stream = self._object_at(pos, None)
        if isinstance(stream, Stream) and stream.dict.get("Type") == "XRef":
            return self._read_xref_stream(stream, revive)
        raise PdfProblem("startxref does not point at cross-reference data")

    def _read_table(self, pos: int) -> dict:
        """A classic table's entries and its trailer. The objects it newly marks free are kept in
        _table_freed: a hybrid file hides its compressed objects so, for its /XRefStm to revive."""
        data, freed = self.data, set()
        while True:
            pos = self.lexer.skip(pos)
            if data.startswith(b"trailer", pos):
                trailer, _ = self.lexer.read(pos + 7)
                if not isinstance(trailer, dict):
                    raise PdfProblem("its trailer is not a dictionary")
                self._table_freed = frozenset(freed)
                return trailer
            head = _SUBSECTION.match(data, pos)
            if head is None:
                raise PdfProblem("a cross-reference table is damaged")
            first, count = int(head[1]), int(head[2])
            if count * 18 > len(data) - head.end():  # rows are 20 bytes: a count the file cannot hold is damage
                raise PdfProblem("a cross-reference table is damaged")
            self._count(count)
            pos = head.end()
            for num in range(first, first + count):
                row = _XREF_ROW.match(data, self.lexer.skip(pos))
                if row is None:
                    raise PdfProblem("a cross-reference table is damaged")
                pos = row.end()
                if row[3] == b"n":
                    self.offsets.setdefault(num, int(row[1]))
                elif num not in self.offsets:
                    self.offsets[num] = None
                    freed.add(num)

    def _read_xref_stream(self, stream: Stream, revive: frozenset[int] = frozenset()) -> dict:
        d = stream.dict
        widths, size = d.get("W"), d.get("Size")
        if not (
            isinstance(widths, list) and len(widths) == 3 and all(isinstance(w, int) and 0 <= w <= 8 for w in widths)
        ):
            raise PdfProblem("an xref stream's /W is not three small integers")
        index = d.get("Index", [0, size])
        if not (isinstance(index, list) and all(isinstance(n, int) and n >= 0 for n in index)):
            raise PdfProblem("an xref stream's /Index is not a list of counts")
        rows, pos, row_size = self.decode(stream), 0, sum(widths)
        for first, count in zip(index[::2], index[1::2]):
            count = min(count, (len(rows) - pos) // max(row_size, 1))  # a damaged /Index may promise more
            self._count(count)
            for num in range(first, first + count):
                fields = []
                for width in widths:
                    fields.append(int.from_bytes(rows[pos : pos + width], "big"))
                    pos += width
                kind = fields[0] if widths[0] else 1
                entry = {0: None, 1: fields[1], 2: (fields[1], fields[2])}.get(kind, _RESERVED)
                if entry is not _RESERVED and (num in revive and entry is not None or num not in self.offsets):
                    self.offsets[num] = entry
        return d

    def _count(self, more: int) -> None:
        if len(self.offsets) + more > self.limits.max_objects:
            raise PdfLimit(f"it has more than {self.limits.max_objects:,} objects")

    def _scan(self) -> dict:
        """Offsets and a trailer found by scanning the whole file, for when its cross-reference data fails."""
        self._scanned = True
        self.offsets, self._objects = {}, {}
        for m in _ANY_OBJECT.finditer(self.data):
            self._count(1)
            self.offsets[int(m[1])] = m.start()  # a later definition wins, as an incremental update's does
        trailer, at = {}, self.data.rfind(b"trailer")
        if at >= 0:
            try:
                trailer, _ = self.lexer.read(at + 7)
            except PdfLimit:
                raise
            except PdfProblem:
                pass
            trailer = trailer if isinstance(trailer, dict) else {}
        for num in list(self.offsets):
            try:
                obj = self._load(num)
            except PdfLimit:
                raise
            except PdfProblem:
                continue
            if isinstance(obj, Stream) and obj.dict.get("Type") == "ObjStm":
                self._index_object_stream(num)
            elif isinstance(obj, Stream) and obj.dict.get("Type") == "XRef" and "Root" in obj.dict:
                trailer = trailer if "Root" in trailer else obj.dict
            elif isinstance(obj, dict) and obj.get("Type") == "Catalog" and "Root" not in trailer:
                trailer = {**trailer, "Root": Ref(num, 0)}
        if not isinstance(self.resolve(trailer.get("Root")), dict):
            raise PdfProblem("it has no document catalog (a truncated or damaged file?)")
        return trailer

    def _index_object_stream(self, num: int) -> None:
        _, _, members = self._object_stream(num)
        for index, (member, _) in enumerate(members):
            self.offsets.setdefault(member, (num, index))

    # Objects

    def _load(self, num: int):
        if num in self._objects:
            return self._objects[num]
        if num in self._loading:
            raise PdfProblem(f"object {num} is defined through itself (a reference cycle)")
        self._loading.add(num)
        try:
            entry = self.offsets.get(num)
            if isinstance(entry, tuple):
                obj = self._in_object_stream(num, *entry)
            elif isinstance(entry, int):
                obj = self._object_at(entry, num)
            else:
                obj = None
        finally:
            self._loading.discard(num)
        if obj is _MISSING:
            if not self._scanned:  # its offset is wrong: trust no offset, scan the file once
                self.trailer = {**self._scan(), **self.trailer}
                return self._load(num)
            obj = None
        self._objects[num] = obj
        return obj

    def _object_at(self, pos: int, num: int | None):
        """The object `num` (any number when None) defined at `pos`; _MISSING when it is not there."""
        header = _OBJECT_HEADER.match(self.data, self.lexer.skip(pos)) if 0 <= pos < len(self.data) else None
        if header is None or (num is not None and int(header[1]) != num):
            return _MISSING
        obj, pos = self.lexer.read(header.end())
        if isinstance(obj, dict):
            after = self.lexer.skip(pos)
            if self.data.startswith(b"stream", after):
                start = after + 6
                start += 2 if self.data.startswith(b"\r\n", start) else self.data.startswith(b"\n", start)
                obj = Stream(obj, memoryview(self.data)[start : self._stream_end(obj, start)])
        if self._key and num is not None and num != self._encrypt_num:
            key = object_key(self._key, num, int(header[2]))
            if not isinstance(obj, Stream):
                return decrypt_strings(obj, key)
            if obj.dict.get("Type") != "XRef":  # cross-reference streams are never encrypted
                return Stream(decrypt_strings(obj.dict, key), rc4(key, obj.raw))
        return obj

    def _stream_end(self, d: dict, start: int) -> int:
        """Where a stream's data ends: by its /Length when `endstream` follows there, else at the
        next `endstream` (writers get /Length wrong), else at the end of a cut-off file."""
        try:
            length = self.resolve(d.get("Length"))
        except PdfLimit:
            raise
        except PdfProblem:
            length = None
        if isinstance(length, int) and length >= 0:
            end = start + length
            if _END_STREAM.match(self.data, self.lexer.skip(end)) or self.data.startswith(b"endstream", end):
                return end
        found = _END_STREAM.search(self.data, start)
        return found.start() if found else len(self.data)

    def _object_stream(self, num: int) -> tuple[Lexer, int, list]:
        if num not in self._object_streams:
            stream = self._load(num)
            if not isinstance(stream, Stream):
                raise PdfProblem(f"object stream {num} is not a stream")
            count, first = self.resolve(stream.dict.get("N")), self.resolve(stream.dict.get("First"))
            if not (isinstance(count, int) and isinstance(first, int) and 0 <= count and 0 <= first):
                raise PdfProblem(f"object stream {num} has no /N or /First")
            self._count(count)
            lexer, pos, members = Lexer(self.decode(stream), self.limits.max_depth), 0, []
            for _ in range(count):
                member, pos = lexer.read(pos)
                offset, pos = lexer.read(pos)
                members.append((member, offset))
            self._object_streams[num] = (lexer, first, members)
        return self._object_streams[num]

    def _in_object_stream(self, num: int, stream_num: int, index: int):
        lexer, first, members = self._object_stream(stream_num)
        if not (index < len(members) and members[index][0] == num):  # a wrong index: look the number up
            index = next((i for i, (member, _) in enumerate(members) if member == num), None)
            if index is None:
                return None
        offset = members[index][1]
        if not isinstance(offset, int):
            raise PdfProblem(f"object stream {stream_num} has a bad offset")
        obj, _ = lexer.read(first + offset)
        return None if type(obj) is Keyword else obj
