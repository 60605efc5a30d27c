"""Gemma 2: Gemma with a norm after each sublayer too (four per layer: the sublayer's output is
normalised before the residual add), attention scaled by query_pre_attn_scalar^-0.5, attention
scores and final logits softcapped (cap * tanh(x / cap)), and sliding-window layers alternating
with full ones (layer_types)."""

from __future__ import annotations

from ..runtime.graph import Tensor
from .builder import GraphBuilder
from .gemma import embedding_scale, lm_head, norm_offset


def build_gemma2(b: GraphBuilder):
    cfg = b.cfg
    one = norm_offset(cfg)
    scale = cfg.query_pre_attn_scalar**-0.5 if cfg.query_pre_attn_scalar else None
    x = b.embedding("model.embed_tokens.weight", scale=embedding_scale(cfg))
    for i in range(cfg.num_layers):
        p = f"model.layers.{i}."
        attn = p + "self_attn."
        qkv = b.qkv(x, attn, norm=p + "input_layernorm.weight", norm_offset=one)
        window = cfg.sliding_window if cfg.sliding(i) else 0
        a = b.attention(b.rope_kv(qkv), window=window, scale=scale, softcap=cfg.attn_logit_softcapping)
        x = post_normed_sublayers(b, x, a, p, one)
    last = b.rmsnorm(x, "model.norm.weight", last_row_only=True, offset=one)
    logits = b.logits(last, lm_head(cfg))
    if cfg.final_logit_softcapping:
        b.softcap(logits, cfg.final_logit_softcapping)
    return b.g


def post_normed_sublayers(
    b: GraphBuilder, x: Tensor, a: Tensor, p: str, one: float, out_scale: str | None = None
) -> Tensor:
    """The rest of a Gemma 2/3/4 layer after its attention `a`: x + norm(O · a), then
    x + norm(down · GELU-gated MLP of norm(x)), times the `out_scale` weight where given (Gemma
    4's layer_scalar); `p` is the layer's "model.layers.N." prefix."""
    h = b.linear(a, [p + "self_attn.o_proj.weight"])
    x = b.rmsnorm(h, p + "post_attention_layernorm.weight", offset=one, residual=x)
    m = b.gated_mlp(
        x,
        [p + "mlp.gate_proj.weight", p + "mlp.up_proj.weight"],
        norm=p + "pre_feedforward_layernorm.weight",
        gelu=True,
        norm_offset=one,
    )
    h = b.linear(m, [p + "mlp.down_proj.weight"])
    return b.rmsnorm(h, p + "post_feedforward_layernorm.weight", offset=one, residual=x, out_scale=out_scale)
