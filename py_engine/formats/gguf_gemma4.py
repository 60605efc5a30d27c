"""llama.cpp's `gemma4` GGUF architecture read as transformers' Gemma4ForCausalLM (models/gemma4.py).

What llama.cpp reads (src/models/gemma4.cpp, llama-model.cpp) and what it becomes here:

    gemma4.attention.key_length / value_length         global_head_dim: the full layers' (E2B 512)
    gemma4.attention.key_length_swa / value_length_swa head_dim: the sliding layers' (E2B 256)
    gemma4.rope.dimension_count / _swa                 those head dims (nothing else is run)
    gemma4.rope.freq_base / freq_base_swa              rope_theta / local_rope_theta (both default 1e4)
    gemma4.attention.sliding_window_pattern            layer_types: a flag a layer, true = sliding
    gemma4.attention.sliding_window                    sliding_window
    gemma4.attention.shared_kv_layers                  kv_shared_layers (default 0)
    gemma4.embedding_length_per_layer_input            per_layer_input_size (0: no per-layer embeddings)
    gemma4.feed_forward_length                         intermediate_size; a list of one a layer, twice it
                                                       in the shared-KV layers: double_wide_mlp
    gemma4.final_logit_softcapping                     final_logit_softcapping (default 30, llama.cpp's)
    rope_freqs.weight                                  the full layers' proportional RoPE (proportional_rope)

The stored values are the checkpoint's: Gemma 4's RMSNorm multiplies by w itself, so the converter
adds no 1 (norm_weights_include_one stays False); Q/K rows are not permuted (Gemma's RoPE turns
halves, llama.cpp's NEOX); the layer scalar is a [1] tensor; both embedding tables are stored
unscaled (llama.cpp scales them by sqrt(width) in f32, as the engine does without a checkpoint
dtype). Two things are said differently and are checked to mean what transformers means: the full
layers' proportional RoPE is a divisor per frequency (rope_freqs.weight: 1 where a frequency
turns, 1e30 where it stays still), and a shared-KV layer reads the last KV layer if it is full, the
one before if sliding (transformers: the last earlier layer of its type): a file where the two
rules differ is refused. The attention scale is 1 (the graph's own).
"""

from __future__ import annotations

import math
import re
import struct

from ..errors import ModelFileError
from ..models.config import ModelConfig
from .gguf import GGUFFile
from .gguf_values import Metadata, is_flag

K = "gemma4."
_GLOBAL_NAMES = {
    "token_embd.weight": "model.embed_tokens.weight",
    "output_norm.weight": "model.norm.weight",
    "output.weight": "lm_head.weight",
    "per_layer_token_embd.weight": "model.embed_tokens_per_layer.weight",
    "per_layer_model_proj.weight": "model.per_layer_model_projection.weight",
    "per_layer_proj_norm.weight": "model.per_layer_projection_norm.weight",
}
# The part after "blk.N." -> the part after "model.layers.N.".
_BLOCK_NAMES = {
    "attn_norm.weight": "input_layernorm.weight",
    "attn_q.weight": "self_attn.q_proj.weight",
    "attn_k.weight": "self_attn.k_proj.weight",
    "attn_v.weight": "self_attn.v_proj.weight",
    "attn_output.weight": "self_attn.o_proj.weight",
    "attn_q_norm.weight": "self_attn.q_norm.weight",
    "attn_k_norm.weight": "self_attn.k_norm.weight",
    "post_attention_norm.weight": "post_attention_layernorm.weight",
    "ffn_norm.weight": "pre_feedforward_layernorm.weight",
    "ffn_gate.weight": "mlp.gate_proj.weight",
    "ffn_up.weight": "mlp.up_proj.weight",
    "ffn_down.weight": "mlp.down_proj.weight",
    "post_ffw_norm.weight": "post_feedforward_layernorm.weight",
    "inp_gate.weight": "per_layer_input_gate.weight",
    "proj.weight": "per_layer_projection.weight",
    "post_norm.weight": "post_per_layer_input_norm.weight",
    "layer_output_scale.weight": "layer_scalar",
}
_BLOCK = re.compile(r"blk\.(\d{1,6})\.(.+)")
# A divisor of a frequency that leaves it still: its angle stays below 1e-10 for 2^32 positions.
STILL = 1e20


def gemma4_tensor_name(gguf_name: str) -> str | None:
    """The HF name of a gemma4 tensor, or None (rope_freqs.weight keeps its own)."""
    if gguf_name in _GLOBAL_NAMES:
        return _GLOBAL_NAMES[gguf_name]
    match = _BLOCK.fullmatch(gguf_name)
    part = match and _BLOCK_NAMES.get(match.group(2))
    return None if not part else f"model.layers.{int(match.group(1))}.{part}"


def gemma4_config(cfg: ModelConfig, meta: Metadata) -> None:
    """Fill in what config_from_gguf's common keys leave out or read otherwise (the table above):
    config_from_gguf has read key_length as head_dim and the first layer's feed_forward_length."""
    layers, full_dim = cfg.num_layers, cfg.head_dim
    swa_dim = meta.integer(K + "attention.key_length_swa", minimum=2)
    if meta.integer(K + "attention.value_length_swa", minimum=1) != swa_dim:
        meta.fail(K + "attention.value_length_swa", f"differs from key_length_swa {swa_dim}")
    if cfg.rotary_dim != full_dim:
        meta.fail(K + "rope.dimension_count", f"is {cfg.rotary_dim}: Gemma 4's full layers turn all {full_dim} dims")
    if meta.integer(K + "rope.dimension_count_swa", cfg.rotary_dim) != swa_dim:
        meta.fail(K + "rope.dimension_count_swa", f"should be key_length_swa ({swa_dim}): sliding layers turn it all")
    cfg.head_dim, cfg.global_head_dim, cfg.partial_rotary_factor = swa_dim, full_dim, 1.0
    pattern = meta.array(K + "attention.sliding_window_pattern", is_flag, length=layers, what="flags (bool)")
    cfg.layer_types = ["sliding_attention" if sliding else "full_attention" for sliding in pattern]
    cfg.sliding_window = meta.integer(K + "attention.sliding_window", minimum=1)
    cfg.local_rope_theta = meta.number(K + "rope.freq_base_swa", 10000.0, positive=True)
    cfg.local_rope_scaling = None
    cap = meta.number(K + "final_logit_softcapping", 30.0)
    if cap < 0:
        meta.fail(K + "final_logit_softcapping", f"is {cap}: a softcap is positive, or 0 for none")
    cfg.final_logit_softcapping = cap
    cfg.per_layer_input_size = meta.integer(K + "embedding_length_per_layer_input")
    cfg.per_layer_vocab = cfg.vocab_size  # llama.cpp's per_layer_token_embd has a row a token
    cfg.kv_shared_layers = meta.integer(K + "attention.shared_kv_layers", 0, maximum=layers - 1)
    _check_kv_sharing(cfg, meta)
    cfg.double_wide_mlp = _double_wide(cfg, meta)
    if cfg.rope_scaling is not None and cfg.rope_scaling["rope_type"] != "linear":
        meta.fail(K + "rope.scaling.type", f"is {cfg.rope_scaling['rope_type']}: Gemma 4 takes linear scaling or none")


def _check_kv_sharing(cfg: ModelConfig, meta: Metadata) -> None:
    """llama.cpp's shared layer reads layer n_kv - 1 if full, n_kv - 2 if sliding (n_kv: the layers
    with KV); transformers' the last layer before n_kv of its type. Both must say the same."""
    shared = cfg.kv_shared_layers
    if not shared:
        return
    first = cfg.num_layers - shared
    if first < 2:
        meta.fail(K + "attention.shared_kv_layers", f"is {shared}: llama.cpp needs two layers with KV before them")
    for layer in range(first, cfg.num_layers):
        llama_cpp = first - (2 if cfg.sliding(layer) else 1)
        if cfg.kv_owner(layer) != llama_cpp:
            meta.fail(
                K + "attention.shared_kv_layers",
                f"makes layer {layer} read layer {llama_cpp}'s KV in llama.cpp but {cfg.kv_owner(layer)}'s in "
                "transformers (the last layer before the shared ones should be full, the one before it sliding)",
            )


def _double_wide(cfg: ModelConfig, meta: Metadata) -> bool:
    """Whether feed_forward_length is twice as wide in the shared-KV layers (use_double_wide_mlp);
    any other difference between layers is refused."""
    key, base = K + "feed_forward_length", cfg.intermediate_size
    widths = meta.per_layer(key, cfg.num_layers, minimum=1)
    first_shared = cfg.num_layers - cfg.kv_shared_layers
    if widths == [base] * cfg.num_layers:
        return False
    if cfg.kv_shared_layers and widths == [base] * first_shared + [2 * base] * cfg.kv_shared_layers:
        return True
    meta.fail(key, f"has widths {widths[:8]}...: Wisp takes one, or twice it in the shared-KV layers only")


def proportional_rope(gguf: GGUFFile, cfg: ModelConfig, read) -> dict | None:
    """The full layers' RoPE of a gemma4 file (HF's "proportional" rope_scaling) from
    rope_freqs.weight, a divisor per frequency (its length gguf_tensor_check has checked): the
    first frequencies turn (1), the rest stay still (1e30 from the converter); llama.cpp needs it
    wherever a layer is full. None for other architectures. read(start, length) reads the file."""
    if gguf.metadata.get("general.architecture") != "gemma4" or "full_attention" not in cfg.layer_types:
        return None
    info = gguf.tensors.get("rope_freqs.weight")
    if info is None:
        raise ModelFileError(gguf.path, "missing tensor 'rope_freqs.weight' (the full layers' RoPE frequencies)")
    if info.dtype != "F32" or len(info.shape) != 1:
        raise ModelFileError(gguf.path, f"rope_freqs.weight should be 1-D F32, not {info.dtype} {list(info.shape)}")
    half = info.shape[0]
    data = read(info.start, info.nbytes)
    if len(data) != 4 * half:
        raise ModelFileError(gguf.path, f"rope_freqs.weight: read {len(data)} bytes of {4 * half}: truncated")
    factors = struct.unpack(f"<{half}f", data)
    turning = next((i for i, f in enumerate(factors) if f != 1.0), half)
    bad = next((f for f in factors[turning:] if not (math.isfinite(f) and f >= STILL)), None)
    share = turning / half
    if bad is not None or int(share * 2 * half // 2) != turning:
        raise ModelFileError(
            gguf.path,
            f"rope_freqs.weight holds {bad if bad is not None else factors[turning]} after {turning} ones: "
            f"Wisp runs proportional RoPE only (1 for the frequencies that turn, then >= {STILL:g})",
        )
    scaling = {"rope_type": "proportional", "partial_rotary_factor": share}
    if cfg.rope_scaling is not None:  # linear (gemma4_config refuses the others)
        scaling["factor"] = cfg.rope_scaling["factor"]
    return scaling
