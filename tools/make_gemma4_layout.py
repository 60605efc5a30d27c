"""The GGUF layout (metadata + tensor table, no weights) of a Gemma 4 text model as llama.cpp's
converter and a Q4_K_M llama-quantize write it, for the GPU speed comparison: `gguf_shape.py build`
(../shared/gpu-bench) makes a random-weight GGUF of it that llama.cpp and Wisp both load
(benchmarks/versus_llamacpp.py --models gemma4_e2b runs this when the layout is missing).

    python3 tools/make_gemma4_layout.py OUT_DIR [--config text_config.json] [--name gemma4_e2b]

The shapes come from a transformers Gemma4TextConfig dict (default: Gemma-4-E2B's text_config, no
network): 35 layers of hidden 1536, 8 query heads over 1 KV head of 256 dims (sliding layers) or
512 (every fifth layer, full), MLPs of 6144, twice that in the 20 shared-KV layers
(use_double_wide_mlp), per-layer embeddings of 256 a layer, a 262,144-token vocabulary. The tensors
are what src/models/gemma4.cpp loads, in the formats llama-quantize's Q4_K_M rules give them
(src/llama-quant.cpp): Q4_K matrices; Q6_K for attn_v and ffn_down where use_more_bits picks the
layer, and for both embedding tables (token_embd is tied to the output; per_layer_token_embd counts
as a token embedding); per_layer_model_proj is never quantized (BF16, the checkpoint's); vectors
F32. The shared-KV layers keep their K/V projections, as the hub checkpoint does (llama.cpp loads
them unused). rope_freqs.weight carries its values ("values": 1 for the 64 frequencies that turn,
1e30 for the rest), which versus_llamacpp.py writes over the random ones, since Wisp refuses other
RoPE divisors. The tokenizer is a stand-in of the real size ("gemma4" model: Gemma 4's special
tokens, <0xNN> bytes, a few pieces and merges, <unusedN> to fill): llama-bench never tokenizes.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

F32, BF16, Q4_K, Q6_K = 0, 30, 12, 14
BLOCK = {F32: (1, 4), BF16: (1, 2), Q4_K: (256, 144), Q6_K: (256, 210)}  # elements, bytes per block
UINT32, FLOAT32, BOOL, STRING, ARRAY = 4, 6, 7, 8, "array"
A = "gemma4."
STILL = 1e30  # the converter's RoPE divisor for a frequency that does not turn

E2B = {  # google/gemma-4-E2B(-it) config.json's text_config, as far as the text model goes
    "hidden_size": 1536,
    "num_hidden_layers": 35,
    "num_attention_heads": 8,
    "num_key_value_heads": 1,
    "head_dim": 256,
    "global_head_dim": 512,
    "intermediate_size": 6144,
    "use_double_wide_mlp": True,
    "num_kv_shared_layers": 20,
    "hidden_size_per_layer_input": 256,
    "vocab_size": 262144,
    "vocab_size_per_layer_input": 262144,
    "sliding_window": 512,
    "layer_types": (["sliding_attention"] * 4 + ["full_attention"]) * 7,
    "rope_parameters": {
        "full_attention": {"rope_type": "proportional", "partial_rotary_factor": 0.25, "rope_theta": 1000000.0},
        "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
    },
    "final_logit_softcapping": 30.0,
    "rms_norm_eps": 1e-6,
    "max_position_embeddings": 131072,
    "tie_word_embeddings": True,
}


def tensor(name: str, shape: list[int], kind: int) -> dict:
    """A row of the table; shape in ggml order (ne0, the row length, first)."""
    elements = 1
    for n in shape:
        elements *= n
    per_block, block_bytes = BLOCK[kind]
    return {"name": name, "shape": shape, "type": kind, "nbytes": elements // per_block * block_bytes}


def scalar(kind: int, value) -> dict:
    return {"type": kind, "value": value}


def array(kind: int, values: list) -> dict:
    return {"type": ARRAY, "sub": kind, "value": values}


def use_more_bits(layer: int, layers: int) -> bool:
    """llama-quant.cpp's pick of the attn_v / ffn_down tensors Q4_K_M keeps in Q6_K."""
    return layer < layers // 8 or layer >= 7 * layers // 8 or (layer - layers // 8) % 3 == 2


def tokenizer(vocab: int) -> dict:
    specials = ["<pad>", "<eos>", "<bos>", "<unk>", "<mask>", "<|turn>", "<turn|>", "<|tool_response>"]
    pieces = ["▁", "t", "h", "e", "▁t", "th", "▁th", "the", "▁the", "\n", "\n\n"]
    tokens = specials + [f"<0x{b:02X}>" for b in range(256)] + pieces
    types = [3, 3, 3, 2, 3, 3, 3, 3] + [6] * 256 + [1] * len(pieces)
    tokens += [f"<unused{i}>" for i in range(vocab - len(tokens))]
    types += [3] * (vocab - len(types))
    return {
        "tokenizer.ggml.model": scalar(STRING, "gemma4"),
        "tokenizer.ggml.pre": scalar(STRING, "gemma4"),
        "tokenizer.ggml.tokens": array(STRING, tokens),
        "tokenizer.ggml.token_type": array(5, types),  # INT32
        "tokenizer.ggml.merges": array(STRING, ["▁ t", "t h", "▁t h", "th e", "▁th e", "\n \n"]),
        "tokenizer.ggml.bos_token_id": scalar(UINT32, 2),
        "tokenizer.ggml.eos_token_id": scalar(UINT32, 1),
        "tokenizer.ggml.unknown_token_id": scalar(UINT32, 3),
        "tokenizer.ggml.padding_token_id": scalar(UINT32, 0),
        "tokenizer.ggml.add_bos_token": scalar(BOOL, True),
    }


def metadata(cfg: dict, name: str) -> dict:
    layers, shared = cfg["num_hidden_layers"], cfg["num_kv_shared_layers"]
    ffn, rope = cfg["intermediate_size"], cfg["rope_parameters"]
    widths = [ffn * (2 if cfg["use_double_wide_mlp"] and i >= layers - shared else 1) for i in range(layers)]
    full, swa = cfg["global_head_dim"], cfg["head_dim"]
    return {
        "general.architecture": scalar(STRING, "gemma4"),
        "general.name": scalar(STRING, f"{name} (random weights, real layout)"),
        "general.file_type": scalar(UINT32, 15),  # LLAMA_FTYPE_MOSTLY_Q4_K_M
        "general.quantization_version": scalar(UINT32, 2),
        A + "context_length": scalar(UINT32, cfg["max_position_embeddings"]),
        A + "embedding_length": scalar(UINT32, cfg["hidden_size"]),
        A + "block_count": scalar(UINT32, layers),
        A + "feed_forward_length": array(UINT32, widths) if len(set(widths)) > 1 else scalar(UINT32, ffn),
        A + "attention.head_count": scalar(UINT32, cfg["num_attention_heads"]),
        A + "attention.head_count_kv": scalar(UINT32, cfg["num_key_value_heads"]),
        A + "attention.key_length": scalar(UINT32, full),
        A + "attention.value_length": scalar(UINT32, full),
        A + "attention.key_length_swa": scalar(UINT32, swa),
        A + "attention.value_length_swa": scalar(UINT32, swa),
        A + "attention.layer_norm_rms_epsilon": scalar(FLOAT32, cfg["rms_norm_eps"]),
        A + "attention.sliding_window": scalar(UINT32, cfg["sliding_window"]),
        A + "attention.sliding_window_pattern": array(BOOL, [k == "sliding_attention" for k in cfg["layer_types"]]),
        A + "attention.shared_kv_layers": scalar(UINT32, shared),
        A + "embedding_length_per_layer_input": scalar(UINT32, cfg["hidden_size_per_layer_input"]),
        A + "rope.freq_base": scalar(FLOAT32, rope["full_attention"]["rope_theta"]),
        A + "rope.freq_base_swa": scalar(FLOAT32, rope["sliding_attention"]["rope_theta"]),
        A + "rope.dimension_count": scalar(UINT32, full),
        A + "rope.dimension_count_swa": scalar(UINT32, swa),
        A + "final_logit_softcapping": scalar(FLOAT32, cfg["final_logit_softcapping"]),
        **tokenizer(cfg["vocab_size"]),
    }


def tensors(cfg: dict) -> list[dict]:
    hidden, layers, vocab = cfg["hidden_size"], cfg["num_hidden_layers"], cfg["vocab_size"]
    heads, kv_heads, width = cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["hidden_size_per_layer_input"]
    shared, ffn = cfg["num_kv_shared_layers"], cfg["intermediate_size"]
    half = cfg["global_head_dim"] // 2
    turning = int(cfg["rope_parameters"]["full_attention"]["partial_rotary_factor"] * half)
    freqs = tensor("rope_freqs.weight", [half], F32)
    out = [{**freqs, "values": [1.0] * turning + [STILL] * (half - turning)}]
    out += [
        tensor("token_embd.weight", [hidden, vocab], Q6_K),  # tied: quantized as the output
        tensor("per_layer_token_embd.weight", [width * layers, vocab], Q6_K),
        tensor("per_layer_model_proj.weight", [hidden, width * layers], BF16),
        tensor("per_layer_proj_norm.weight", [width], F32),
    ]
    for i in range(layers):
        b = f"blk.{i}."
        head = cfg["global_head_dim"] if cfg["layer_types"][i] == "full_attention" else cfg["head_dim"]
        wide = ffn * (2 if cfg["use_double_wide_mlp"] and i >= layers - shared else 1)
        more = Q6_K if use_more_bits(i, layers) else Q4_K
        out += [
            tensor(b + "attn_norm.weight", [hidden], F32),
            tensor(b + "attn_q.weight", [hidden, heads * head], Q4_K),
            tensor(b + "attn_k.weight", [hidden, kv_heads * head], Q4_K),
            tensor(b + "attn_v.weight", [hidden, kv_heads * head], more),
            tensor(b + "attn_output.weight", [heads * head, hidden], Q4_K),
            tensor(b + "attn_q_norm.weight", [head], F32),
            tensor(b + "attn_k_norm.weight", [head], F32),
            tensor(b + "post_attention_norm.weight", [hidden], F32),
            tensor(b + "ffn_norm.weight", [hidden], F32),
            tensor(b + "ffn_gate.weight", [hidden, wide], Q4_K),
            tensor(b + "ffn_up.weight", [hidden, wide], Q4_K),
            tensor(b + "ffn_down.weight", [wide, hidden], more),
            tensor(b + "post_ffw_norm.weight", [hidden], F32),
            tensor(b + "inp_gate.weight", [hidden, width], Q4_K),
            tensor(b + "proj.weight", [width, hidden], Q4_K),
            tensor(b + "post_norm.weight", [hidden], F32),
            tensor(b + "layer_output_scale.weight", [1], F32),
        ]
    return out + [tensor("output_norm.weight", [hidden], F32)]


def layout(cfg: dict, name: str = "gemma4_e2b") -> dict:
    """gguf_shape.py's JSON form of the model of a Gemma4TextConfig dict."""
    return {"kv": metadata(cfg, name), "tensors": tensors(cfg)}


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out", type=Path)
    parser.add_argument("--config", type=Path, help="a transformers text_config as JSON (default: E2B's)")
    parser.add_argument("--name", default="gemma4_e2b")
    args = parser.parse_args()
    cfg = {**E2B, **json.loads(args.config.read_text())} if args.config else E2B
    args.out.mkdir(parents=True, exist_ok=True)
    data = layout(cfg, args.name)
    path = args.out / f"{args.name}.json"
    path.write_text(json.dumps(data))
    size = sum(t["nbytes"] for t in data["tensors"])
    print(f"{path}: {len(data['tensors'])} tensors, {size / 2**30:.2f} GiB of weights")


if __name__ == "__main__":
    main()
