"""Moonshine base as the `moonshine-cpp` wheel ships it (ONNX Runtime's .ort files, int8 weights) -> an HF
folder transformers' MoonshineForConditionalGeneration and Wisp load (the int8 weights dequantized to f32).

    pip download --no-deps moonshine-cpp useful-moonshine-onnx onnxruntime flatbuffers -d /tmp/w
    pip install --no-deps --target /tmp/w/lib /tmp/w/onnxruntime-*.whl /tmp/w/flatbuffers-*.whl
    PYTHONPATH=/tmp/w/lib /work/refenv/bin/python tools/moonshine_ort_to_safetensors.py \\
        --models .../moonshine_cpp/models/base-en --tokenizer .../moonshine_onnx/assets/tokenizer.json --out /tmp/moonshine-base

The wheel (MIT, Moonshine AI) holds encoder_model.ort and decoder_model_merged.ort: Optimum's export of
transformers' Moonshine base, every matrix and convolution weight-only quantized per tensor (int8 q, then
q x scale + zero_point in float), read here with onnxruntime's own flatbuffer bindings (the ORT format's
schema). Tensors are named by the nodes that read them (/layers.N/self_attn/q_proj/MatMul, ...); the
GroupNorm's affine parameters are the Mul and Add after its InstanceNormalization; the rotary inverse
frequencies are checked against rope_theta and partial_rotary_factor. Writes config.json (the hub's
UsefulSensors/moonshine-base numbers), generation_config.json, model.safetensors, tokenizer.json.
"""

import argparse
import json
import math
import shutil
from pathlib import Path

import numpy as np
from onnxruntime.tools.ort_format_model.ort_flatbuffers_py.fbs.InferenceSession import InferenceSession
from safetensors.numpy import save_file

CONFIG = {
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
    "rope_theta": 10000.0,
    "partial_rotary_factor": 0.62,
    "rope_scaling": None,
    "attention_bias": False,
    "attention_dropout": 0.0,
    "bos_token_id": 1,
    "eos_token_id": 2,
    "decoder_start_token_id": 1,
    "is_encoder_decoder": True,
    "tie_word_embeddings": True,
    "use_cache": True,
    "torch_dtype": "float32",
}
FLOAT, INT8, INT64 = 1, 3, 7  # ONNX TensorProto data types
NUMPY = {FLOAT: np.float32, INT8: np.int8, INT64: np.int64}
PROJECTIONS = {"q_proj": "q_proj", "k_proj": "k_proj", "v_proj": "v_proj", "dense": "o_proj"}
MLPS = {"fc1": "fc1", "fc2": "fc2", "up_proj": "fc1", "down_proj": "fc2"}  # the decoder's export names


def graphs(graph):
    """A graph and every subgraph of its nodes' attributes (the decoder's If branches)."""
    yield graph
    for i in range(graph.NodesLength()):
        node = graph.Nodes(i)
        for a in range(node.AttributesLength() if node else 0):
            sub = node.Attributes(a).G()
            if sub is not None:
                yield from graphs(sub)


def read_ort(path: Path):
    """(initializers by name as numpy arrays, nodes as (name, op, inputs) of every graph)."""
    data = path.read_bytes()
    root = InferenceSession.GetRootAsInferenceSession(data, 0).Model().Graph()
    tensors, nodes = {}, []
    for graph in graphs(root):
        for i in range(graph.InitializersLength()):
            t = graph.Initializers(i)
            dims = [t.Dims(j) for j in range(t.DimsLength())]
            kind = NUMPY.get(t.DataType())
            if kind is not None and t.RawDataLength():
                tensors[t.Name().decode()] = np.frombuffer(t.RawDataAsNumpy().tobytes(), kind).reshape(dims)
        for i in range(graph.NodesLength()):
            n = graph.Nodes(i)
            if n is not None:
                inputs = [n.Inputs(j).decode() for j in range(n.InputsLength())]
                nodes.append((n.Name().decode(), n.OpType().decode(), inputs))
    return tensors, nodes


def weight(tensors: dict, used: str) -> np.ndarray:
    """The float weight a node reads as `used`: a stored float, or X_add_tensor of int8 X_quantized
    dequantized as the graph does (cast, times X_scale, plus X_zero_point)."""
    if used in tensors:
        return tensors[used]
    base = used.removesuffix("_add_tensor")
    assert base != used, f"{used}: neither stored nor a dequantized weight"
    q = tensors[base + "_quantized"].astype(np.float32)
    return q * tensors[base + "_scale"].reshape(()) + tensors[base + "_zero_point"].reshape(())


def matrices(tensors: dict, nodes: list, prefix: str, out: dict) -> None:
    """Each MatMul of a layer's projection or MLP (ONNX's x @ W) as its HF Linear weight W^T."""
    for name, op, inputs in nodes:
        parts = name.strip("/").split("/")  # [..., layers.N, block, module, MatMul]
        if op != "MatMul" or len(parts) < 4 or not parts[-4].startswith("layers."):
            continue
        layer, block, module = parts[-4:-1]
        hf = PROJECTIONS.get(module) if block in ("self_attn", "encoder_attn") else MLPS.get(module)
        if hf is None:
            continue
        key = f"{prefix}{layer}.{block}.{hf}.weight"
        value = np.ascontiguousarray(weight(tensors, inputs[1]).T)
        assert key not in out or np.array_equal(out[key], value), f"{key} read twice, differently"
        out[key] = value


def encoder(path: Path) -> dict:
    tensors, nodes = read_ort(path)
    out, e = {}, "model.encoder."
    inputs = {name: ins for name, _, ins in nodes}
    for conv in ("conv1", "conv2", "conv3"):
        out[f"{e}{conv}.weight"] = weight(tensors, inputs[f"/{conv}/Conv"][1])
        if conv != "conv1":
            out[f"{e}{conv}.bias"] = tensors[f"{conv}.bias"]
    out[e + "groupnorm.weight"] = tensors[inputs["/groupnorm/Mul"][1]].reshape(-1)
    out[e + "groupnorm.bias"] = tensors[inputs["/groupnorm/Add"][1]].reshape(-1)
    for name, value in tensors.items():
        if name.startswith("layers.") or name == "layer_norm.weight":
            out[e + name] = value
    matrices(tensors, nodes, e, out)
    check_rotary(tensors["/rotary_emb/Cast_1_output_0"])
    return out


def decoder(path: Path) -> dict:
    tensors, nodes = read_ort(path)
    out, d = {}, "model.decoder."
    out[d + "embed_tokens.weight"] = weight(tensors, "model.decoder.embed_tokens.weight_merged_0_add_tensor")
    for name, value in tensors.items():
        base = name.removesuffix("_merged_0")
        if base.startswith(d) and base != name and not base.startswith(d + "embed_tokens"):
            out[base.replace(".up_proj.", ".fc1.").replace(".down_proj.", ".fc2.")] = value
    matrices(tensors, nodes, d, out)
    check_rotary(tensors["/model/decoder/rotary_emb/Cast_1_output_0"])
    return out


def check_rotary(inv_freq: np.ndarray) -> None:
    """The exported inverse frequencies are the config's: theta^(-2i / rotary_dim)."""
    rotary = int(CONFIG["hidden_size"] // CONFIG["encoder_num_attention_heads"] * CONFIG["partial_rotary_factor"])
    want = 1.0 / CONFIG["rope_theta"] ** (np.arange(0, rotary, 2) / rotary)
    assert np.allclose(inv_freq.reshape(-1), want, rtol=1e-6), "rotary frequencies differ from the config's"
    assert math.isclose(len(want), inv_freq.size)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", type=Path, required=True, help="moonshine_cpp/models/base-en")
    parser.add_argument("--tokenizer", type=Path, required=True, help="useful-moonshine-onnx's tokenizer.json")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    tensors = {**encoder(args.models / "encoder_model.ort"), **decoder(args.models / "decoder_model_merged.ort")}
    tensors = {k: np.ascontiguousarray(v, np.float32) for k, v in sorted(tensors.items())}
    args.out.mkdir(parents=True, exist_ok=True)
    save_file(tensors, str(args.out / "model.safetensors"), metadata={"format": "pt"})
    (args.out / "config.json").write_text(json.dumps(CONFIG, indent=2) + "\n")
    generation = {"bos_token_id": 1, "decoder_start_token_id": 1, "eos_token_id": 2}
    (args.out / "generation_config.json").write_text(json.dumps(generation, indent=2) + "\n")
    shutil.copy(args.tokenizer, args.out / "tokenizer.json")
    print(f"wrote {args.out}: {len(tensors)} tensors, {sum(v.size for v in tensors.values()) / 1e6:.1f} M parameters")


if __name__ == "__main__":
    main()
