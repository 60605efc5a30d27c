"""ModelConfig: the few numbers a decoder-only transformer needs, read from an HF config.json."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..errors import ModelFileError


@dataclass
class ModelConfig:
    architecture: str
    vocab_size: int
    hidden_size: int
    intermediate_size: int
    num_layers: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    rms_norm_eps: float
    rope_theta: float
    rope_scaling: dict | None = None  # {"rope_type": "llama3", ...} or None
    partial_rotary_factor: float = 1.0
    max_position: int = 4096
    tie_word_embeddings: bool = False
    sliding_window: int = 0  # 0: full attention
    attention_bias: bool = False
    qk_norm: bool = False
    # llama.cpp stores Llama-family Q/K rows permuted for its interleaved-pair RoPE; a GGUF model
    # keeps them as stored and rotates (x[2i], x[2i+1]) pairs instead of un-permuting on load.
    rope_interleaved: bool = False
    eos_token_ids: list = field(default_factory=list)
    bos_token_id: int | None = None
    # Per-layer attention ("sliding_attention" / "full_attention"); empty: every layer is full,
    # windowed by sliding_window when that is set (Mistral, Phi-3).
    layer_types: list = field(default_factory=list)
    # Sliding layers' own RoPE (Gemma 3: base 1e4 beside the full layers' 1e6); None: the same.
    local_rope_theta: float | None = None
    local_rope_scaling: dict | None = None
    query_pre_attn_scalar: float | None = None  # attention scale (Gemma 2/3): its inverse square root
    attn_logit_softcapping: float = 0.0  # 0: none
    final_logit_softcapping: float = 0.0
    dtype: str | None = None  # the checkpoint's compute dtype ("bfloat16", …): Gemma rounds its embedding scale to it
    # llama.cpp's converter stores Gemma's (1 + w) RMSNorm weights with the 1 already added.
    norm_weights_include_one: bool = False
    # Hybrids (layer_types "linear_attention": Qwen3.5's Gated DeltaNet; "conv": LFM2's short
    # convolution). DeltaNet: key and value heads and their dims; both: the causal conv's width.
    linear_key_heads: int = 0
    linear_value_heads: int = 0
    linear_key_head_dim: int = 0
    linear_value_head_dim: int = 0
    conv_kernel: int = 0  # Qwen3.5 linear_conv_kernel_dim (4), LFM2 conv_L_cache (3)
    conv_bias: bool = False  # LFM2: biases on the short-conv block's projections and conv
    # DeltaNet's decay rate: the checkpoint's A_log (HF), or A = -exp(A_log) itself (llama.cpp's ssm_a).
    a_is_log: bool = True
    # llama.cpp stores DeltaNet's value heads tiled over the key heads (value head h reads key head
    # h % nk) where HF groups them (h // (nv / nk)): every per-value-head tensor in that order.
    linear_value_heads_tiled: bool = False

    @property
    def rotary_dim(self) -> int:
        return int(self.head_dim * self.partial_rotary_factor)

    def sliding(self, layer: int) -> bool:
        """Whether a layer attends only to its sliding window (layer_types, else every layer
        when sliding_window is set)."""
        if self.layer_types:
            return self.layer_types[layer] == "sliding_attention"
        return self.sliding_window > 0

    def layer_type(self, layer: int) -> str:
        """ "full_attention", "sliding_attention", "linear_attention" (DeltaNet) or "conv"."""
        if self.layer_types:
            return self.layer_types[layer]
        return "sliding_attention" if self.sliding_window > 0 else "full_attention"


# Defaults where a family's config leaves RoPE's base out (transformers' own defaults).
GEMMA3_THETA = {"full_attention": 1_000_000.0, "sliding_attention": 10_000.0}
LEGACY_ROPE_TYPES = {"su": "longrope", "yarn": "longrope"}  # Phi-3's older names


def _rope_settings(raw: dict, layer_type: str | None = None) -> tuple[float, dict | None]:
    """(theta, scaling) of a layer type. transformers 5 writes `rope_parameters` (with rope_theta
    inside; Gemma 3: one dict per layer type); hub configs often still carry `rope_theta` +
    `rope_scaling` (Gemma 3: `rope_local_base_freq` for sliding layers). Accept both."""
    params = raw.get("rope_parameters") or {}
    if layer_type in params:
        params = params[layer_type]
    elif layer_type is not None:  # old Gemma 3 spelling: rope_scaling belongs to the full layers only
        local = layer_type == "sliding_attention"
        theta = raw.get("rope_local_base_freq" if local else "rope_theta", GEMMA3_THETA[layer_type])
        params = {"rope_theta": theta, **({} if local else raw.get("rope_scaling") or {})}
    scaling = None if layer_type else raw.get("rope_scaling") or None
    default_theta = GEMMA3_THETA[layer_type] if layer_type else 10000.0
    theta = params.get("rope_theta", raw.get("rope_theta", default_theta) if not layer_type else default_theta)
    if params.get("rope_type", params.get("type", "default")) not in ("default", None):
        scaling = params
    if scaling is not None:
        kind = scaling.get("rope_type", scaling.get("type", "default"))
        kind = LEGACY_ROPE_TYPES.get(kind, kind)
        scaling = None if kind == "default" else dict(scaling, rope_type=kind)
    return float(theta), scaling


def _ids(value) -> list:
    if value is None:
        return []
    return list(value) if isinstance(value, list) else [value]


# Multimodal checkpoints whose text tower is a causal LM of its own: its config is `text_config`
# (weights: read_model drops the tower's prefix).
TEXT_TOWERS = {
    "Gemma3ForConditionalGeneration": "Gemma3ForCausalLM",
    "Qwen3_5ForConditionalGeneration": "Qwen3_5ForCausalLM",
}
PER_LAYER_TYPE_ROPE = ("Gemma3ForCausalLM",)


def config_from_hf(raw: dict, path) -> ModelConfig:
    archs = raw.get("architectures") or []
    if not archs:
        raise ModelFileError(path, "no 'architectures' entry")
    architecture = archs[0]
    if architecture in TEXT_TOWERS and isinstance(raw.get("text_config"), dict):
        raw = {**raw["text_config"], "dtype": raw.get("dtype", raw.get("torch_dtype"))}
        architecture = TEXT_TOWERS[architecture]
    try:
        heads = int(raw["num_attention_heads"])
        hidden = int(raw["hidden_size"])
        per_layer_type = architecture in PER_LAYER_TYPE_ROPE
        theta, scaling = _rope_settings(raw, "full_attention" if per_layer_type else None)
        local_theta, local_scaling = _rope_settings(raw, "sliding_attention") if per_layer_type else (None, None)
        window = raw.get("sliding_window") or 0
        if raw.get("use_sliding_window") is False:
            window = 0
        layers = int(raw["num_hidden_layers"])
        layer_types = list(raw.get("layer_types") or _default_layer_types(architecture, raw, layers))
        if layer_types and len(layer_types) != layers:
            raise ModelFileError(path, f"layer_types has {len(layer_types)} entries for {layers} layers")
        if scaling is not None and scaling["rope_type"] == "longrope":
            # Phi-3 keeps these beside rope_scaling; the long factors start past the original length.
            scaling = {
                "original_max_position_embeddings": int(raw.get("original_max_position_embeddings") or 0),
                "max_position_embeddings": int(raw.get("max_position_embeddings", 4096)),
                **scaling,
            }
        rope_params = raw.get("rope_parameters") or {}
        partial = raw.get("partial_rotary_factor", rope_params.get("partial_rotary_factor", 1.0))
        return ModelConfig(
            architecture=architecture,
            vocab_size=int(raw["vocab_size"]),
            hidden_size=hidden,
            intermediate_size=int(raw["intermediate_size"]),
            num_layers=layers,
            num_heads=heads,
            num_kv_heads=int(raw.get("num_key_value_heads") or heads),
            head_dim=int(raw.get("head_dim") or hidden // heads),
            rms_norm_eps=float(raw.get("rms_norm_eps", raw.get("norm_eps", 1e-6))),
            rope_theta=theta,
            rope_scaling=scaling,
            partial_rotary_factor=float(partial),
            max_position=int(raw.get("max_position_embeddings", 4096)),
            tie_word_embeddings=bool(raw.get("tie_word_embeddings", raw.get("tie_embedding", False))),
            sliding_window=int(window),
            attention_bias=bool(raw.get("attention_bias", False)),
            eos_token_ids=_ids(raw.get("eos_token_id")),
            bos_token_id=raw.get("bos_token_id"),
            layer_types=layer_types,
            local_rope_theta=local_theta,
            local_rope_scaling=local_scaling,
            query_pre_attn_scalar=_optional_float(raw.get("query_pre_attn_scalar")),
            attn_logit_softcapping=_optional_float(raw.get("attn_logit_softcapping")) or 0.0,
            final_logit_softcapping=_optional_float(raw.get("final_logit_softcapping")) or 0.0,
            dtype=raw.get("dtype", raw.get("torch_dtype")),
            linear_key_heads=int(raw.get("linear_num_key_heads") or 0),
            linear_value_heads=int(raw.get("linear_num_value_heads") or 0),
            linear_key_head_dim=int(raw.get("linear_key_head_dim") or 0),
            linear_value_head_dim=int(raw.get("linear_value_head_dim") or 0),
            conv_kernel=int(raw.get("linear_conv_kernel_dim") or raw.get("conv_L_cache") or 0),
            conv_bias=bool(raw.get("conv_bias", False)),
        )
    except KeyError as exc:
        raise ModelFileError(path, f"missing key {exc.args[0]!r}") from None
    except (TypeError, ValueError) as exc:
        raise ModelFileError(path, f"bad value ({exc})") from None


def _optional_float(value) -> float | None:
    return None if value is None else float(value)


def _default_layer_types(architecture: str, raw: dict, layers: int) -> list[str]:
    """transformers' defaults where a config has no layer_types: Gemma 2 alternates sliding and
    full layers; Gemma 3 makes every `sliding_window_pattern`-th (6) layer full; Qwen3.5 every
    `full_attention_interval`-th (4) layer full, the rest DeltaNet; LFM2 lists its attention
    layers (`full_attn_idxs`, default all), the rest short convolutions."""
    if architecture == "Lfm2ForCausalLM":
        full = raw.get("full_attn_idxs")
        full = range(layers) if full is None else {int(i) for i in full}
        return ["full_attention" if i in full else "conv" for i in range(layers)]
    if architecture == "Qwen3_5ForCausalLM":
        every = int(raw.get("full_attention_interval") or 4)
        return ["linear_attention" if (i + 1) % every else "full_attention" for i in range(layers)]
    pattern = {"Gemma2ForCausalLM": 2, "Gemma3ForCausalLM": int(raw.get("sliding_window_pattern") or 6)}
    if architecture not in pattern:
        return []
    every = pattern[architecture]
    return ["sliding_attention" if (i + 1) % every else "full_attention" for i in range(layers)]
