"""Gemma 3 (text; also the text tower of Gemma3ForConditionalGeneration checkpoints): Gemma 2's
four-norm layer with RMSNorm on each q and k head (as (1 + w)) before RoPE instead of attention
softcapping, and two RoPEs: sliding layers (five of every six) use their own base (1e4) while
full layers use the global one (1e6, with linear scaling on the larger models). Its 262k-token
embedding, also the tied LM head, spans several storage bindings."""

from __future__ import annotations

from .builder import GraphBuilder
from .gemma import embedding_scale, lm_head, norm_offset
from .gemma2 import post_normed_sublayers


def build_gemma3(b: GraphBuilder):
    cfg = b.cfg
    one = norm_offset(cfg)
    scale = cfg.query_pre_attn_scalar**-0.5 if cfg.query_pre_attn_scalar else None
    local_theta = cfg.local_rope_theta if cfg.local_rope_theta is not None else cfg.rope_theta
    sliding_layers = any(cfg.sliding(i) for i in range(cfg.num_layers))
    local_rope = b.rope_table("cos_sin_local", local_theta, cfg.local_rope_scaling) if sliding_layers else None
    x = b.embedding("model.embed_tokens.weight", scale=embedding_scale(cfg))
    for i in range(cfg.num_layers):
        p = f"model.layers.{i}."
        attn = p + "self_attn."
        qkv = b.qkv(x, attn, norm=p + "input_layernorm.weight", norm_offset=one)
        sliding = cfg.sliding(i)
        kv = b.rope_kv(
            qkv,
            q_norm=attn + "q_norm.weight",
            k_norm=attn + "k_norm.weight",
            cos_sin=local_rope if sliding else None,
            norm_offset=one,
        )
        a = b.attention(kv, window=cfg.sliding_window if sliding else 0, scale=scale)
        x = post_normed_sublayers(b, x, a, p, one)  # as Gemma 2's
    last = b.rmsnorm(x, "model.norm.weight", last_row_only=True, offset=one)
    logits = b.logits(last, lm_head(cfg))
    if cfg.final_logit_softcapping:
        b.softcap(logits, cfg.final_logit_softcapping)
    return b.g
