"""Gemma (1): Llama's pre-norm decoder with Gemma's own choices — RMSNorm weights used as (1 + w),
embeddings scaled by sqrt(hidden) (rounded to the checkpoint's dtype, as transformers computes
it), GELU-tanh gated MLP, a head_dim of its own, often one KV head (multi-query), tied LM head."""

from __future__ import annotations

import math
import struct

from .builder import GraphBuilder


def norm_offset(cfg) -> float:
    """What a Gemma RMSNorm adds to its weight: 1, unless the file has added it already (GGUF)."""
    return 0.0 if cfg.norm_weights_include_one else 1.0


def embedding_scale(cfg, width: int | None = None) -> float:
    """sqrt(hidden) (or of another table's width: Gemma 4's per-layer embeddings), rounded as the
    checkpoint's dtype rounds it: transformers multiplies the embeddings by a tensor of their own
    dtype (bf16 sqrt(640) is 25.25, not 25.298…)."""
    scale = math.sqrt(width or cfg.hidden_size)
    if cfg.dtype == "bfloat16":
        bits = struct.unpack("<I", struct.pack("<f", scale))[0]
        bits = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16 << 16  # round to nearest even
        return struct.unpack("<f", struct.pack("<I", bits))[0]
    if cfg.dtype == "float16":
        return struct.unpack("<e", struct.pack("<e", scale))[0]
    return struct.unpack("<f", struct.pack("<f", scale))[0]


def lm_head(cfg) -> str:
    return "model.embed_tokens.weight" if cfg.tie_word_embeddings else "lm_head.weight"


def build_gemma(b: GraphBuilder):
    cfg = b.cfg
    one = norm_offset(cfg)
    x = b.embedding("model.embed_tokens.weight", scale=embedding_scale(cfg))
    for i in range(cfg.num_layers):
        p = f"model.layers.{i}."
        attn = p + "self_attn."
        qkv = b.qkv(x, attn, norm=p + "input_layernorm.weight", norm_offset=one)
        a = b.attention(b.rope_kv(qkv))
        x = b.linear(a, [attn + "o_proj.weight"], residual=x)
        m = b.gated_mlp(
            x,
            [p + "mlp.gate_proj.weight", p + "mlp.up_proj.weight"],
            norm=p + "post_attention_layernorm.weight",
            gelu=True,
            norm_offset=one,
        )
        x = b.linear(m, [p + "mlp.down_proj.weight"], residual=x)
    last = b.rmsnorm(x, "model.norm.weight", last_row_only=True, offset=one)
    b.logits(last, lm_head(cfg))
    return b.g
