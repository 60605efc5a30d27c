"""py_engine/formats/gguf.py against gguf-py's GGUFReader, and every malformed header we refuse.

Valid files come from gguf-py's GGUFWriter; malformed ones are crafted byte by byte with `raw_gguf`.
Also: llama.cpp -> HF tensor names, and the parse time of the real SmolLM2 header if it is cached.
"""

import struct
import time

import pytest

from py_engine.errors import ModelFileError
from py_engine.formats import gguf as reader
from py_engine.formats.gguf import GGML_TYPES, parse_gguf, read_gguf
from py_engine.formats.gguf_model import gguf_rope_interleaved, hf_tensor_name, hf_tensors

gguf = pytest.importorskip("gguf")
np = pytest.importorskip("numpy")

VT = gguf.GGUFValueType
QT = gguf.GGMLQuantizationType

SCALARS = [
    ("t.u8", 250, VT.UINT8),
    ("t.i8", -100, VT.INT8),
    ("t.u16", 65000, VT.UINT16),
    ("t.i16", -32000, VT.INT16),
    ("t.u32", 4_000_000_000, VT.UINT32),
    ("t.i32", -2_000_000_000, VT.INT32),
    ("t.f32", 0.15625, VT.FLOAT32),
    ("t.bool", True, VT.BOOL),
    ("t.false", False, VT.BOOL),
    ("t.str", "héllo ✓ 😀", VT.STRING),
    ("t.empty_str", "", VT.STRING),
    ("t.u64", 2**63 + 5, VT.UINT64),
    ("t.i64", -(2**62), VT.INT64),
    ("t.f64", 1e-300, VT.FLOAT64),
]
ARRAYS = [
    ("a.u8", [0, 1, 255], VT.UINT8),
    ("a.i16", [-5, 7], VT.INT16),
    ("a.i32", list(range(-3, 1000)), VT.INT32),
    ("a.u64", [2**64 - 1, 0], VT.UINT64),
    ("a.f32", [0.5, -2.25, 1e10], VT.FLOAT32),
    ("a.f64", [1e-300], VT.FLOAT64),
    ("a.bool", [True, False, True], VT.BOOL),
    ("a.str", ["a", "", "Ġhello", "日本", "x" * 300], VT.STRING),
]
NESTED = [[1, 2, 3], [4], [5, 6]]


def quant_bytes(rows: int, cols: int, qtype) -> np.ndarray:
    block, size = gguf.GGML_QUANT_SIZES[qtype]
    rng = np.random.default_rng(int(qtype))
    return rng.integers(0, 256, (rows, cols // block * size), dtype=np.uint8)


TENSORS = {
    "f32.weight": np.arange(24, dtype=np.float32).reshape(2, 3, 4),
    "f16.weight": np.ones((5, 7), dtype=np.float16),
    "i32.vector": np.arange(9, dtype=np.int32),
    "bf16.weight": (quant_bytes(3, 8, QT.BF16), QT.BF16),
    "q8_0.weight": (quant_bytes(4, 64, QT.Q8_0), QT.Q8_0),
    "q4_1.weight": (quant_bytes(2, 96, QT.Q4_1), QT.Q4_1),
    "q4_k.weight": (quant_bytes(3, 512, QT.Q4_K), QT.Q4_K),
    "q6_k.weight": (quant_bytes(1, 256, QT.Q6_K), QT.Q6_K),
    "q5_0.weight": (quant_bytes(2, 32, QT.Q5_0), QT.Q5_0),
}


def write_full(path, alignment=None):
    writer = gguf.GGUFWriter(str(path), "llama")
    if alignment is not None:
        writer.add_custom_alignment(alignment)
    for key, value, vtype in SCALARS:
        writer.add_key_value(key, value, vtype)
    for key, value, vtype in ARRAYS:
        writer.add_key_value(key, value, VT.ARRAY, sub_type=vtype)
    writer.add_array("a.nested", NESTED)
    for name, tensor in TENSORS.items():
        if isinstance(tensor, tuple):
            writer.add_tensor(name, tensor[0], raw_dtype=tensor[1])
        else:
            writer.add_tensor(name, tensor)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


@pytest.mark.parametrize("alignment", [None, 64, 256])
def test_matches_gguf_py(tmp_path, alignment):
    path = write_full(tmp_path / "full.gguf", alignment)
    ours = read_gguf(path)
    theirs = gguf.GGUFReader(path)
    assert ours.version == 3
    assert ours.alignment == (alignment or 32) == theirs.alignment
    assert ours.data_offset == theirs.data_offset and ours.data_offset % ours.alignment == 0
    for key, value, _ in SCALARS + ARRAYS:
        assert ours.metadata[key] == value, key
        assert ours.metadata[key] == theirs.fields[key].contents(), key
    assert ours.metadata["a.nested"] == NESTED
    assert ours.metadata_types["a.i32"] == (reader.ARRAY, reader.INT32)
    assert ours.metadata_types["t.u16"] == reader.UINT16
    # Every key gguf-py sees, in its order (GGUF.* are its pseudo-fields for the header counts).
    assert list(ours.metadata) == [k for k in theirs.fields if not k.startswith("GGUF.")]
    assert list(ours.tensors) == [t.name for t in theirs.tensors]
    for tensor in theirs.tensors:
        info = ours.tensors[tensor.name]
        assert info.dtype == tensor.tensor_type.name
        assert info.shape == tuple(int(d) for d in reversed(tensor.shape))
        assert info.start == tensor.data_offset
        assert info.nbytes == tensor.n_bytes
        assert info.path == str(path)
    assert ours.tensors["f32.weight"].shape == (2, 3, 4)
    assert ours.tensors["q4_k.weight"].shape == (3, 512)
    raw = path.read_bytes()
    info = ours.tensors["f32.weight"]
    assert np.array_equal(np.frombuffer(raw[info.start : info.start + info.nbytes], np.float32), np.arange(24))


def test_version_2_and_chunked_reads(tmp_path, monkeypatch):
    """A v2 file (same layout as v3) parses; the parser reads only the header, in chunks, and
    copes with a chunk boundary anywhere (CHUNK of 7 bytes forces a refill inside every field)."""
    data = bytearray(write_full(tmp_path / "full.gguf").read_bytes())
    data[4:8] = struct.pack("<I", 2)
    calls = []

    def read_at(offset, length):
        calls.append((offset, length))
        return bytes(data[offset : offset + length])

    expected = read_gguf(tmp_path / "full.gguf")
    monkeypatch.setattr(reader, "CHUNK", 7)
    got = parse_gguf(read_at, len(data), "mem.gguf")
    assert got.version == 2
    assert got.metadata == expected.metadata
    assert [(t.name, t.dtype, t.shape, t.start, t.nbytes) for t in got.tensors.values()] == [
        (t.name, t.dtype, t.shape, t.start, t.nbytes) for t in expected.tensors.values()
    ]
    assert got.tensors["q8_0.weight"].path == "mem.gguf"
    assert max(offset + length for offset, length in calls) <= got.data_offset
    assert all(b >= a for (a, _), (b, _) in zip(calls, calls[1:]))  # forward only


# ---- malformed files ----


def gguf_string(text: str | bytes) -> bytes:
    raw = text.encode("utf-8") if isinstance(text, str) else text
    return struct.pack("<Q", len(raw)) + raw


def kv(key: str, vtype: int, payload: bytes) -> bytes:
    return gguf_string(key) + struct.pack("<I", vtype) + payload


def tensor_info(name: str, dims, type_id: int, offset: int) -> bytes:
    return (
        gguf_string(name)
        + struct.pack("<I", len(dims))
        + b"".join(struct.pack("<Q", d) for d in dims)
        + struct.pack("<I", type_id)
        + struct.pack("<Q", offset)
    )


def raw_gguf(
    kvs=(), tensors=(), data=b"", *, magic=b"GGUF", version=3, kv_count=None, tensor_count=None, alignment=32
) -> bytes:
    head = (
        magic
        + struct.pack("<I", version)
        + struct.pack(
            "<QQ", len(tensors) if tensor_count is None else tensor_count, len(kvs) if kv_count is None else kv_count
        )
        + b"".join(kvs)
        + b"".join(tensors)
    )
    return head + b"\0" * (-len(head) % alignment) + data


OK_KV = kv("general.architecture", 8, gguf_string("llama"))
F32_ROW = tensor_info("row.weight", [4], 0, 0)


def test_raw_builder_is_valid(tmp_path):
    path = tmp_path / "ok.gguf"
    path.write_bytes(raw_gguf([OK_KV], [F32_ROW], b"\0" * 16))
    parsed = read_gguf(path)
    assert parsed.metadata == {"general.architecture": "llama"}
    assert parsed.tensors["row.weight"].shape == (4,) and parsed.tensors["row.weight"].nbytes == 16
    assert gguf.GGUFReader(path).tensors[0].name == "row.weight"


def u32_kv(key, value):
    return kv(key, 4, struct.pack("<I", value))


CASES = {
    "bad_magic": (raw_gguf(magic=b"GGUX"), "bad magic b'GGUX'"),
    "too_short": (b"GG", "file too short to be GGUF (2 bytes)"),
    "version_1": (raw_gguf(version=1), "unsupported GGUF version 1"),
    "version_4": (raw_gguf(version=4), "unsupported GGUF version 4"),
    "big_endian": (b"GGUF" + struct.pack(">I", 3) + b"\0" * 16, "big-endian GGUF"),
    "truncated_header": (b"GGUF" + struct.pack("<I", 3) + b"\0\0", "truncated: the file ends inside the file header"),
    "truncated_metadata_value": (
        raw_gguf(
            [OK_KV, kv("tokenizer.ggml.tokens", 9, struct.pack("<IQ", 8, 3) + gguf_string("a") + gguf_string("b"))],
            alignment=1,
        ),
        "metadata key 'tokenizer.ggml.tokens': array length 3 runs past the end of the file",
    ),
    "truncated_scalar": (
        raw_gguf([OK_KV, kv("x.u64", 10, b"\0" * 8)], alignment=1)[:-3],
        "truncated: the file ends inside metadata key 'x.u64' (needs 8 bytes at offset",
    ),
    "truncated_metadata_key": (raw_gguf([OK_KV], kv_count=2, alignment=1), "the key of metadata entry #1"),
    "truncated_tensor_info": (
        raw_gguf([OK_KV], [F32_ROW, tensor_info("blk.0.attn_q.weight", [4, 4], 0, 32)], alignment=1)[:-5],
        "ends inside the info of tensor 'blk.0.attn_q.weight'",
    ),
    "unknown_value_type": (raw_gguf([kv("x.y", 13, b"\0" * 8)]), "metadata key 'x.y' has unknown value type 13"),
    "unknown_array_type": (
        raw_gguf([kv("x.arr", 9, struct.pack("<IQ", 77, 1))]),
        "metadata key 'x.arr' is an array of unknown value type 77",
    ),
    "unknown_ggml_type": (
        raw_gguf([OK_KV], [tensor_info("blk.3.ffn_up.weight", [32], 4, 0)], b"\0" * 64),
        "tensor 'blk.3.ffn_up.weight' has unknown ggml type id 4",
    ),
    "data_past_end": (
        raw_gguf([OK_KV], [tensor_info("output.weight", [64, 2], 8, 0)], b"\0" * 100),
        "tensor 'output.weight': data ends at byte",
    ),
    "misaligned_offset": (
        raw_gguf([OK_KV], [tensor_info("a.weight", [4], 0, 16)], b"\0" * 64),
        "tensor 'a.weight': data offset 16 is not a multiple of the alignment 32",
    ),
    "block_size": (
        raw_gguf([OK_KV], [tensor_info("q.weight", [48, 2], 12, 0)], b"\0" * 1024),
        "tensor 'q.weight': its row length 48 is not a multiple of the Q4_K block size 256",
    ),
    "absurd_dims": (
        raw_gguf([OK_KV], [tensor_info("huge", [2**40, 2**40], 0, 0)], b"\0" * 32),
        "tensor 'huge': dimensions [1099511627776, 1099511627776] (1208925819614629174706176 elements) "
        "cannot fit in a file of",
    ),
    "too_many_dims": (
        raw_gguf([OK_KV], [tensor_info("t", [1, 1, 1, 1, 1], 0, 0)], b"\0" * 32),
        "tensor 't' has 5 dimensions (at most 4)",
    ),
    "absurd_kv_count": (raw_gguf([OK_KV], kv_count=2**60), "metadata count 1152921504606846976 runs past the end"),
    "absurd_tensor_count": (raw_gguf([OK_KV], tensor_count=2**40), "tensor count 1099511627776 runs past the end"),
    "absurd_string": (
        raw_gguf([struct.pack("<Q", 2**62) + b"key"]),
        "string length 4611686018427387904 runs past the end of the file",
    ),
    "absurd_array": (
        raw_gguf([kv("big", 9, struct.pack("<IQ", 8, 2**50))]),
        "metadata key 'big': array length 1125899906842624 runs past the end",
    ),
    "absurd_nested_string": (
        raw_gguf([kv("toks", 9, struct.pack("<IQ", 8, 2) + gguf_string("a") + struct.pack("<Q", 2**40))]),
        "metadata key 'toks': string length 1099511627776 runs past the end",
    ),
    "duplicate_key": (raw_gguf([OK_KV, OK_KV]), "duplicate metadata key 'general.architecture'"),
    "duplicate_tensor": (raw_gguf([OK_KV], [F32_ROW, F32_ROW], b"\0" * 16), "duplicate tensor name 'row.weight'"),
    "bad_alignment": (raw_gguf([u32_kv("general.alignment", 48)]), "general.alignment must be a positive power of two"),
    "zero_alignment": (raw_gguf([u32_kv("general.alignment", 0)]), "general.alignment must be a positive power"),
    "bad_key_utf8": (raw_gguf([kv(b"\xff\xfe", 4, b"\0" * 4)]), "string is not valid UTF-8"),
    "deep_nesting": (
        raw_gguf([kv("deep", 9, struct.pack("<IQ", 9, 1) + struct.pack("<IQ", 9, 1) * 9)]),
        "arrays nested more than 8 deep",
    ),
}


@pytest.mark.parametrize("name", list(CASES))
def test_malformed(tmp_path, name):
    content, problem = CASES[name]
    path = tmp_path / f"{name}.gguf"
    path.write_bytes(content)
    with pytest.raises(ModelFileError) as err:
        read_gguf(path)
    assert err.value.path == str(path)
    assert problem in err.value.problem, err.value.problem
    assert str(err.value).startswith(f"{path}: ")
    assert "\n" not in str(err.value)


def test_no_tensors_no_padding(tmp_path):
    """A vocabulary-only file may end right after its metadata."""
    path = tmp_path / "vocab.gguf"
    path.write_bytes(raw_gguf([OK_KV], alignment=1))
    parsed = read_gguf(path)
    assert parsed.tensors == {} and parsed.metadata == {"general.architecture": "llama"}


def test_missing_file(tmp_path):
    with pytest.raises(ModelFileError, match="file not found"):
        read_gguf(tmp_path / "nope.gguf")
    with pytest.raises(ModelFileError, match="is a directory"):
        read_gguf(tmp_path)


def test_truncated_file_names_the_numbers(tmp_path):
    full = write_full(tmp_path / "full.gguf").read_bytes()
    last = max(read_gguf(tmp_path / "full.gguf").tensors.values(), key=lambda t: t.start)
    cut = tmp_path / "cut.gguf"
    cut.write_bytes(full[: last.start + last.nbytes - 1])
    with pytest.raises(ModelFileError) as err:
        read_gguf(cut)
    assert (
        f"tensor {last.name!r}: data ends at byte {last.start + last.nbytes} (starts at {last.start}, "
        f"{last.nbytes} bytes)" in err.value.problem
    )
    assert f"past the end of the file ({last.start + last.nbytes - 1} bytes): truncated" in err.value.problem


def test_type_table_matches_gguf_py():
    for qtype, (block, size) in gguf.GGML_QUANT_SIZES.items():
        assert GGML_TYPES[int(qtype)] == (qtype.name, block, size)


# ---- tensor names ----


def test_hf_tensor_names():
    assert hf_tensor_name("token_embd.weight") == "model.embed_tokens.weight"
    assert hf_tensor_name("output_norm.weight") == "model.norm.weight"
    assert hf_tensor_name("output.weight") == "lm_head.weight"
    expected = {
        "attn_norm.weight": "input_layernorm.weight",
        "attn_q.weight": "self_attn.q_proj.weight",
        "attn_k.bias": "self_attn.k_proj.bias",
        "attn_v.weight": "self_attn.v_proj.weight",
        "attn_output.weight": "self_attn.o_proj.weight",
        "attn_q_norm.weight": "self_attn.q_norm.weight",
        "attn_k_norm.weight": "self_attn.k_norm.weight",
        "ffn_norm.weight": "post_attention_layernorm.weight",
        "ffn_gate.weight": "mlp.gate_proj.weight",
        "ffn_up.weight": "mlp.up_proj.weight",
        "ffn_down.weight": "mlp.down_proj.weight",
    }
    for gguf_part, hf_part in expected.items():
        assert hf_tensor_name(f"blk.17.{gguf_part}") == f"model.layers.17.{hf_part}"
    assert hf_tensor_name("blk.0.ffn_norm.weight", "gemma3") == "model.layers.0.pre_feedforward_layernorm.weight"
    assert (
        hf_tensor_name("blk.2.post_attention_norm.weight", "gemma3") == "model.layers.2.post_attention_layernorm.weight"
    )
    assert hf_tensor_name("blk.2.post_ffw_norm.weight", "gemma3") == "model.layers.2.post_feedforward_layernorm.weight"
    assert hf_tensor_name("rope_freqs.weight") is None
    assert hf_tensor_name("blk.0.ffn_gate_exps.weight") is None
    assert (
        gguf_rope_interleaved("llama"),
        gguf_rope_interleaved("qwen2"),
        gguf_rope_interleaved("qwen3"),
        gguf_rope_interleaved("gemma3"),
    ) == (True, False, False, False)


def test_hf_tensors(tmp_path):
    path = tmp_path / "m.gguf"
    path.write_bytes(
        raw_gguf(
            [OK_KV],
            [
                tensor_info("token_embd.weight", [4, 2], 0, 0),
                tensor_info("blk.0.attn_q.weight", [4, 4], 0, 32),
                tensor_info("rope_freqs.weight", [2], 0, 96),
            ],
            b"\0" * 128,
        )
    )
    tensors = hf_tensors(read_gguf(path))
    assert list(tensors) == ["model.embed_tokens.weight", "model.layers.0.self_attn.q_proj.weight", "rope_freqs.weight"]
    assert tensors["model.layers.0.self_attn.q_proj.weight"].name == "blk.0.attn_q.weight"
    assert tensors["model.embed_tokens.weight"].shape == (2, 4)


# ---- the real SmolLM2 header, if it is in the model cache ----


def test_real_smollm2_header_parses_fast():
    from py_engine.model_cache import cached_path

    path = cached_path("smollm2-135m-instruct")
    if path is None:
        pytest.skip("SmolLM2 is not in the model cache (tests/test_gguf_tokenizer.py fetches it)")
    best = float("inf")
    for _ in range(3):
        start = time.perf_counter()
        parsed = read_gguf(path)
        best = min(best, time.perf_counter() - start)
    assert best < 0.5, f"header parse took {best:.3f} s"
    assert (parsed.version, parsed.alignment, parsed.data_offset, len(parsed.tensors)) == (3, 32, 1785664, 272)
    assert len(parsed.metadata["tokenizer.ggml.tokens"]) == 49152
    assert len(parsed.metadata["tokenizer.ggml.merges"]) == 48900
    embed = parsed.tensors["token_embd.weight"]
    assert (embed.dtype, embed.shape, embed.nbytes) == ("Q8_0", (49152, 576), 49152 * 576 // 32 * 34)
    assert parsed.tensors["blk.0.attn_q.weight"].dtype == "Q4_1"
