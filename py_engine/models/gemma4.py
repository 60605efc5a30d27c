"""Gemma 4 (text; also the text tower of Gemma4ForConditionalGeneration checkpoints): Gemma 3's
four-norm layer with what E2B adds. Per-layer embeddings (PLE): a second table gives each token a
slice per layer, summed with a projection of its embedding (RMS-normalised a slice at a time) and
scaled by 2^-0.5; each layer then adds norm(proj(GELU(gate · x) * its slice)) to x. KV sharing:
the last num_kv_shared_layers layers compute only queries and attend over the caches of the last
earlier layer of their type. Full layers have a head_dim of their own and proportional RoPE (a
quarter of the frequencies turn, over the whole head's denominator); values are RMS-normalised
(no weight); attention is scaled by 1 (the q/k norms set the scale); each layer's output is
multiplied by its layer_scalar; final logits are softcapped. Gemma 4's RMSNorm multiplies by w
itself (no 1 + w)."""

from __future__ import annotations

from ..runtime.graph import Tensor, ceil_div
from .builder import GraphBuilder
from .gemma import embedding_scale, lm_head
from .gemma2 import post_normed_sublayers

PER_LAYER_INPUT_SCALE = 2.0**-0.5  # transformers' per_layer_input_scale


def build_gemma4(b: GraphBuilder):
    cfg = b.cfg
    sliding_rope = None
    if any(cfg.sliding(i) for i in range(cfg.num_layers)):
        sliding_rope = b.rope_table("cos_sin_local", cfg.local_rope_theta, cfg.local_rope_scaling, cfg.head_dim)
    x = b.embedding("model.embed_tokens.weight", scale=embedding_scale(cfg))
    per_layer = per_layer_inputs(b, x) if cfg.per_layer_input_size else None
    caches = {}  # KV-owning layer -> its (k, v) caches
    for i in range(cfg.num_layers):
        p = f"model.layers.{i}."
        attn = p + "self_attn."
        owns_kv = cfg.kv_owner(i) == i
        norm = p + "input_layernorm.weight"
        if owns_kv:
            qkv = b.qkv(x, attn, norm=norm)
        else:
            bias = [attn + "q_proj.bias"] if cfg.attention_bias else None
            qkv = b.linear(x, [attn + "q_proj.weight"], bias=bias, norm=norm)
        sliding = cfg.sliding(i)
        kv = b.rope_kv(
            qkv,
            q_norm=attn + "q_norm.weight",
            k_norm=attn + "k_norm.weight" if owns_kv else None,
            cos_sin=sliding_rope if sliding else None,
            head_dim=cfg.layer_head_dim(i),
            v_norm=owns_kv,
            owns_kv=owns_kv,
        )
        reads = None if owns_kv else caches[cfg.kv_owner(i)]
        a = b.attention(kv, window=cfg.sliding_window if sliding else 0, scale=1.0, reads=reads)
        if owns_kv:
            caches[i] = b.layer_caches[-1]
        scalar = p + "layer_scalar"
        x = post_normed_sublayers(b, x, a, p, 0.0, out_scale=None if per_layer else scalar)
        if per_layer:
            x = per_layer_input(b, x, per_layer, i, out_scale=scalar)
    last = b.rmsnorm(x, "model.norm.weight", last_row_only=True)
    logits = b.logits(last, lm_head(cfg))
    if cfg.final_logit_softcapping:
        b.softcap(logits, cfg.final_logit_softcapping)
    return b.g


def per_layer_inputs(b: GraphBuilder, x: Tensor) -> Tensor:
    """[rows, layers * width]: each token's per-layer embedding (scaled by sqrt(width)) plus the
    projection of its embedding x, each layer's slice RMS-normalised; what transformers then
    scales by 2^-0.5 is scaled where it is read (per_layer_input). transformers scales the
    projection by hidden^-0.5 before the norm: RMSNorm(c v) with eps is RMSNorm(v) with eps / c^2."""
    cfg = b.cfg
    width = cfg.per_layer_input_size
    tokens = b.embedding("model.embed_tokens_per_layer.weight", scale=embedding_scale(cfg, width))
    context = b.linear(x, ["model.per_layer_model_projection.weight"])
    return b.rmsnorm(
        context,
        "model.per_layer_projection_norm.weight",
        residual=tokens,
        slices=cfg.num_layers,
        eps=cfg.rms_norm_eps * cfg.hidden_size,
    )


def per_layer_input(b: GraphBuilder, x: Tensor, per_layer: Tensor, layer: int, out_scale: str) -> Tensor:
    """Layer `layer`'s per-layer input added to x: x + norm(proj(GELU(gate · x) * its slice *
    2^-0.5)), times the out_scale weight (the layer's scalar)."""
    p = f"model.layers.{layer}."
    width, layers = b.cfg.per_layer_input_size, b.cfg.num_layers
    gate = b.linear(x, [p + "per_layer_input_gate.weight"])
    h = b.act("per_layer", width)
    b.g.op(
        "gated_mul",
        {"gate_up": gate, "up": per_layer, "y": h},
        {"inter": width, "up_stride": layers * width, "up_offset": layer * width, "scale": PER_LAYER_INPUT_SCALE},
        lambda rows: (ceil_div(width, 256), rows, 1),
        {"GELU": True, "PER_LAYER": True},
    )
    h = b.linear(h, [p + "per_layer_projection.weight"])
    return b.rmsnorm(h, p + "post_per_layer_input_norm.weight", residual=x, out_scale=out_scale)
