"""Qwen3.5 (text; also the text tower of Qwen3_5ForConditionalGeneration checkpoints): a hybrid
of Gated DeltaNet layers (linear attention with a recurrent state: models/recurrent_ops.py) and,
every fourth layer, full attention whose q_proj gives each head its queries then an output gate
(attention * sigmoid(gate) before o_proj), with (1 + w) q/k norms and partial rotary (a quarter
of head_dim). Every RMSNorm but the DeltaNet's gated one multiplies by (1 + w)."""

from __future__ import annotations

from .builder import GraphBuilder
from .gemma import lm_head, norm_offset


def build_qwen3_5(b: GraphBuilder):
    cfg = b.cfg
    one = norm_offset(cfg)
    x = b.embedding("model.embed_tokens.weight")
    for i in range(cfg.num_layers):
        p = f"model.layers.{i}."
        norm = p + "input_layernorm.weight"
        if cfg.layer_type(i) == "linear_attention":
            mixed = b.gated_delta_net(x, p + "linear_attn.", norm=norm, norm_offset=one)
            x = b.linear(mixed, [p + "linear_attn.out_proj.weight"], residual=x)
        else:
            attn = p + "self_attn."
            qkv = b.qkv(x, attn, norm=norm, norm_offset=one)
            kv = b.rope_kv(
                qkv, q_norm=attn + "q_norm.weight", k_norm=attn + "k_norm.weight", norm_offset=one, gated=True
            )
            x = b.linear(b.attention(kv), [attn + "o_proj.weight"], residual=x)
        m = b.gated_mlp(
            x,
            [p + "mlp.gate_proj.weight", p + "mlp.up_proj.weight"],
            p + "post_attention_layernorm.weight",
            norm_offset=one,
        )
        x = b.linear(m, [p + "mlp.down_proj.weight"], residual=x)
    last = b.rmsnorm(x, "model.norm.weight", last_row_only=True, offset=one)
    b.logits(last, lm_head(cfg))
    return b.g
