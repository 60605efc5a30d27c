"""A structure-aware mutator of GGUF files, beside the harness's byte-level one.

Byte edits mostly break a GGUF's framing (a string length, a count), so the header reader refuses
them and the readers behind it (the config, the tensor names and shapes, the tokenizer) see few
inputs. This one edits a parsed seed and writes it back whole: a metadata value replaced by one
of another GGUF type (an array for a number, a string for a count, NaN for a float, an array of
the wrong length), a key dropped or added, a tensor's dimensions, type or name changed."""

from __future__ import annotations

import math
import random
import struct

from py_engine.formats import gguf as reader

ARRAY, STRING, BOOL = reader.ARRAY, reader.STRING, reader.BOOL
FLOATS = (reader.FLOAT32, reader.FLOAT64)
INT_RANGES = {
    reader.UINT8: (0, 2**8 - 1),
    reader.INT8: (-(2**7), 2**7 - 1),
    reader.UINT16: (0, 2**16 - 1),
    reader.INT16: (-(2**15), 2**15 - 1),
    reader.UINT32: (0, 2**32 - 1),
    reader.INT32: (-(2**31), 2**31 - 1),
    reader.UINT64: (0, 2**64 - 1),
    reader.INT64: (-(2**63), 2**63 - 1),
}
STRINGS = ["", "x", "llama", "gpt2", "t5", "bert", "qwen35", "lfm2", "gemma2", "phi3", "none", "linear", "llama3"]
STRINGS += ["yarn", "longrope", "\u2581", "<0x41>", "<s>", "a b", "a" * 300, "\ud800"]
FLOAT_VALUES = [math.nan, math.inf, -math.inf, 0.0, -0.0, 1e-45, 1e38, -1.0, 0.5, 3.0, 1e6]
# Keys a seed may lack, so that their readers see values too.
EXTRA_KEYS = [
    "{arch}.rope.scaling.type",
    "{arch}.rope.scaling.factor",
    "{arch}.rope.scaling.original_context_length",
    "{arch}.rope.scale_linear",
    "{arch}.rope.dimension_count",
    "{arch}.attention.key_length",
    "{arch}.attention.value_length",
    "{arch}.attention.sliding_window",
    "{arch}.attention.sliding_window_pattern",
    "{arch}.attention.recurrent_layers",
    "{arch}.nextn_predict_layers",
    "{arch}.vocab_size",
    "general.alignment",
    "tokenizer.ggml.precompiled_charsmap",
    "tokenizer.ggml.padding_token_id",
    "tokenizer.ggml.add_bos_token",
    "tokenizer.chat_template",
]


class Model:
    """A GGUF file as [key, type, value, its bytes or None] entries and tensor infos, written back
    by `to_bytes` (an entry whose bytes are None is encoded again)."""

    def __init__(self, data: bytes):
        parsed = reader.parse_gguf(lambda offset, length: data[offset : offset + length], len(data), "seed.gguf")
        self.entries = [
            [key, vtype, value, _string(key) + _value(vtype, value)]
            for key, value in parsed.metadata.items()
            if key != "general.alignment" and (vtype := parsed.metadata_types[key])
        ]
        by_name = {name: type_id for type_id, (name, _, _) in reader.GGML_TYPES.items()}
        self.tensors = [
            [name, list(reversed(info.shape)), by_name[info.dtype], data[info.start : info.start + info.nbytes]]
            for name, info in parsed.tensors.items()
        ]

    def copy(self) -> Model:
        """Another model sharing the values (edits replace them, never change them in place)."""
        model = Model.__new__(Model)
        model.entries = [list(entry) for entry in self.entries]
        model.tensors = [list(tensor) for tensor in self.tensors]
        return model

    def to_bytes(self, alignment: int = 32) -> bytes:
        out = bytearray(b"GGUF" + struct.pack("<IQQ", 3, len(self.tensors), len(self.entries)))
        for key, vtype, value, encoded in self.entries:
            out += encoded if encoded is not None else _string(key) + _value(vtype, value)
        offsets, offset = [], 0
        for _, dims, type_id, _ in self.tensors:
            offsets.append(offset)
            offset += -(-_nbytes(dims, type_id) // alignment) * alignment
        for (name, dims, type_id, _), start in zip(self.tensors, offsets):
            out += _string(name) + struct.pack(f"<I{len(dims)}QIQ", len(dims), *dims, type_id, start)
        out += bytes(-len(out) % alignment)
        for _, dims, type_id, raw in self.tensors:
            need = _nbytes(dims, type_id)
            grown = b"\x00\x00\x80\x3f" * (-(-max(0, need - len(raw)) // 4))  # 1.0f: factors stay positive
            out += (raw + grown)[:need]
            out += bytes(-len(out) % alignment)
        return bytes(out)


def _nbytes(dims, type_id) -> int:
    count = math.prod(dims)
    if count > 1 << 20:  # too big to write: the reader says the data runs past the end
        return 0
    _, block, size = reader.GGML_TYPES.get(type_id, ("", 1, 4))
    return count // block * size


def _string(text: str) -> bytes:
    raw = text.encode("utf-8", "surrogatepass")
    return struct.pack("<Q", len(raw)) + raw


def _value(vtype, value) -> bytes:
    if isinstance(vtype, tuple):  # (ARRAY, item type)
        return struct.pack("<IIQ", ARRAY, vtype[1], len(value)) + b"".join(_item(vtype[1], v) for v in value)
    return struct.pack("<I", vtype) + _item(vtype, value)


def _item(vtype, value) -> bytes:
    if vtype == STRING:
        return _string(value)
    if vtype == ARRAY:  # nested: value is (item type, items)
        item_type, items = value
        return struct.pack("<IQ", item_type, len(items)) + b"".join(_item(item_type, v) for v in items)
    return reader._SCALARS[vtype].pack(value)


def random_value(rng: random.Random, like=None):
    """(GGUF type, value): often another kind than `like`, sometimes its kind with an odd value."""
    kind = rng.randrange(6)
    if kind == 0 and isinstance(like, tuple) and isinstance(like[2], list):
        _, vtype, items = like
        items = list(items)
        edit = rng.randrange(3)
        if edit == 0:
            items = items[: rng.randrange(len(items) + 1)]
        elif edit == 1:
            items = items + items[: rng.randint(1, 4)]
        elif items and vtype[1] != ARRAY:
            items[rng.randrange(len(items))] = random_scalar(rng, vtype[1], switch=0)[1]
        return vtype, items
    if kind == 1:
        item_type, _ = random_scalar(rng)
        items = [random_scalar(rng, item_type, switch=0)[1] for _ in range(rng.choice((0, 1, 2, 3, 7, 40)))]
        return (ARRAY, item_type), items
    if kind == 2:
        return (ARRAY, ARRAY), [(reader.UINT32, [1, 2])]
    return random_scalar(rng, like[1] if isinstance(like, tuple) and not isinstance(like[1], tuple) else None)


def random_scalar(rng: random.Random, vtype=None, switch: float = 0.3):
    """(GGUF type, value): of `vtype` (another type with probability `switch`), or of any type."""
    if vtype is None or rng.random() < switch:
        vtype = rng.choice([*INT_RANGES, *FLOATS, BOOL, STRING])
    if vtype in INT_RANGES:
        low, high = INT_RANGES[vtype]
        value = rng.choice([low, high, 0, 1, 2, 3, -1, rng.randint(low, high), 64, 512, 513])
        return vtype, min(max(value, low), high)
    if vtype in FLOATS:
        value = rng.choice(FLOAT_VALUES)
        return vtype, value if vtype == reader.FLOAT64 else struct.unpack("<f", struct.pack("<f", value))[0]
    if vtype == BOOL:
        return vtype, rng.random() < 0.5
    return STRING, rng.choice(STRINGS)


_PARSED: dict[bytes, Model] = {}  # seed -> its model, parsed once


def mutate_model(data: bytes, rng: random.Random, seeds=()) -> bytes:
    """1-3 structural edits of a seed (a valid GGUF), written back."""
    if data not in _PARSED:
        _PARSED[data] = Model(data)
    model = _PARSED[data].copy()
    arch = next((value for key, _, value, _ in model.entries if key == "general.architecture"), "llama")
    for _ in range(rng.randint(1, 3)):
        kind = rng.randrange(10)
        if kind <= 4 and model.entries:
            entry = rng.choice(model.entries)
            entry[1], entry[2] = random_value(rng, tuple(entry[:3]))
            entry[3] = None
        elif kind == 5 and model.entries:
            model.entries.remove(rng.choice(model.entries))
        elif kind == 6:
            key = rng.choice(EXTRA_KEYS).format(arch=arch)
            if key not in {entry[0] for entry in model.entries}:
                model.entries.append([key, *random_value(rng), None])
        elif model.tensors:
            _mutate_tensor(model, rng)
    return model.to_bytes()


def _mutate_tensor(model: Model, rng: random.Random) -> None:
    tensor = rng.choice(model.tensors)
    edit = rng.randrange(5)
    if edit == 0:
        tensor[1] = [rng.choice((0, 1, 2, max(0, d - 1), d + 1, 2 * d, 32, 2**40)) for d in tensor[1]]
    elif edit == 1:
        tensor[1] = tensor[1][::-1] + ([1] if rng.random() < 0.5 else [])
    elif edit == 2:
        tensor[2] = rng.choice([*reader.GGML_TYPES, 4, 99])
    elif edit == 3:
        tensor[0] = rng.choice(
            ["token_embd.weight", "output.weight", "blk.0.attn_q.weight", "blk.1.attn_k.weight", "rope_freqs.weight"]
            + ["blk.0.ssm_a", "blk.0.shortconv.conv.weight", "blk.99999999.attn_q.weight", "blk." + "9" * 5000]
            + ["rope_factors_long.weight", "rope_factors_short.weight", tensor[0] + "x"]
        )
    else:
        model.tensors.remove(tensor)
