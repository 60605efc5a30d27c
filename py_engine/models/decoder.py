"""The pre-norm decoder stack shared by the Llama family and its descendants (Mistral, Qwen2/3,
SmolLM): embed → N × [norm + fused QKV → (QK-norm) RoPE + KV append → attention → O + residual →
norm + fused gate|up + SiLU·mul → down + residual] → final norm (last row) → LM head. The norms
run inside the projections that read them (gemv.wgsl / matmul.wgsl NORM), the activation inside
gate|up (GATED) where gate|up fits one binding."""

from __future__ import annotations

from .builder import GraphBuilder


def build_decoder(b: GraphBuilder, *, qkv_bias: bool = False, qk_norm: bool = False, window: int = 0):
    cfg = b.cfg
    x = b.embedding("model.embed_tokens.weight")
    for i in range(cfg.num_layers):
        p = f"model.layers.{i}."
        attn = p + "self_attn."
        qkv = b.qkv(x, attn, norm=p + "input_layernorm.weight", bias=qkv_bias)
        kv = b.rope_kv(
            qkv,
            q_norm=attn + "q_norm.weight" if qk_norm else None,
            k_norm=attn + "k_norm.weight" if qk_norm else None,
            interleaved=cfg.rope_interleaved,
        )
        a = b.attention(kv, window=window)
        x = b.linear(a, [attn + "o_proj.weight"], residual=x)
        m = b.gated_mlp(
            x, [p + "mlp.gate_proj.weight", p + "mlp.up_proj.weight"], norm=p + "post_attention_layernorm.weight"
        )
        x = b.linear(m, [p + "mlp.down_proj.weight"], residual=x)
    last = b.rmsnorm(x, "model.norm.weight", last_row_only=True)
    head = "model.embed_tokens.weight" if cfg.tie_word_embeddings else "lm_head.weight"
    b.logits(last, head)
    return b.g
