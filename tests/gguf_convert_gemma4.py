"""The Gemma 4 fixtures (Gemma4ForCausalLM) converted to GGUF the way llama.cpp's converter writes a
`gemma4` file, for gguf_convert.convert.

Names: llama.cpp's (gguf-py's constants for MODEL_ARCH.GEMMA4): Gemma 3's four norms, the
per-layer embeddings (per_layer_token_embd, per_layer_model_proj, per_layer_proj_norm, blk.N.inp_gate
/ proj / post_norm) and blk.N.layer_output_scale for the layer scalar. Values: the checkpoint's,
norms included (Gemma 4's RMSNorm has no 1 + w: nothing is added), plus rope_freqs.weight: the
full layers' proportional RoPE as llama.cpp runs it, a divisor per frequency, 1 for the turning
ones and 1e30 for the still ones. Metadata: the keys src/models/gemma4.cpp reads, the full layers'
head dim as key_length and the sliding layers' as key_length_swa, the layer kinds as a flag a layer
(sliding_window_pattern), feed_forward_length a list where the shared-KV layers' MLPs are twice as
wide; the tokenizer gguf_synthetic's Gemma 4 vocabulary, as many tokens as the model has rows.
Matrices: gguf_convert's block-format mix (quantize), or the checkpoint's dtype; vectors F32.
"""

import json
from pathlib import Path

import gguf
import numpy as np
from gguf_convert_hybrids import STORED_AS, finish, load_checkpoint
from gguf_synthetic import add_tokenizer, gemma4_tokenizer

Q = gguf.GGMLQuantizationType
A = "gemma4."
GLOBAL_NAMES = {
    "model.embed_tokens.weight": "token_embd.weight",
    "model.norm.weight": "output_norm.weight",
    "lm_head.weight": "output.weight",
    "model.embed_tokens_per_layer.weight": "per_layer_token_embd.weight",
    "model.per_layer_model_projection.weight": "per_layer_model_proj.weight",
    "model.per_layer_projection_norm.weight": "per_layer_proj_norm.weight",
}
BLOCK_NAMES = {
    "input_layernorm.weight": "attn_norm.weight",
    "self_attn.q_proj.weight": "attn_q.weight",
    "self_attn.k_proj.weight": "attn_k.weight",
    "self_attn.v_proj.weight": "attn_v.weight",
    "self_attn.o_proj.weight": "attn_output.weight",
    "self_attn.q_norm.weight": "attn_q_norm.weight",
    "self_attn.k_norm.weight": "attn_k_norm.weight",
    "post_attention_layernorm.weight": "post_attention_norm.weight",
    "pre_feedforward_layernorm.weight": "ffn_norm.weight",
    "mlp.gate_proj.weight": "ffn_gate.weight",
    "mlp.up_proj.weight": "ffn_up.weight",
    "mlp.down_proj.weight": "ffn_down.weight",
    "post_feedforward_layernorm.weight": "post_ffw_norm.weight",
    "per_layer_input_gate.weight": "inp_gate.weight",
    "per_layer_projection.weight": "proj.weight",
    "post_per_layer_input_norm.weight": "post_norm.weight",
    "layer_scalar": "layer_output_scale.weight",
}
STILL = 1e30  # the converter's divisor for a frequency that does not turn


def gguf_name(hf: str) -> str:
    if hf.startswith("model.layers."):
        _, _, layer, rest = hf.split(".", 3)
        return f"blk.{layer}.{BLOCK_NAMES[rest]}"
    return GLOBAL_NAMES[hf]


def global_head_dim(cfg: dict) -> int:
    """transformers 5 saves the full layers' head_dim per layer; hub configs as global_head_dim."""
    full = [str(i) for i, kind in enumerate(cfg["layer_types"]) if kind == "full_attention"]
    return (cfg.get("per_layer_config") or {}).get(full[0], {}).get("head_dim", cfg.get("global_head_dim", 512))


def rope_freqs(cfg: dict) -> np.ndarray:
    """The full layers' RoPE divisors: the first partial_rotary_factor of head_dim / 2 turn."""
    half = global_head_dim(cfg) // 2
    turning = int(cfg["rope_parameters"]["full_attention"]["partial_rotary_factor"] * half)
    return np.array([1.0] * turning + [STILL] * (half - turning), np.float32)


def write_metadata(writer, cfg: dict) -> None:
    layers, shared = cfg["num_hidden_layers"], cfg.get("num_kv_shared_layers", 0)
    full, swa = global_head_dim(cfg), cfg["head_dim"]
    ffn = cfg["intermediate_size"]
    if cfg.get("use_double_wide_mlp") and shared:
        writer.add_array(A + "feed_forward_length", [ffn] * (layers - shared) + [2 * ffn] * shared)
    else:
        writer.add_uint32(A + "feed_forward_length", ffn)
    rope = cfg["rope_parameters"]
    for key, value in (
        ("context_length", cfg["max_position_embeddings"]),
        ("embedding_length", cfg["hidden_size"]),
        ("block_count", layers),
        ("attention.head_count", cfg["num_attention_heads"]),
        ("attention.head_count_kv", cfg["num_key_value_heads"]),
        ("attention.key_length", full),
        ("attention.value_length", full),
        ("attention.key_length_swa", swa),
        ("attention.value_length_swa", swa),
        ("rope.dimension_count", full),
        ("rope.dimension_count_swa", swa),
        ("attention.sliding_window", cfg["sliding_window"]),
        ("attention.shared_kv_layers", shared),
        ("embedding_length_per_layer_input", cfg.get("hidden_size_per_layer_input") or 0),
    ):
        writer.add_uint32(A + key, value)
    writer.add_float32(A + "attention.layer_norm_rms_epsilon", cfg["rms_norm_eps"])
    writer.add_float32(A + "rope.freq_base", rope["full_attention"]["rope_theta"])
    writer.add_float32(A + "rope.freq_base_swa", rope["sliding_attention"]["rope_theta"])
    writer.add_float32(A + "final_logit_softcapping", cfg.get("final_logit_softcapping") or 0.0)
    writer.add_array(A + "attention.sliding_window_pattern", [k == "sliding_attention" for k in cfg["layer_types"]])


def convert_gemma4(fixture: Path, out: Path, quantize: bool, types: dict) -> Path:
    """out/model.gguf and out/dequantized/ (the values the GGUF holds, as f32 safetensors)."""
    cfg = json.loads((fixture / "config.json").read_text())
    writer = gguf.GGUFWriter(out / "model.gguf", "gemma4")
    write_metadata(writer, cfg)
    add_tokenizer(writer, gemma4_tokenizer(cfg["vocab_size"]))
    dequantized = {}
    for hf, (w, dtype) in load_checkpoint(fixture / "model.safetensors").items():
        name = gguf_name(hf)
        if w.ndim != 2:
            qtype = Q.F32
        elif quantize:
            qtype = types.get(name.split(".")[-2], Q.F16) if w.shape[1] % 32 == 0 else Q.F16
        else:
            qtype = STORED_AS[dtype]
        data = gguf.quants.quantize(w, qtype)
        writer.add_tensor(name, data, raw_dtype=qtype)
        dequantized[hf] = gguf.quants.dequantize(data, qtype).reshape(w.shape).astype(np.float32)
    writer.add_tensor("rope_freqs.weight", rope_freqs(cfg), raw_dtype=Q.F32)
    return finish(writer, out, cfg, dequantized)
