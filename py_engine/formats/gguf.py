"""GGUF: our own reader of llama.cpp's model file format (versions 2 and 3, little-endian).

Layout: magic "GGUF", uint32 version, uint64 tensor count, uint64 metadata count, the metadata
(key string, uint32 value type, value), the tensor infos (name, uint32 n_dims, uint64 dims[n_dims],
uint32 ggml type, uint64 offset relative to the data section), then padding up to
`general.alignment` (default 32), then the data section. Strings are a uint64 byte length and UTF-8
bytes; arrays a uint32 item type, a uint64 count and the items.

Only the header is read, through `read_at(offset, length)`, in chunks: in the browser that is one
HTTP range request per chunk, and the tensor bytes are never touched here. Every count and length
is checked against the bytes left in the file before anything is allocated, so a corrupt header
fails with a `ModelFileError` naming the file and the spot instead of exhausting memory.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Callable
from dataclasses import dataclass, field

from ..errors import ModelFileError
from .safetensors import TensorInfo

MAGIC = b"GGUF"
SUPPORTED_VERSIONS = (2, 3)
DEFAULT_ALIGNMENT = 32
MAX_DIMS = 4  # GGML_MAX_DIMS
MAX_ARRAY_NESTING = 8
CHUNK = 1 << 20  # bytes per read_at call while parsing the header

# ggml type id -> (name, elements per block, bytes per block); the names are gguf-py's
# GGMLQuantizationType names, which `TensorInfo.dtype` carries. Ids 4, 5 (Q4_2, Q4_3) and 31-33,
# 36-38 (the Q4_0_4_4 / IQ4_NL_4_4 repacked layouts) were removed from ggml and never appear in files.
GGML_TYPES: dict[int, tuple[str, int, int]] = {
    0: ("F32", 1, 4),
    1: ("F16", 1, 2),
    2: ("Q4_0", 32, 18),
    3: ("Q4_1", 32, 20),
    6: ("Q5_0", 32, 22),
    7: ("Q5_1", 32, 24),
    8: ("Q8_0", 32, 34),
    9: ("Q8_1", 32, 40),
    10: ("Q2_K", 256, 84),
    11: ("Q3_K", 256, 110),
    12: ("Q4_K", 256, 144),
    13: ("Q5_K", 256, 176),
    14: ("Q6_K", 256, 210),
    15: ("Q8_K", 256, 292),
    16: ("IQ2_XXS", 256, 66),
    17: ("IQ2_XS", 256, 74),
    18: ("IQ3_XXS", 256, 98),
    19: ("IQ1_S", 256, 50),
    20: ("IQ4_NL", 32, 18),
    21: ("IQ3_S", 256, 110),
    22: ("IQ2_S", 256, 82),
    23: ("IQ4_XS", 256, 136),
    24: ("I8", 1, 1),
    25: ("I16", 1, 2),
    26: ("I32", 1, 4),
    27: ("I64", 1, 8),
    28: ("F64", 1, 8),
    29: ("IQ1_M", 256, 56),
    30: ("BF16", 1, 2),
    34: ("TQ1_0", 256, 54),
    35: ("TQ2_0", 256, 66),
    39: ("MXFP4", 32, 17),
    40: ("NVFP4", 64, 36),
    41: ("Q1_0", 128, 18),
}
GGML_BLOCKS: dict[str, tuple[int, int]] = {name: (block, size) for name, block, size in GGML_TYPES.values()}

# Metadata value types.
UINT8, INT8, UINT16, INT16, UINT32, INT32, FLOAT32, BOOL, STRING, ARRAY, UINT64, INT64, FLOAT64 = range(13)
_SCALARS: dict[int, struct.Struct] = {
    UINT8: struct.Struct("<B"),
    INT8: struct.Struct("<b"),
    UINT16: struct.Struct("<H"),
    INT16: struct.Struct("<h"),
    UINT32: struct.Struct("<I"),
    INT32: struct.Struct("<i"),
    FLOAT32: struct.Struct("<f"),
    BOOL: struct.Struct("<?"),
    UINT64: struct.Struct("<Q"),
    INT64: struct.Struct("<q"),
    FLOAT64: struct.Struct("<d"),
}
_TYPE_NAMES = (
    "uint8",
    "int8",
    "uint16",
    "int16",
    "uint32",
    "int32",
    "float32",
    "bool",
    "string",
    "array",
    "uint64",
    "int64",
    "float64",
)
# The fewest bytes one value of each type takes: what the absurd-count guard multiplies by.
_MIN_BYTES = {**{t: s.size for t, s in _SCALARS.items()}, STRING: 8, ARRAY: 12}

_U32 = struct.Struct("<I")
_U64 = struct.Struct("<Q")


def block_info(dtype: str) -> tuple[int, int]:
    """(elements per block, bytes per block) of a ggml type name such as "Q4_K"."""
    return GGML_BLOCKS[dtype]


@dataclass
class GGUFFile:
    path: str
    version: int
    alignment: int
    data_offset: int  # absolute byte offset of the data section
    metadata: dict = field(default_factory=dict)  # key -> int | float | bool | str | list
    tensors: dict[str, TensorInfo] = field(default_factory=dict)  # in file order
    metadata_types: dict = field(default_factory=dict)  # key -> value type, or (ARRAY, item type)


def starts_like_gguf(path) -> bool:
    """Does the file at path begin with GGUF's magic? (Its name need not end in .gguf.)"""
    try:
        with open(path, "rb") as file:
            return file.read(len(MAGIC)) == MAGIC
    except OSError:
        return False


def read_gguf(path) -> GGUFFile:
    """Parse the header of the GGUF file at `path` (the tensor data is not read)."""
    path = str(path)
    try:
        size = os.path.getsize(path)
        with open(path, "rb") as file:

            def read_at(offset: int, length: int) -> bytes:
                file.seek(offset)
                return file.read(length)

            return parse_gguf(read_at, size, path)
    except FileNotFoundError:
        raise ModelFileError(path, "file not found") from None
    except IsADirectoryError:
        raise ModelFileError(path, "is a directory, not a GGUF file") from None
    except OSError as err:
        raise ModelFileError(path, f"cannot read file: {err.strerror or err}") from None


def parse_gguf(read_at: Callable[[int, int], bytes], size: int, path) -> GGUFFile:
    """Parse a GGUF header from a random-access source of `size` bytes.

    read_at(offset, length) returns the bytes at [offset, offset + length) (fewer only at the end
    of the file); it is called with increasing offsets, CHUNK bytes at a time, and only for the
    header. Raises ModelFileError(path, ...) for anything malformed."""
    return _Parser(read_at, size, str(path)).parse()


class _Parser:
    def __init__(self, read_at, size: int, path: str):
        self.read_at, self.size, self.path = read_at, size, path
        self.buf = b""
        self.base = 0  # file offset of buf[0]
        self.pos = 0  # cursor inside buf
        self.where = "the file header"  # what is being read, for error messages

    # ---- errors ----

    def fail(self, problem: str):
        raise ModelFileError(self.path, problem)

    def offset(self) -> int:
        return self.base + self.pos

    def truncated(self, needed: int):
        self.fail(
            f"truncated: the file ends inside {self.where} (needs {needed} bytes at offset {self.offset()}, "
            f"the file has {self.size} bytes)"
        )

    # ---- buffered reads ----

    def ensure(self, count: int) -> None:
        """Make buf[pos:pos + count] available."""
        if self.pos + count <= len(self.buf):
            return
        start = self.offset()
        if start + count > self.size:
            self.truncated(count)
        keep = self.buf[self.pos :]
        want = min(max(count - len(keep), CHUNK), self.size - start - len(keep))
        data = self.read_at(start + len(keep), want)
        if len(data) < count - len(keep):
            self.truncated(count)
        self.buf, self.base, self.pos = keep + bytes(data), start, 0

    def unpack(self, fmt: struct.Struct):
        self.ensure(fmt.size)
        (value,) = fmt.unpack_from(self.buf, self.pos)
        self.pos += fmt.size
        return value

    def take(self, count: int) -> bytes:
        self.ensure(count)
        data = self.buf[self.pos : self.pos + count]
        self.pos += count
        return data

    def check_count(self, count: int, item_bytes: int, what: str) -> None:
        """Refuse a count or length whose items could not fit in the rest of the file."""
        left = self.size - self.offset()
        if count * item_bytes > left:
            need = f"{count} items need at least {count * item_bytes} bytes, " if item_bytes > 1 else ""
            self.fail(
                f"{self.where}: {what} {count} runs past the end of the file ({need}only {left} bytes "
                f"remain): truncated or corrupt"
            )

    def string(self, strict: bool = True) -> str:
        length = self.unpack(_U64)
        self.check_count(length, 1, "string length")
        raw = self.take(length)
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            if strict:
                self.fail(f"{self.where}: string is not valid UTF-8 ({raw[:40]!r})")
            return raw.decode("utf-8", errors="replace")

    # ---- metadata values ----

    def value(self, value_type: int, depth: int = 0):
        scalar = _SCALARS.get(value_type)
        if scalar is not None:
            return self.unpack(scalar)
        if value_type == STRING:
            return self.string(strict=False)
        if value_type == ARRAY:
            item_type = self.unpack(_U32)
            count = self.unpack(_U64)
            return self.array(item_type, count, depth)
        self.fail(f"{self.where} has unknown value type {value_type}")

    def array(self, item_type: int, count: int, depth: int) -> list:
        if item_type not in _MIN_BYTES:
            self.fail(f"{self.where} is an array of unknown value type {item_type}")
        self.check_count(count, _MIN_BYTES[item_type], "array length")
        scalar = _SCALARS.get(item_type)
        if scalar is not None:
            values = []
            # Unpack at most a chunk at a time: struct needs the bytes in one piece.
            per_step = max(1, CHUNK // scalar.size)
            while len(values) < count:
                step = min(per_step, count - len(values))
                self.ensure(step * scalar.size)
                values.extend(struct.unpack_from(f"<{step}{scalar.format[-1]}", self.buf, self.pos))
                self.pos += step * scalar.size
            return values
        if item_type == STRING:
            return self.string_array(count)
        if depth >= MAX_ARRAY_NESTING:
            self.fail(f"{self.where}: arrays nested more than {MAX_ARRAY_NESTING} deep")
        return [self.value(ARRAY, depth + 1) for _ in range(count)]

    def string_array(self, count: int) -> list[str]:
        """The hot loop of vocabulary parsing (50-250k strings): cursor kept in locals."""
        out: list[str] = []
        append = out.append
        unpack_u64 = _U64.unpack_from
        buf, pos = self.buf, self.pos
        for _ in range(count):
            if pos + 8 > len(buf):
                self.pos = pos
                self.ensure(8)
                buf, pos = self.buf, self.pos
            (length,) = unpack_u64(buf, pos)
            pos += 8
            if pos + length > len(buf):
                self.pos = pos
                self.check_count(length, 1, "string length")
                self.ensure(length)
                buf, pos = self.buf, self.pos
            raw = buf[pos : pos + length]
            pos += length
            try:
                append(raw.decode("utf-8"))
            except UnicodeDecodeError:
                append(raw.decode("utf-8", errors="replace"))
        self.pos = pos
        return out

    # ---- the file ----

    def parse(self) -> GGUFFile:
        if self.size < 4:
            self.fail(f"file too short to be GGUF ({self.size} bytes)")
        magic = self.take(4)
        if magic != MAGIC:
            self.fail(f"not a GGUF file (bad magic {magic!r}, expected {MAGIC!r})")
        version = self.unpack(_U32)
        if version not in SUPPORTED_VERSIONS:
            if version & 0xFFFF == 0 and (version >> 24) in SUPPORTED_VERSIONS:
                self.fail(f"big-endian GGUF (version {version >> 24}) is not supported")
            self.fail(f"unsupported GGUF version {version} (supported: 2 and 3)")
        tensor_count = self.unpack(_U64)
        kv_count = self.unpack(_U64)
        self.check_count(kv_count, 8 + 4 + 1, "metadata count")

        metadata: dict = {}
        types: dict = {}
        for index in range(kv_count):
            self.where = f"the key of metadata entry #{index}"
            key = self.string()
            if key in metadata:
                self.fail(f"duplicate metadata key {key!r}")
            self.where = f"metadata key {key!r}"
            value_type = self.unpack(_U32)
            if value_type == ARRAY:
                item_type = self.unpack(_U32)
                count = self.unpack(_U64)
                metadata[key] = self.array(item_type, count, 0)
                types[key] = (ARRAY, item_type)
            else:
                metadata[key] = self.value(value_type)
                types[key] = value_type

        alignment = metadata.get("general.alignment", DEFAULT_ALIGNMENT)
        if (
            isinstance(alignment, bool)
            or not isinstance(alignment, int)
            or alignment <= 0
            or alignment & (alignment - 1)
        ):
            self.fail(f"general.alignment must be a positive power of two, got {alignment!r}")

        self.where = "the file header"
        self.check_count(tensor_count, 8 + 1 + 4 + 4 + 8, "tensor count")
        raw_infos = []
        names = set()
        for index in range(tensor_count):
            self.where = f"the name of tensor info #{index}"
            name = self.string()
            if name in names:
                self.fail(f"duplicate tensor name {name!r}")
            names.add(name)
            self.where = f"the info of tensor {name!r}"
            n_dims = self.unpack(_U32)
            if n_dims > MAX_DIMS:
                self.fail(f"tensor {name!r} has {n_dims} dimensions (at most {MAX_DIMS})")
            dims = [self.unpack(_U64) for _ in range(n_dims)]
            type_id = self.unpack(_U32)
            offset = self.unpack(_U64)
            raw_infos.append((name, dims, type_id, offset))

        end_of_infos = self.offset()
        data_offset = -(-end_of_infos // alignment) * alignment
        if raw_infos and data_offset > self.size:
            self.fail(
                f"truncated: the data section would start at byte {data_offset}, past the end of the file "
                f"({self.size} bytes)"
            )
        tensors = {}
        for name, dims, type_id, offset in raw_infos:
            tensors[name] = self.tensor_info(name, dims, type_id, offset, data_offset, alignment)
        return GGUFFile(self.path, version, alignment, data_offset, metadata, tensors, types)

    def tensor_info(self, name, dims, type_id, offset, data_offset, alignment) -> TensorInfo:
        if type_id not in GGML_TYPES:
            self.fail(f"tensor {name!r} has unknown ggml type id {type_id}")
        dtype, block, block_bytes = GGML_TYPES[type_id]
        count = 1
        for dim in dims:
            count *= dim
        if count > self.size * 8:  # more elements than bits in the file: no ggml type packs that tight
            self.fail(
                f"tensor {name!r}: dimensions {dims} ({count} elements) cannot fit in a file of {self.size} bytes"
            )
        row = dims[0] if dims else 1
        if row % block:
            self.fail(f"tensor {name!r}: its row length {row} is not a multiple of the {dtype} block size {block}")
        nbytes = count // block * block_bytes
        if offset % alignment:
            self.fail(f"tensor {name!r}: data offset {offset} is not a multiple of the alignment {alignment}")
        start = data_offset + offset
        if start + nbytes > self.size:
            self.fail(
                f"tensor {name!r}: data ends at byte {start + nbytes} (starts at {start}, {nbytes} bytes), "
                f"past the end of the file ({self.size} bytes): truncated"
            )
        return TensorInfo(name, dtype, tuple(reversed(dims)), start, nbytes, self.path)
