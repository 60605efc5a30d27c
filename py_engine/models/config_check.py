"""The one check every ModelConfig passes before anything plans from it, whichever file it came
from (config_from_hf, config_from_gguf): each count an integer within what the kernels take, the
heads consistent, each float finite and in range, the RoPE scaling complete, the layer types known,
the hybrids' recurrent sizes within their kernels' limits, token ids inside the vocabulary.

Messages name a field by its config.json name; the path is the file the config came from
(config.json, or the GGUF file)."""

from __future__ import annotations

import math

from ..errors import ModelFileError
from ..formats.json_file import describe
from .attention_grid import HEAD_DIM_MAX
from .config import ENCODER_ARCHITECTURES, MAX_LAYERS, ModelConfig
from .config_values import is_int, is_number
from .delta_chunk_plan import DK_MAX
from .rope import SCALINGS

F32_MAX = 3.4028234663852886e38  # floats reach the kernels as f32 params (eps, caps, RoPE tables)
F32_TINY = 2.0**-126  # the least normal f32: below it, a RoPE factor or an attention scale's base breaks
MAX_COUNT = 2**31 - 1  # sizes and counts reach the kernels as u32 params and element offsets
# rope_kv.wgsl and attention.wgsl stage one head in workgroup memory, in pairs (attention.wgsl
# WIDE_HEADS past 256, attention_tiled.wgsl 16 lanes a slot): Gemma 4's full layers' 512.
MAX_HEAD_DIM = HEAD_DIM_MAX
MAX_GRID = 65535  # workgroups along one dispatch dimension: attention's heads, rope_kv's q + k + v heads
MAX_CONV_KERNEL = 4  # delta_rule.wgsl's taps and RecurrentOps.conv_ring
ATTENTION = ("full_attention", "sliding_attention")
LAYER_TYPES = {  # the layer kinds each architecture's graph builds
    "Qwen3_5ForCausalLM": ("full_attention", "linear_attention"),
    "Lfm2ForCausalLM": (*ATTENTION, "conv"),
}
ENCODER_ACTIVATIONS = ("gelu", "gelu_new", "gelu_pytorch_tanh")  # gelu.wgsl's exact and tanh forms
CONV_KERNEL_KEY = {"Qwen3_5ForCausalLM": "linear_conv_kernel_dim", "Lfm2ForCausalLM": "conv_L_cache"}


class FieldCheck:
    """Range checks of one file's fields, each failure a ModelFileError naming the field."""

    def __init__(self, path):
        self.path = path

    def fail(self, field: str, problem: str, value):
        raise ModelFileError(self.path, f"{field} {problem}, got {describe(value)}")

    def count(self, field: str, value, low: int = 1, high: int = MAX_COUNT) -> int:
        if not is_int(value) or not low <= value <= high:
            self.fail(field, f"must be an integer from {low} to {high}", value)
        return value

    def number(self, field: str, value, low: float, high: float = F32_MAX, low_open=True) -> float:
        """A finite number in (low, high] (low_open) or [low, high]."""
        finite = is_number(value) and (is_int(value) or math.isfinite(value))  # isfinite(10**400) overflows
        if not finite or not low <= value <= high or (low_open and value == low):
            self.fail(field, f"must be a number {'>' if low_open else '>='} {low:g} and <= {high:g}", value)
        return float(value)

    def flag(self, field: str, value) -> None:
        if not isinstance(value, bool):
            self.fail(field, "must be true or false", value)


def check_config(cfg: ModelConfig, path) -> None:
    """Raise ModelFileError unless every field of cfg is one the graph builders and kernels can
    use. (The architecture itself: read_model asks models.graph_generator first.)"""
    check = FieldCheck(path)
    check.count("vocab_size", cfg.vocab_size)
    check.count("hidden_size", cfg.hidden_size)
    check.count("intermediate_size", cfg.intermediate_size)
    check.count("num_hidden_layers", cfg.num_layers, high=MAX_LAYERS)
    check.count("max_position_embeddings", cfg.max_position)
    check.count("sliding_window", cfg.sliding_window, low=0)
    check.number("rms_norm_eps", cfg.rms_norm_eps, 0.0, 1.0)
    check.number("attn_logit_softcapping", cfg.attn_logit_softcapping, 0.0, low_open=False)
    check.number("final_logit_softcapping", cfg.final_logit_softcapping, 0.0, low_open=False)
    if cfg.query_pre_attn_scalar is not None:  # the attention scale is its inverse square root, an f32
        check.number("query_pre_attn_scalar", cfg.query_pre_attn_scalar, F32_TINY, low_open=False)
    if cfg.dtype is not None and not isinstance(cfg.dtype, str):
        check.fail("dtype", "must be a string", cfg.dtype)
    for field in ("tie_word_embeddings", "attention_bias", "qk_norm", "rope_interleaved", "conv_bias"):
        check.flag(field, getattr(cfg, field))
    for field in ("norm_weights_include_one", "a_is_log", "linear_value_heads_tiled"):
        check.flag(field, getattr(cfg, field))
    _check_token_ids(check, cfg)
    kinds = _check_layer_types(check, cfg)
    _check_attention(check, cfg, attends=not kinds or bool(kinds & set(ATTENTION)))
    if cfg.architecture == "Gemma4ForCausalLM":
        _check_gemma4(check, cfg)
    if "linear_attention" in kinds:
        _check_delta_net(check, cfg)
    if "conv" in kinds or "linear_attention" in kinds:
        check.count(CONV_KERNEL_KEY[cfg.architecture], cfg.conv_kernel, high=MAX_CONV_KERNEL)
    if cfg.architecture in ENCODER_ARCHITECTURES and cfg.head_dim % 4:  # encoder_attention.wgsl reads vec4s
        check.fail("head_dim", "must be a multiple of 4 in an encoder", cfg.head_dim)
    if cfg.architecture == "BertModel":  # its own keys (config.config_from_hf)
        if cfg.hidden_act not in ENCODER_ACTIVATIONS:
            check.fail("hidden_act", f"must be one of {', '.join(ENCODER_ACTIVATIONS)}", cfg.hidden_act)
        if cfg.position_embedding_type != "absolute":
            check.fail(
                "position_embedding_type", 'must be "absolute" (the only kind supported)', cfg.position_embedding_type
            )


def _check_token_ids(check: FieldCheck, cfg: ModelConfig) -> None:
    last = cfg.vocab_size - 1
    if not isinstance(cfg.eos_token_ids, list):
        check.fail("eos_token_id", "must be a token id or a list of them", cfg.eos_token_ids)
    for token in cfg.eos_token_ids:
        check.count("eos_token_id", token, low=0, high=last)
    if cfg.bos_token_id is not None:
        check.count("bos_token_id", cfg.bos_token_id, low=0, high=last)


def _check_layer_types(check: FieldCheck, cfg: ModelConfig) -> set:
    """The layer kinds the model has (empty: every layer attends, as sliding_window says)."""
    allowed = LAYER_TYPES.get(cfg.architecture, ATTENTION)
    types = cfg.layer_types
    if not isinstance(types, list) or len(types) not in (0, cfg.num_layers):
        check.fail("layer_types", f"must list one type for each of the {cfg.num_layers} layers", types)
    for kind in types:
        if kind not in allowed:  # a str in a tuple: no other value compares equal
            check.fail("layer_types", f"entries must be one of {', '.join(allowed)}", kind)
    return set(types)


def _check_attention(check: FieldCheck, cfg: ModelConfig, attends: bool) -> None:
    heads = check.count("num_attention_heads", cfg.num_heads, high=MAX_GRID)
    kv_heads = check.count("num_key_value_heads", cfg.num_kv_heads, high=MAX_GRID)
    if heads % kv_heads:
        check.fail("num_key_value_heads", f"must divide num_attention_heads ({heads})", kv_heads)
    if heads + 2 * kv_heads > MAX_GRID:
        check.fail("num_attention_heads", f"+ 2 x num_key_value_heads must be at most {MAX_GRID}", heads)
    if not attends:
        check.count("head_dim", cfg.head_dim)
        return
    head_dim = check.count("head_dim", cfg.head_dim, low=2, high=MAX_HEAD_DIM)
    if head_dim % 2:
        check.fail("head_dim", "must be even (RoPE and the KV caches take pairs)", head_dim)
    partial = check.number("partial_rotary_factor", cfg.partial_rotary_factor, 0.0, 1.0)
    rotary = int(head_dim * partial)
    if rotary < 2 or rotary % 2:
        check.fail("partial_rotary_factor", f"x head_dim ({head_dim}) must be an even number of dims >= 2", partial)
    theta = check.number("rope_theta", cfg.rope_theta, 1.0)
    _check_rope_scaling(check, "rope_scaling", cfg.rope_scaling, rotary, theta)
    if cfg.local_rope_theta is not None:
        local = check.number("rope_local_base_freq", cfg.local_rope_theta, 1.0)
        _check_rope_scaling(check, "rope_parameters.sliding_attention", cfg.local_rope_scaling, rotary, local)


def _check_rope_scaling(check: FieldCheck, field: str, scaling, rotary: int, theta: float) -> None:
    """A rope_scaling dict as models/rope.py's Rotary reads it: every field it uses, of its type."""
    if scaling is None:
        return
    if not isinstance(scaling, dict):
        check.fail(field, "must be an object", scaling)
    kind = scaling.get("rope_type")
    if kind not in SCALINGS:
        check.fail(f"{field}.rope_type", f"must be one of {', '.join(SCALINGS)}", kind)
    if kind == "linear":
        check.number(f"{field}.factor", scaling.get("factor"), 1.0, low_open=False)
    elif kind == "llama3":
        check.number(f"{field}.factor", scaling.get("factor"), 1.0, low_open=False)
        low = check.number(f"{field}.low_freq_factor", scaling.get("low_freq_factor"), 0.0)
        check.number(f"{field}.high_freq_factor", scaling.get("high_freq_factor"), low)
        check.count(f"{field}.original_max_position_embeddings", scaling.get("original_max_position_embeddings"))
    elif kind == "proportional":
        share = scaling.get("partial_rotary_factor", 1.0)
        check.number(f"{field}.partial_rotary_factor", share, 0.0, 1.0, low_open=False)
        check.number(f"{field}.factor", scaling.get("factor", 1.0), 1.0, low_open=False)
    elif kind == "longrope":
        for name in ("short_factor", "long_factor"):
            factors = scaling.get(name)
            if not isinstance(factors, list) or len(factors) != rotary // 2:
                check.fail(f"{field}.{name}", f"must be a list of {rotary // 2} numbers (rotary dims / 2)", factors)
            for factor in factors:
                check.number(f"{field}.{name}", factor, F32_TINY, F32_MAX / theta, low_open=False)
        original = scaling.get("original_max_position_embeddings")
        check.count(f"{field}.original_max_position_embeddings", original, low=2)
        if scaling.get("factor") is not None:  # else max_position_embeddings / original
            check.number(f"{field}.factor", scaling["factor"], 1.0, low_open=False)
        if "max_position_embeddings" in scaling:
            check.count(f"{field}.max_position_embeddings", scaling["max_position_embeddings"])
        if scaling.get("attention_factor") is not None:  # else computed from the factor
            check.number(f"{field}.attention_factor", scaling["attention_factor"], 0.0)


def _check_gemma4(check: FieldCheck, cfg: ModelConfig) -> None:
    """Gemma 4's full layers' head_dim (the kernels' limits, as head_dim's), its per-layer
    embeddings and its shared-KV layers, each of which needs an earlier layer of its type."""
    global_head_dim = check.count("global_head_dim", cfg.global_head_dim, low=2, high=MAX_HEAD_DIM)
    if global_head_dim % 2:
        check.fail("global_head_dim", "must be even (RoPE and the KV caches take pairs)", global_head_dim)
    check.count("hidden_size_per_layer_input", cfg.per_layer_input_size, low=0)
    check.count("vocab_size_per_layer_input", cfg.per_layer_vocab, low=cfg.vocab_size)
    shared = check.count("num_kv_shared_layers", cfg.kv_shared_layers, low=0, high=cfg.num_layers - 1)
    for layer in range(cfg.num_layers - shared, cfg.num_layers):
        if cfg.kv_owner(layer) is None:
            check.fail("num_kv_shared_layers", f"leaves no earlier {cfg.layer_type(layer)} layer to share", shared)


def _check_delta_net(check: FieldCheck, cfg: ModelConfig) -> None:
    """Qwen3.5's Gated DeltaNet: value heads in groups over the key heads, key heads of at most
    DK_MAX dims (delta_rule.wgsl holds a key head's state rows, delta_chunk_scan.wgsl a tile)."""
    key_heads = check.count("linear_num_key_heads", cfg.linear_key_heads, high=MAX_GRID)
    value_heads = check.count("linear_num_value_heads", cfg.linear_value_heads, high=MAX_GRID)
    if value_heads % key_heads:
        check.fail("linear_num_value_heads", f"must be a multiple of linear_num_key_heads ({key_heads})", value_heads)
    check.count("linear_key_head_dim", cfg.linear_key_head_dim, high=DK_MAX)
    check.count("linear_value_head_dim", cfg.linear_value_head_dim)
