"""ONNX Runtime's ORT format (.ort): our own reader of the few parts a converter needs, pure Python.

An .ort file is a FlatBuffer (file identifier "ORTM") of onnxruntime's schema (onnxruntime/core/flatbuffers/
schema/ort.fbs): InferenceSession { model: Model { graph: Graph } }, a Graph holding its initializers
(Tensor: name, dims, data_type, raw_data) and nodes (Node: name, op_type, inputs, attributes; an
attribute may hold a subgraph, as an If node's branches do). FlatBuffers: a table starts with a signed
offset back to its vtable (u16 vtable size, u16 table size, then a u16 offset per field, 0: absent);
a reference field holds a u32 offset forward from itself to a table, a string (u32 length, bytes) or a
vector (u32 count, then its elements; a vector of tables or strings holds a u32 offset per element).
Every offset is checked against the file: a damaged file is a ModelFileError, never an IndexError.
"""

from __future__ import annotations

import struct
from typing import NamedTuple

from ..errors import ModelFileError

# Field slots (vtable offsets) of the schema's tables that this reader uses.
SESSION_MODEL = 6
MODEL_GRAPH = 18
GRAPH_INITIALIZERS, GRAPH_NODES = 4, 8
NODE_NAME, NODE_OP_TYPE, NODE_INPUTS, NODE_ATTRIBUTES = 4, 14, 20, 24
ATTRIBUTE_GRAPH = 18
TENSOR_NAME, TENSOR_DIMS, TENSOR_DATA_TYPE, TENSOR_RAW_DATA = 4, 8, 10, 12
# ONNX TensorProto data types -> (name, bytes an element).
DATA_TYPES = {1: ("float32", 4), 3: ("int8", 1), 7: ("int64", 8)}


class Tensor(NamedTuple):
    name: str
    data_type: int  # ONNX's (DATA_TYPES)
    dims: tuple
    data: memoryview  # raw bytes, little-endian


class Node(NamedTuple):
    name: str
    op_type: str
    inputs: tuple


class OrtGraph(NamedTuple):
    tensors: dict  # every graph's and subgraph's initializers with raw data, by name
    nodes: list  # every graph's and subgraph's nodes, in order


class _Buffer:
    def __init__(self, data, path):
        self.data, self.path = memoryview(data), path

    def fail(self, what: str):
        raise ModelFileError(self.path, f"damaged ORT file: {what}")

    def unpack(self, fmt: str, at: int) -> tuple:
        size = struct.calcsize(fmt)
        if not 0 <= at <= len(self.data) - size:
            self.fail(f"offset {at} past the end ({len(self.data)} bytes)")
        return struct.unpack_from(fmt, self.data, at)

    def field(self, table: int, slot: int) -> int | None:
        """Where a table's field lies, or None where the table lacks it."""
        (back,) = self.unpack("<i", table)
        vtable = table - back
        size, _ = self.unpack("<HH", vtable)
        if slot >= size:
            return None
        (offset,) = self.unpack("<H", vtable + slot)
        return table + offset if offset else None

    def ref(self, table: int, slot: int) -> int | None:
        """The table, string or vector a reference field points at (None: absent)."""
        at = self.field(table, slot)
        return None if at is None else at + self.unpack("<I", at)[0]

    def vector(self, table: int, slot: int, item: int) -> tuple[int, int]:
        """(first element's position, count) of a vector field ((0, 0) absent); item: bytes an element."""
        at = self.ref(table, slot)
        if at is None:
            return 0, 0
        (count,) = self.unpack("<I", at)
        if count * item > len(self.data) - at - 4:
            self.fail(f"a vector of {count} elements past the end")
        return at + 4, count

    def refs(self, table: int, slot: int) -> list[int]:
        """The tables or strings a vector field of references points at."""
        first, count = self.vector(table, slot, 4)
        return [first + 4 * i + self.unpack("<I", first + 4 * i)[0] for i in range(count)]

    def string(self, at: int | None) -> str:
        if at is None:
            return ""
        (length,) = self.unpack("<I", at)
        if length > len(self.data) - at - 4:
            self.fail("a string past the end")
        try:
            return bytes(self.data[at + 4 : at + 4 + length]).decode()
        except UnicodeDecodeError:
            self.fail("a name that is not UTF-8")


def read_ort(data, path) -> OrtGraph:
    """The initializers and nodes of an .ort file's bytes (of every subgraph too)."""
    buf = _Buffer(data, path)
    if len(buf.data) < 8 or bytes(buf.data[4:8]) != b"ORTM":
        buf.fail("no ORTM file identifier")
    session = buf.unpack("<I", 0)[0]
    model = buf.ref(session, SESSION_MODEL)
    graph = buf.ref(model, MODEL_GRAPH) if model is not None else None
    if graph is None:
        buf.fail("no model graph")
    out = OrtGraph({}, [])
    _walk(buf, graph, out, depth=0)
    return out


MAX_DEPTH = 8  # subgraphs within subgraphs: If branches nest once here


def _walk(buf: _Buffer, graph: int, out: OrtGraph, depth: int) -> None:
    if depth > MAX_DEPTH:
        buf.fail("subgraphs nested too deep")
    for tensor in buf.refs(graph, GRAPH_INITIALIZERS):
        name = buf.string(buf.ref(tensor, TENSOR_NAME))
        at = buf.field(tensor, TENSOR_DATA_TYPE)
        kind = buf.unpack("<i", at)[0] if at is not None else 0
        first, rank = buf.vector(tensor, TENSOR_DIMS, 8)
        dims = tuple(buf.unpack("<q", first + 8 * i)[0] for i in range(rank))
        start, size = buf.vector(tensor, TENSOR_RAW_DATA, 1)
        if kind in DATA_TYPES and size:
            count = 1
            for d in dims:
                count *= d
            if any(d < 0 for d in dims) or count * DATA_TYPES[kind][1] != size:
                buf.fail(f"tensor {name!r}: {size} bytes of raw data for dims {list(dims)}")
            out.tensors[name] = Tensor(name, kind, dims, buf.data[start : start + size])
    for node in buf.refs(graph, GRAPH_NODES):
        inputs = tuple(buf.string(s) for s in buf.refs(node, NODE_INPUTS))
        name, op = buf.string(buf.ref(node, NODE_NAME)), buf.string(buf.ref(node, NODE_OP_TYPE))
        out.nodes.append(Node(name, op, inputs))
        for attribute in buf.refs(node, NODE_ATTRIBUTES):
            sub = buf.ref(attribute, ATTRIBUTE_GRAPH)
            if sub is not None:
                _walk(buf, sub, out, depth + 1)
