"""CTranslate2's model.bin: our own reader (binary versions 3 to 6, little-endian), written from
the format CTranslate2's loader reads (src/models/model.cc, python/ctranslate2/specs/model_spec.py).

Layout: uint32 binary version; from version 2 the spec's name (a string) and a uint32 spec
revision; uint32 variable count; each variable: its name (a string), uint8 rank, uint32 dims[rank],
from version 4 a uint8 data type and a uint32 byte count (before: a uint8 item size and a uint32
element count), then its bytes; from version 3 a uint32 alias count and pairs of strings (alias,
variable). A string is a uint16 length counting a final NUL, then the bytes and the NUL.

Only the headers are read: each variable's bytes are skipped and kept as (start, nbytes), like
`safetensors.TensorInfo`. Every count and length is checked against the bytes left in the file,
so a damaged file fails with a `ModelFileError` naming the file and the spot.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

from ..errors import ModelFileError
from .bounded_file import BoundedReader
from .safetensors import TensorInfo

SUPPORTED_VERSIONS = range(3, 7)
MAX_RANK = 8
# CTranslate2's DataType enum (include/ctranslate2/types.h) -> (safetensors dtype name, item size).
DTYPES = {0: ("F32", 4), 1: ("I8", 1), 2: ("I16", 2), 3: ("I32", 4), 4: ("F16", 2), 5: ("BF16", 2)}
_BY_ITEM_SIZE = {4: 0, 2: 2, 1: 1}  # versions before 4 stored the item size: float32, int16, int8


@dataclass
class CT2Model:
    path: str
    version: int
    spec: str  # "WhisperSpec", "TransformerSpec", ...
    revision: int
    variables: dict[str, TensorInfo] = field(default_factory=dict)  # in file order
    aliases: dict[str, str] = field(default_factory=dict)  # alias -> variable name

    def get(self, name: str) -> TensorInfo:
        """A variable by its name or an alias of it; ModelFileError naming the file when absent."""
        info = self.variables.get(self.aliases.get(name, name))
        if info is None:
            raise ModelFileError(self.path, f"CTranslate2 model has no variable {name!r}")
        return info


def read_ct2(path) -> CT2Model:
    """Parse the variable table of the CTranslate2 model.bin at `path` (the tensor bytes are not read)."""
    return _Parser.parse(path)


class _Parser(BoundedReader):
    KIND = "CTranslate2 model"

    def number(self, fmt: str) -> int:
        unpacker = struct.Struct("<" + fmt)
        return unpacker.unpack(self.take(unpacker.size))[0]

    def string(self, what: str) -> str:
        length = self.number("H")
        raw = self.take(length) if length else b""
        if not raw or raw[-1] != 0 or 0 in raw[:-1]:
            self.fail(f"{what} is not a NUL-terminated string")
        try:
            return raw[:-1].decode("utf-8")
        except UnicodeDecodeError:
            self.fail(f"{what} is not UTF-8")

    def model(self) -> CT2Model:
        version = self.number("I")
        if version not in SUPPORTED_VERSIONS:
            self.fail(f"CTranslate2 binary version {version} is not supported (3 to 6 are)")
        model = CT2Model(self.path, version, self.string("spec name"), self.number("I"))
        count = self.number("I")
        if count * 8 > self.size - self.file.tell():  # each variable takes at least 8 bytes
            self.fail(f"{count} variables cannot fit in the file")
        for _ in range(count):
            info = self.variable(version)
            if info.name in model.variables:
                self.fail(f"variable {info.name!r} appears twice")
            model.variables[info.name] = info
        for _ in range(self.number("I")):
            alias, target = self.string("alias"), self.string("alias target")
            if target not in model.variables:
                self.fail(f"alias {alias!r} names no variable ({target!r})")
            model.aliases[alias] = target
        if self.file.tell() != self.size:
            self.fail("bytes follow the alias table")
        return model

    def variable(self, version: int) -> TensorInfo:
        name = self.string("variable name")
        rank = self.number("B")
        if rank > MAX_RANK:
            self.fail(f"variable {name!r} has rank {rank}")
        shape = tuple(self.number("I") for _ in range(rank))
        if version >= 4:
            type_id, nbytes = self.number("B"), self.number("I")
        else:
            item_size = self.number("B")
            type_id, nbytes = _BY_ITEM_SIZE.get(item_size, -1), self.number("I") * item_size
        if type_id not in DTYPES:
            self.fail(f"variable {name!r} has an unknown data type {type_id}")
        dtype, item = DTYPES[type_id]
        elements = 1
        for dim in shape:
            elements *= dim
        if nbytes != elements * item:
            self.fail(f"variable {name!r}: {nbytes} bytes for shape {list(shape)} of {dtype}")
        start = self.skip(nbytes, f"variable {name!r}")
        return TensorInfo(name, dtype, shape, start, nbytes, self.path)
