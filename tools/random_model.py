"""Write a random-weight HF model directory with a real model's shapes (for speed benchmarks,
where weight values don't matter and the real checkpoint can't travel).

    python tools/random_model.py smollm2-135m out/dir [--dtype bf16]
"""

from __future__ import annotations

import argparse
import json
import struct
from pathlib import Path

import numpy as np

PRESETS = {
    "smollm2-135m": dict(
        architectures=["LlamaForCausalLM"],
        vocab_size=49152,
        hidden_size=576,
        intermediate_size=1536,
        num_hidden_layers=30,
        num_attention_heads=9,
        num_key_value_heads=3,
        rms_norm_eps=1e-5,
        rope_theta=100000.0,
        max_position_embeddings=8192,
        tie_word_embeddings=True,
    ),
    "qwen2.5-0.5b": dict(
        architectures=["Qwen2ForCausalLM"],
        vocab_size=151936,
        hidden_size=896,
        intermediate_size=4864,
        num_hidden_layers=24,
        num_attention_heads=14,
        num_key_value_heads=2,
        rms_norm_eps=1e-6,
        rope_theta=1000000.0,
        max_position_embeddings=32768,
        tie_word_embeddings=True,
    ),
}


def tensor_shapes(cfg: dict) -> dict:
    h, inter, heads, kv = (
        cfg["hidden_size"],
        cfg["intermediate_size"],
        cfg["num_attention_heads"],
        cfg["num_key_value_heads"],
    )
    hd = h // heads
    shapes = {"model.embed_tokens.weight": (cfg["vocab_size"], h), "model.norm.weight": (h,)}
    bias = cfg["architectures"][0] == "Qwen2ForCausalLM"
    for i in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{i}."
        shapes.update(
            {
                p + "input_layernorm.weight": (h,),
                p + "post_attention_layernorm.weight": (h,),
                p + "self_attn.q_proj.weight": (heads * hd, h),
                p + "self_attn.k_proj.weight": (kv * hd, h),
                p + "self_attn.v_proj.weight": (kv * hd, h),
                p + "self_attn.o_proj.weight": (h, heads * hd),
                p + "mlp.gate_proj.weight": (inter, h),
                p + "mlp.up_proj.weight": (inter, h),
                p + "mlp.down_proj.weight": (h, inter),
            }
        )
        if bias:
            for n, rows in (("q", heads * hd), ("k", kv * hd), ("v", kv * hd)):
                shapes[p + f"self_attn.{n}_proj.bias"] = (rows,)
    return shapes


def write_safetensors(path: Path, shapes: dict, dtype: str, seed: int = 0):
    rng = np.random.default_rng(seed)
    header, offset = {}, 0
    for name, shape in shapes.items():
        nbytes = int(np.prod(shape)) * 2
        header[name] = {"dtype": dtype.upper(), "shape": list(shape), "data_offsets": [offset, offset + nbytes]}
        offset += nbytes
    raw = json.dumps(header).encode()
    raw += b" " * (-len(raw) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(raw)) + raw)
        for name, shape in shapes.items():
            values = (rng.standard_normal(shape, dtype=np.float32) * 0.02).astype(np.float32)
            if name.endswith("norm.weight"):
                values += 1.0
            bits = values.view(np.uint32) >> 16 if dtype == "bf16" else values.astype(np.float16).view(np.uint16)
            f.write(bits.astype(np.uint16).tobytes())


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("preset", choices=sorted(PRESETS))
    parser.add_argument("out", type=Path)
    parser.add_argument("--dtype", choices=["bf16", "f16"], default="bf16")
    args = parser.parse_args()
    cfg = dict(PRESETS[args.preset], torch_dtype={"bf16": "bfloat16", "f16": "float16"}[args.dtype])
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "config.json").write_text(json.dumps(cfg, indent=2))
    write_safetensors(args.out / "model.safetensors", tensor_shapes(cfg), args.dtype)


if __name__ == "__main__":
    main()
