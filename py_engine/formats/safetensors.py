"""safetensors: our own reader. The JSON header is parsed and checked against the file size;
tensor bytes are never read here (they move as placements: formats/source.py)."""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass

from ..errors import ModelFileError
from .json_file import describe, parse_json

DTYPE_BYTES = {"F32": 4, "F16": 2, "BF16": 2, "I32": 4, "I64": 8, "U8": 1, "I8": 1, "U32": 4, "BOOL": 1}
MAX_HEADER = 100 << 20


@dataclass(frozen=True)
class TensorInfo:
    name: str
    dtype: str
    shape: tuple
    start: int  # absolute byte offset in the file
    nbytes: int
    path: str


def read_header(path) -> dict[str, TensorInfo]:
    path = str(path)
    try:
        size = os.path.getsize(path)
        with open(path, "rb") as f:

            def read(start, length):
                f.seek(start)
                return f.read(length)

            return parse_header(read, size, path)
    except FileNotFoundError:
        raise ModelFileError(path, "file not found") from None
    except OSError as err:  # a directory, a symlink loop, no permission, ...
        raise ModelFileError(path, f"cannot read file: {err.strerror or err}") from None


def parse_header(read, size: int, path: str) -> dict[str, TensorInfo]:
    """The tensors of a safetensors file from `read(start, length)` of its first bytes."""
    head = read(0, 8)
    if len(head) < 8:
        raise ModelFileError(path, "file too short to be safetensors (no 8-byte header length)")
    (header_len,) = struct.unpack("<Q", head)
    if header_len > MAX_HEADER or 8 + header_len > size:
        raise ModelFileError(path, f"header length {header_len} exceeds the file size {size}")
    raw = read(8, header_len)
    if len(raw) < header_len:
        raise ModelFileError(path, f"header of {header_len} bytes is cut short at {len(raw)}")
    header = parse_json(raw, path, "safetensors header JSON")
    if not isinstance(header, dict):
        raise ModelFileError(path, "safetensors header is not a JSON object")
    data_start = 8 + header_len
    tensors = {}
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        tensors[name] = _tensor_info(path, name, entry, data_start, size)
    return tensors


def _is_count(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _tensor_info(path, name, entry, data_start, file_size) -> TensorInfo:
    if not isinstance(entry, dict) or not {"dtype", "shape", "data_offsets"} <= entry.keys():
        raise ModelFileError(path, f"tensor {name!r}: header entry lacks dtype/shape/data_offsets")
    dtype, shape, offsets = entry["dtype"], entry["shape"], entry["data_offsets"]
    if not isinstance(dtype, str) or dtype not in DTYPE_BYTES:
        raise ModelFileError(path, f"tensor {name!r}: unknown dtype {describe(dtype)}")
    if not isinstance(shape, list) or not all(_is_count(dim) for dim in shape):
        raise ModelFileError(path, f"tensor {name!r}: shape {describe(shape)} is not a list of sizes (integers >= 0)")
    if not isinstance(offsets, list) or len(offsets) != 2 or not all(_is_count(at) for at in offsets):
        raise ModelFileError(path, f"tensor {name!r}: data_offsets {describe(offsets)} are not two byte offsets")
    begin, end = offsets
    count = 0 if 0 in shape else 1
    for dim in shape:
        count *= dim
        if count > file_size:  # cannot fit (the data_offsets checks below say so): stop multiplying
            break
    if end - begin != count * DTYPE_BYTES[dtype]:
        raise ModelFileError(
            path, f"tensor {name!r}: data_offsets {begin}..{end} do not fit shape {describe(shape)} {dtype}"
        )
    if data_start + end > file_size:
        raise ModelFileError(
            path,
            f"tensor {name!r}: data ends at byte {data_start + end}, past the end of the file "
            f"({file_size} bytes): truncated",
        )
    return TensorInfo(name, dtype, tuple(shape), data_start + begin, end - begin, path)
