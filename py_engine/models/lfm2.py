"""LFM2 / LFM2.5 (Liquid): a hybrid of gated short-convolution blocks (in_proj gives B, C and X;
y = C * conv(B * X) over a window of conv_L_cache tokens, its rolling state in the graph:
models/recurrent_ops.py) and GQA attention blocks with q/k RMSNorms, each followed by a SwiGLU
feed-forward (w1 gate, w3 up, w2 down). The final norm is `embedding_norm`; the LM head is tied.
Kani-TTS-2's checkpoints (models/kani_tts.py) give each attention layer a RoPE table of its own."""

from __future__ import annotations

from .builder import GraphBuilder
from .gemma import lm_head
from .kani_tts import learnable_rope_table


def build_lfm2(b: GraphBuilder):
    cfg = b.cfg
    x = b.embedding("model.embed_tokens.weight")
    for i in range(cfg.num_layers):
        p = f"model.layers.{i}."
        norm = p + "operator_norm.weight"
        if cfg.layer_type(i) == "conv":
            conv = p + "conv."
            bias = cfg.conv_bias  # on in_proj, the conv and out_proj, or none
            bcx = b.linear(x, [conv + "in_proj.weight"], bias=[conv + "in_proj.bias"] if bias else None, norm=norm)
            y = b.short_conv(bcx, conv + "conv.weight", 3 * cfg.hidden_size, True, conv + "conv.bias" if bias else None)
            x = b.linear(y, [conv + "out_proj.weight"], bias=[conv + "out_proj.bias"] if bias else None, residual=x)
        else:
            attn = p + "self_attn."
            qkv = b.linear(x, [attn + f"{n}_proj.weight" for n in "qkv"], norm=norm)
            norms = {"q_norm": attn + "q_layernorm.weight", "k_norm": attn + "k_layernorm.weight"}
            kv = b.rope_kv(qkv, **norms, cos_sin=learnable_rope_table(b, i))
            x = b.linear(b.attention(kv), [attn + "out_proj.weight"], residual=x)
        m = b.gated_mlp(x, [p + "feed_forward.w1.weight", p + "feed_forward.w3.weight"], p + "ffn_norm.weight")
        x = b.linear(m, [p + "feed_forward.w2.weight"], residual=x)
    last = b.rmsnorm(x, "model.embedding_norm.weight", last_row_only=True)
    b.logits(last, lm_head(cfg))
    return b.g
