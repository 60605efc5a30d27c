"""llama.cpp's hybrid architectures in a GGUF file, read as the HF models our graphs build:
`qwen35` (Qwen3_5ForCausalLM: Gated DeltaNet layers beside gated full attention) and `lfm2`
(Lfm2ForCausalLM: short-convolution layers beside attention).

Weights keep the values llama.cpp's converter (conversion/qwen.py, conversion/lfm2.py) stored;
the config says how they differ from the checkpoint's, and the kernels read them as they are:
- qwen35 `ssm_a` holds A = -exp(A_log), not A_log: `a_is_log` False.
- qwen35's (1 + w) RMSNorms (attn_norm, post_attention_norm, attn_q_norm, attn_k_norm,
  output_norm) hold 1 + w: `norm_weights_include_one`. The DeltaNet's gated norm (ssm_norm, HF
  linear_attn.norm) is plain w in both formats.
- qwen35 value heads are stored in ggml's tiled order where there are more value heads than key
  heads (`value_heads_tiled`): HF groups value heads by key head (value head j reads key head
  j // (nv / nk)); the converter permutes every per-value-head row, column and entry (the V rows of
  attn_qkv and V channels of ssm_conv1d, attn_gate, ssm_beta, ssm_alpha, ssm_a, ssm_dt, ssm_out's
  columns) so that stored head p = v * nk + g is HF head g * (nv / nk) + v. Everything agrees on
  the new order; only the pairing changes: stored value head p reads key head p % nk.
- Convolution kernels lose their middle axis of 1 ([C, 1, K] -> [C, K]): the same bytes.
- lfm2 values are the checkpoint's; its final norm (HF model.embedding_norm) is `token_embd_norm`.
"""

from __future__ import annotations

import re

from ..errors import ModelFileError
from ..models.config import MAX_MROPE_SECTION, ModelConfig
from .gguf_values import MAX_LAYERS, Metadata, is_flag

HYBRID_ARCHITECTURES = {"qwen35": "Qwen3_5ForCausalLM", "lfm2": "Lfm2ForCausalLM"}

_DENSE_FFN = {
    "ffn_gate.weight": "mlp.gate_proj.weight",
    "ffn_up.weight": "mlp.up_proj.weight",
    "ffn_down.weight": "mlp.down_proj.weight",
}
_ATTENTION = {
    "attn_q.weight": "self_attn.q_proj.weight",  # qwen35: each head's query rows, then its gate rows
    "attn_k.weight": "self_attn.k_proj.weight",
    "attn_v.weight": "self_attn.v_proj.weight",
}
# Per block: the part after "blk.N." -> the part after "model.layers.N.".
QWEN35_BLOCK_NAMES = {
    **_DENSE_FFN,
    **_ATTENTION,
    "attn_norm.weight": "input_layernorm.weight",
    "post_attention_norm.weight": "post_attention_layernorm.weight",
    "attn_output.weight": "self_attn.o_proj.weight",
    "attn_q_norm.weight": "self_attn.q_norm.weight",
    "attn_k_norm.weight": "self_attn.k_norm.weight",
    "attn_qkv.weight": "linear_attn.in_proj_qkv.weight",
    "attn_gate.weight": "linear_attn.in_proj_z.weight",
    "ssm_beta.weight": "linear_attn.in_proj_b.weight",
    "ssm_alpha.weight": "linear_attn.in_proj_a.weight",
    "ssm_conv1d.weight": "linear_attn.conv1d.weight",
    "ssm_dt.bias": "linear_attn.dt_bias",
    "ssm_a": "linear_attn.A_log",  # holds A = -exp(A_log); no .weight suffix in llama.cpp either
    "ssm_norm.weight": "linear_attn.norm.weight",
    "ssm_out.weight": "linear_attn.out_proj.weight",
}
LFM2_BLOCK_NAMES = {
    **_ATTENTION,
    "attn_norm.weight": "operator_norm.weight",
    "ffn_norm.weight": "ffn_norm.weight",
    "ffn_gate.weight": "feed_forward.w1.weight",
    "ffn_up.weight": "feed_forward.w3.weight",
    "ffn_down.weight": "feed_forward.w2.weight",
    "attn_output.weight": "self_attn.out_proj.weight",
    "attn_q_norm.weight": "self_attn.q_layernorm.weight",
    "attn_k_norm.weight": "self_attn.k_layernorm.weight",
    **{
        f"shortconv.{part}.{kind}": f"conv.{part}.{kind}"
        for part in ("in_proj", "conv", "out_proj")
        for kind in ("weight", "bias")  # biases only where the checkpoint has conv_bias
    },
}
BLOCK_NAMES = {"qwen35": QWEN35_BLOCK_NAMES, "lfm2": LFM2_BLOCK_NAMES}
GLOBAL_NAMES = {
    "qwen35": {"output_norm.weight": "model.norm.weight"},
    # llama.cpp applies token_embd_norm after the last block (LLM_TENSOR_OUTPUT_NORM_LFM2).
    "lfm2": {"token_embd_norm.weight": "model.embedding_norm.weight"},
}
_SHARED_GLOBALS = {"token_embd.weight": "model.embed_tokens.weight", "output.weight": "lm_head.weight"}
_BLOCK = re.compile(r"blk\.(\d{1,6})\.(.+)")


def hybrid_tensor_name(gguf_name: str, arch: str, trunk_layers: int) -> str | None:
    """The HF name of a qwen35 / lfm2 tensor, or None. Blocks from `trunk_layers` on are Qwen3.5's
    multi-token-prediction blocks, which llama.cpp appends after the model's own and the graph
    does not run: they keep their GGUF names."""
    if gguf_name in _SHARED_GLOBALS:
        return _SHARED_GLOBALS[gguf_name]
    if gguf_name in GLOBAL_NAMES[arch]:
        return GLOBAL_NAMES[arch][gguf_name]
    match = _BLOCK.fullmatch(gguf_name)
    if match is None or int(match.group(1)) >= trunk_layers:
        return None
    hf_part = BLOCK_NAMES[arch].get(match.group(2))
    return None if hf_part is None else f"model.layers.{int(match.group(1))}.{hf_part}"


def trunk_layers(meta: Metadata, arch: str) -> int:
    """Blocks the model runs: block_count less Qwen3.5's appended MTP blocks (nextn_predict_layers)."""
    layers = meta.integer(f"{arch}.block_count", 0, maximum=MAX_LAYERS)
    return layers - meta.integer(f"{arch}.nextn_predict_layers", 0, maximum=layers)


def lfm2_kv_heads(meta: Metadata, heads: int) -> list[int]:
    """LFM2's head_count_kv, one per layer: the converter writes 0 for each short-conv layer, and
    llama.cpp takes a layer with no KV heads for a recurrent one. A single number: every layer
    attends."""
    key = "lfm2.attention.head_count_kv"
    per_layer = meta.per_layer(key, meta.integer("lfm2.block_count", minimum=1, maximum=MAX_LAYERS), heads)
    if len({v for v in per_layer if v}) > 1:
        meta.fail(key, f"gives the attention layers different counts ({per_layer})")
    if not any(per_layer):
        meta.fail(key, "leaves no attention layer")
    return per_layer


def shared_kv_heads(per_layer: list[int], heads: int) -> int:
    """The KV head count of the attention layers (all share one)."""
    return next((v for v in per_layer if v), heads)


def hybrid_config(cfg: ModelConfig, gguf, meta: Metadata) -> None:
    """Fill in what config_from_gguf's common keys leave out: the layer kinds and the recurrent
    layers' sizes, and the flags that say how stored values differ (module docstring). `meta`
    reads the file's metadata as config_from_gguf's does."""
    cfg.qk_norm = True  # both: RMSNorm over each head's q and k before RoPE
    if meta.meta["general.architecture"] == "lfm2":
        _lfm2(cfg, gguf, meta)
    else:
        _qwen35(cfg, meta)


def _lfm2(cfg: ModelConfig, gguf, meta: Metadata) -> None:
    per_layer = lfm2_kv_heads(meta, cfg.num_heads)
    # LFM2.5's audio tokenizer: its attention layers slide
    window = meta.integer("lfm2.attention.sliding_window", 0)
    attention = "sliding_attention" if window > 0 else "full_attention"
    cfg.sliding_window = window
    cfg.layer_types = [attention if kv else "conv" for kv in per_layer]
    cfg.conv_kernel = meta.integer("lfm2.shortconv.l_cache", minimum=1)
    cfg.conv_bias = any(name.endswith(".shortconv.in_proj.bias") for name in gguf.tensors)


def _qwen35(cfg: ModelConfig, meta: Metadata) -> None:
    layers = trunk_layers(meta, "qwen35")
    if layers <= 0:
        meta.fail("qwen35.nextn_predict_layers", "leaves no layers of the model's own")
    cfg.num_layers = layers
    key_heads = meta.integer("qwen35.ssm.group_count", minimum=1)
    value_heads = meta.integer("qwen35.ssm.time_step_rank", minimum=1)
    inner = meta.integer("qwen35.ssm.inner_size", minimum=1)
    if value_heads % key_heads or inner % value_heads:
        raise ModelFileError(
            meta.path,
            f"qwen35.ssm: {value_heads} value heads (time_step_rank) of {inner} values (inner_size) "
            f"do not share out over {key_heads} key heads (group_count)",
        )
    cfg.linear_key_heads, cfg.linear_value_heads = key_heads, value_heads
    cfg.linear_key_head_dim = meta.integer("qwen35.ssm.state_size", minimum=1)
    cfg.linear_value_head_dim = inner // value_heads  # as llama.cpp's graph derives it
    cfg.conv_kernel = meta.integer("qwen35.ssm.conv_kernel", minimum=1)
    cfg.layer_types = _qwen35_layer_types(meta, layers)
    cfg.mrope_section = _mrope_section(meta)
    cfg.a_is_log = False
    cfg.norm_weights_include_one = True
    cfg.linear_value_heads_tiled = value_heads_tiled(cfg)


def _mrope_section(meta: Metadata) -> tuple:
    """qwen35.rope.dimension_sections: Qwen3.5's multimodal RoPE sections (t, h, w, and a fourth the
    converter writes 0), ModelConfig.mrope_section; absent: transformers' [11, 11, 10]."""
    key = "qwen35.rope.dimension_sections"
    sections = meta.array(key, lambda v: 0 <= v <= MAX_MROPE_SECTION, [11, 11, 10, 0], types=(int,), what="counts")
    if len(sections) not in (3, 4) or sections[3:] not in ([], [0]):
        meta.fail(key, f"should be 3 counts (and a fourth 0), got {sections!r:.60}")
    return tuple(sections[:3])


def value_heads_tiled(cfg: ModelConfig) -> bool:
    """Whether a qwen35 file's value heads are in ggml's tiled order (stored value head p reads
    key head p % nk) rather than HF's grouped one (p // (nv / nk)): wherever the counts differ."""
    return cfg.linear_value_heads != cfg.linear_key_heads


def _qwen35_layer_types(meta: Metadata, layers: int) -> list[str]:
    """llama.cpp's rule: a per-layer attention.recurrent_layers list where the file has one, else
    every full_attention_interval-th layer (default 4) attends and the rest are DeltaNet."""
    key = "qwen35.attention.recurrent_layers"
    if meta.has(key):
        recurrent = meta.array(key, is_flag, what="flags (bool)")
        if len(recurrent) < layers:
            meta.fail(key, f"has {len(recurrent)} flags for {layers} layers")
    else:
        every = meta.integer("qwen35.full_attention_interval", 4, minimum=1)
        recurrent = [(i + 1) % every != 0 for i in range(layers)]
    return ["linear_attention" if flag else "full_attention" for flag in recurrent[:layers]]
