"""Phi-3 / Phi-3.5 / Phi-4-mini: Llama's layer with fused weights — one qkv_proj (q rows, then k,
then v) and one gate_up_proj (gate rows, then up) — partial rotary (partial_rotary_factor: only
the first rotary_dim dims of a head turn), LongRoPE scaling (models/rope.py) and, when
configured, a sliding window on every layer."""

from __future__ import annotations

from .builder import GraphBuilder


def build_phi3(b: GraphBuilder):
    cfg = b.cfg
    x = b.embedding("model.embed_tokens.weight")
    for i in range(cfg.num_layers):
        p = f"model.layers.{i}."
        qkv = b.linear(x, [p + "self_attn.qkv_proj.weight"], norm=p + "input_layernorm.weight")
        a = b.attention(b.rope_kv(qkv, interleaved=cfg.rope_interleaved), window=cfg.sliding_window)
        x = b.linear(a, [p + "self_attn.o_proj.weight"], residual=x)
        m = b.gated_mlp(x, [p + "mlp.gate_up_proj.weight"], norm=p + "post_attention_layernorm.weight")
        x = b.linear(m, [p + "mlp.down_proj.weight"], residual=x)
    last = b.rmsnorm(x, "model.norm.weight", last_row_only=True)
    b.logits(last, "model.embed_tokens.weight" if cfg.tie_word_embeddings else "lm_head.weight")
    return b.g
