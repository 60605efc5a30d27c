"""A tiny HF fixture converted to GGUF the way llama.cpp's converter does it, plus the same
weights dequantized as an f32 safetensors model, for tests that compare the two.

What the converter does that matters here: llama.cpp's names (fused Phi-3 tensors, Gemma 2/3's
four norms), Llama Q/K rows permuted for interleaved RoPE, Gemma norm weights stored with the 1
of (1 + w) added, Phi-3's LongRoPE factors as tensors, matrices quantized by gguf-py to a mix of
block formats (a fused QKV spanning two), and only the metadata llama.cpp reads (Gemma's
attention scale is not stored: llama.cpp derives it from head_dim, so the dequantized config says
the same). The hybrids (Qwen3.5, LFM2) are converted by gguf_convert_hybrids.py, Gemma 4 by
gguf_convert_gemma4.py."""

import json
import math
from pathlib import Path

import gguf
import numpy as np
from gguf_convert_gemma4 import convert_gemma4
from gguf_convert_hybrids import HYBRID_ARCHS, convert_hybrid
from safetensors.numpy import load_file, save_file

Q = gguf.GGMLQuantizationType
# Per llama.cpp tensor kind: a mix of block formats (rows whose K fits no 32-block: F16).
TYPES = {
    "token_embd": Q.Q5_0,
    "attn_q": Q.Q8_0,
    "attn_k": Q.Q8_0,
    "attn_v": Q.Q4_0,
    "attn_qkv": Q.Q8_0,
    "attn_output": Q.Q4_1,
    "ffn_gate": Q.Q5_1,
    "ffn_up": Q.Q5_1,
    "ffn_down": Q.F16,
    "output": Q.Q8_0,
}
ARCHS = {
    "LlamaForCausalLM": "llama",
    "Qwen2ForCausalLM": "qwen2",
    "GemmaForCausalLM": "gemma",
    "Gemma2ForCausalLM": "gemma2",
    "Gemma3ForCausalLM": "gemma3",
    "Phi3ForCausalLM": "phi3",
}
BLOCK_NAMES = {
    "self_attn.q_proj": "attn_q",
    "self_attn.k_proj": "attn_k",
    "self_attn.v_proj": "attn_v",
    "self_attn.qkv_proj": "attn_qkv",
    "self_attn.o_proj": "attn_output",
    "self_attn.q_norm": "attn_q_norm",
    "self_attn.k_norm": "attn_k_norm",
    "mlp.gate_proj": "ffn_gate",
    "mlp.up_proj": "ffn_up",
    "mlp.gate_up_proj": "ffn_up",
    "mlp.down_proj": "ffn_down",
    "input_layernorm": "attn_norm",
    "post_attention_layernorm": "ffn_norm",
    "pre_feedforward_layernorm": "ffn_norm",
    "post_feedforward_layernorm": "post_ffw_norm",
}
FOUR_NORMS = {"post_attention_layernorm": "post_attention_norm"}  # Gemma 2/3


def gguf_name(hf: str, arch: str) -> str:
    if hf.startswith("model.layers."):
        _, _, layer, rest = hf.split(".", 3)
        module, kind = rest.rsplit(".", 1)
        names = {**BLOCK_NAMES, **FOUR_NORMS} if arch in ("gemma2", "gemma3") else BLOCK_NAMES
        return f"blk.{layer}.{names[module]}.{kind}"
    return {
        "model.embed_tokens.weight": "token_embd.weight",
        "model.norm.weight": "output_norm.weight",
        "lm_head.weight": "output.weight",
    }[hf]


def permute(w: np.ndarray, heads: int) -> np.ndarray:
    """llama.cpp's converter: each head's rows reordered so RoPE pairs are adjacent."""
    return w.reshape(heads, 2, w.shape[0] // heads // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def unpermute(w: np.ndarray, heads: int) -> np.ndarray:
    return w.reshape(heads, w.shape[0] // heads // 2, 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def write_metadata(writer, arch: str, cfg: dict) -> None:
    heads, kv_heads = cfg["num_attention_heads"], cfg["num_key_value_heads"]
    head_dim = cfg.get("head_dim") or cfg["hidden_size"] // heads
    rope = cfg.get("rope_parameters") or {}
    writer.add_block_count(cfg["num_hidden_layers"])
    writer.add_context_length(cfg["max_position_embeddings"])
    writer.add_embedding_length(cfg["hidden_size"])
    writer.add_feed_forward_length(cfg["intermediate_size"])
    writer.add_head_count(heads)
    writer.add_head_count_kv(kv_heads)
    writer.add_key_length(head_dim)
    writer.add_value_length(head_dim)
    writer.add_layer_norm_rms_eps(cfg["rms_norm_eps"])
    writer.add_vocab_size(cfg["vocab_size"])
    if arch == "gemma3":
        full, local = rope["full_attention"], rope["sliding_attention"]
        writer.add_rope_freq_base(full["rope_theta"])
        if full.get("rope_type") == "linear":
            writer.add_rope_scaling_type(gguf.RopeScalingType.LINEAR)
            writer.add_rope_scaling_factor(full["factor"])
        writer.add_float32(f"{arch}.rope.freq_base_swa", local["rope_theta"])
    else:
        writer.add_rope_freq_base(rope.get("rope_theta", cfg.get("rope_theta", 10000.0)))
    if arch in ("gemma2", "gemma3"):
        writer.add_sliding_window(cfg["sliding_window"])
        swa = [kind == "sliding_attention" for kind in cfg["layer_types"]]
        every = 2 if arch == "gemma2" else 6
        if swa != [i % every < every - 1 for i in range(len(swa))]:  # not llama.cpp's default pattern
            writer.add_array(f"{arch}.attention.sliding_window_pattern", swa)  # one flag per layer
    if arch == "gemma2":
        writer.add_attn_logit_softcapping(cfg["attn_logit_softcapping"])
        writer.add_final_logit_softcapping(cfg["final_logit_softcapping"])
    if arch == "phi3":
        writer.add_rope_dimension_count(int(head_dim * rope["partial_rotary_factor"]))
        original = rope["original_max_position_embeddings"]
        writer.add_rope_scaling_orig_ctx_len(original)
        factor = cfg["max_position_embeddings"] / original
        writer.add_rope_scaling_attn_factors(math.sqrt(1 + math.log(factor) / math.log(original)))


def convert(fixture: Path, out: Path, quantize: bool = True) -> Path:
    """Write out/model.gguf and, with the dequantized weights, out/dequantized/ (f32 safetensors).
    quantize=False (hybrids and Gemma 4 only): matrices keep the checkpoint's dtype."""
    cfg = json.loads((fixture / "config.json").read_text())
    if cfg["architectures"][0] in HYBRID_ARCHS:
        return convert_hybrid(fixture, out, quantize, TYPES)
    if cfg["architectures"][0] == "Gemma4ForCausalLM":
        return convert_gemma4(fixture, out, quantize, TYPES)
    arch = ARCHS[cfg["architectures"][0]]
    heads, kv_heads = cfg["num_attention_heads"], cfg["num_key_value_heads"]
    writer = gguf.GGUFWriter(out / "model.gguf", arch)
    write_metadata(writer, arch, cfg)
    dequantized = {}
    for hf, w in load_file(fixture / "model.safetensors").items():
        name = gguf_name(hf, arch)
        w = w.astype(np.float32)
        stored = w + 1 if arch.startswith("gemma") and name.endswith("norm.weight") else w
        if arch == "llama" and name.endswith(("attn_q.weight", "attn_k.weight")):
            stored = permute(stored, heads if "attn_q" in name else kv_heads)
        qtype = TYPES.get(name.split(".")[-2], Q.F32) if w.ndim == 2 and w.shape[1] % 32 == 0 else Q.F32
        if w.ndim == 2 and qtype == Q.F32:
            qtype = Q.F16
        data = gguf.quants.quantize(stored, qtype)
        writer.add_tensor(name, data, raw_dtype=qtype)
        restored = gguf.quants.dequantize(data, qtype).reshape(w.shape).astype(np.float32)
        if arch == "llama" and name.endswith(("attn_q.weight", "attn_k.weight")):
            restored = unpermute(restored, heads if "attn_q" in name else kv_heads).copy()
        dequantized[hf] = restored - 1 if stored is not w and arch.startswith("gemma") else restored
    if arch == "phi3":
        rope = cfg["rope_parameters"]
        for which in ("long", "short"):
            factors = np.array(rope[f"{which}_factor"], np.float32)
            writer.add_tensor(f"rope_factors_{which}.weight", factors, raw_dtype=Q.F32)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    plain = out / "dequantized"
    plain.mkdir()
    if arch == "llama":  # GGUF keeps llama3 scaling elsewhere
        cfg["rope_parameters"] = {"rope_theta": cfg["rope_parameters"]["rope_theta"], "rope_type": "default"}
    if arch in ("gemma2", "gemma3"):
        cfg["query_pre_attn_scalar"] = cfg.get("head_dim") or cfg["hidden_size"] // heads
    (plain / "config.json").write_text(json.dumps(cfg))
    save_file(dequantized, plain / "model.safetensors")
    return out / "model.gguf"
