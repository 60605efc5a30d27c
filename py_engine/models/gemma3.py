"""Gemma 3 (text; also the text tower of Gemma3ForConditionalGeneration checkpoints): Gemma 2's
four-norm layer with RMSNorm on each q and k head (as (1 + w)) before RoPE instead of attention
softcapping, and two RoPEs: sliding layers (five of every six) use their own base (1e4) while
full layers use the global one (1e6, with linear scaling on the larger models). Its 262k-token
embedding, also the tied LM head, spans several storage bindings.

Its bare text model run bidirectionally is an encoder (Gemma3TextModel with
use_bidirectional_attention: EmbeddingGemma), built by build_gemma3_encoder with the same layers."""

from __future__ import annotations

from ..runtime.graph import Tensor
from .bert import encoder_attention, encoder_rope, input_tensor, sentence_head
from .builder import GraphBuilder
from .gemma import embedding_scale, lm_head, norm_offset
from .gemma2 import post_normed_sublayers


def build_gemma3(b: GraphBuilder):
    cfg = b.cfg
    scale = attention_scale(cfg)
    x = gemma3_layers(b, lambda kv, sliding: b.attention(kv, window=cfg.sliding_window if sliding else 0, scale=scale))
    last = b.rmsnorm(x, "model.norm.weight", last_row_only=True, offset=norm_offset(cfg))
    logits = b.logits(last, lm_head(cfg))
    if cfg.final_logit_softcapping:
        b.softcap(logits, cfg.final_logit_softcapping)
    return b.g


def build_gemma3_encoder(b: GraphBuilder):
    """EmbeddingGemma: Gemma 3's layers over packed texts (models/bert.py's encoder inputs), each row
    attending to its whole text in a full layer and, in a sliding one, to the rows of its text within
    bidirectional_reach of it (the `spans_local` input); RoPE by each row's position in its text; the
    final norm on every row, then the sentence-transformers head (pooling, Dense projections)."""
    cfg = b.cfg
    scale = attention_scale(cfg)
    spans = input_tensor(b, "spans", 8)
    local = input_tensor(b, "spans_local", 8) if any(cfg.sliding(i) for i in range(cfg.num_layers)) else None

    def attend(kv, sliding: bool) -> Tensor:
        norms = kv.norms
        qkv = encoder_rope(b, kv.qkv, norms["cos_sin"], norms["q_norm"], norms["k_norm"], norm_offset(cfg))
        return encoder_attention(b, qkv, local if sliding else spans, scale)

    x = gemma3_layers(b, attend)
    sentence_head(b, b.rmsnorm(x, "model.norm.weight", offset=norm_offset(cfg)))
    return b.g


def bidirectional_reach(cfg) -> int:
    """How many rows either side a sliding layer of the bidirectional model sees: transformers
    halves its sliding_window (Gemma3TextConfig: window // 2 + 1, exclusive), so |q - k| <= window // 2."""
    return cfg.sliding_window // 2


def attention_scale(cfg) -> float | None:
    return cfg.query_pre_attn_scalar**-0.5 if cfg.query_pre_attn_scalar else None


def gemma3_layers(b: GraphBuilder, attend) -> Tensor:
    """Gemma 3's embedding and layers: attend(kv, sliding) is a layer's attention of the rope_kv()
    KVLayer of its q|k|v (Q/K norms, and the RoPE table of its kind: the sliding layers' own base)."""
    cfg = b.cfg
    one = norm_offset(cfg)
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
        x = post_normed_sublayers(b, x, attend(kv, sliding), p, one)  # as Gemma 2's
    return x
