"""ModelConfig: the few numbers a decoder-only transformer needs, read from an HF config.json."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..errors import ModelFileError
from ..formats.json_file import describe
from .config_values import ConfigKeys, is_int


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
    # Encoders (BERT, models/bert.py): the feed-forward activation and the position embeddings' kind.
    hidden_act: str = ""
    position_embedding_type: str = ""
    # Qwen3.5's multimodal RoPE: how many of the rotary frequencies turn by a token's temporal, row and
    # column positions (interleaved t h w t h w ..., models/rope.py); () plain positions. A text token's three
    # are equal, so it turns as plain RoPE; a picture's tokens differ (runtime/picture_layout.py).
    mrope_section: tuple = ()
    # Gemma 4: the full layers' own head_dim (0: head_dim), the per-layer embeddings' width a layer
    # (hidden_size_per_layer_input; 0: none) and their table's rows, how many last layers read an
    # earlier layer's K/V instead of computing their own (kv_owner), and whether those layers' MLPs
    # are twice as wide (use_double_wide_mlp: E2B's; layer_intermediate).
    global_head_dim: int = 0
    per_layer_input_size: int = 0
    per_layer_vocab: int = 0
    kv_shared_layers: int = 0
    double_wide_mlp: bool = False
    # Kani-TTS-2's LFM2 (py_engine/speech/kani_files.py sets it): each attention layer turns by RoPE
    # frequencies of its own, scaled by a learnable alpha (models/kani_tts.py).
    learnable_rope: bool = False

    @property
    def rotary_dim(self) -> int:
        """The dims the model-wide RoPE table turns: its (full) layers' head_dim's share."""
        return int((self.global_head_dim or self.head_dim) * self.partial_rotary_factor)

    def sliding(self, layer: int) -> bool:
        """Whether a layer attends only to its sliding window (layer_types, else every layer
        when sliding_window is set)."""
        if self.layer_types:
            return self.layer_types[layer] == "sliding_attention"
        return self.sliding_window > 0

    def layer_head_dim(self, layer: int) -> int:
        """A layer's head_dim: Gemma 4's full layers have their own (global_head_dim)."""
        if self.global_head_dim and self.layer_type(layer) == "full_attention":
            return self.global_head_dim
        return self.head_dim

    def layer_intermediate(self, layer: int) -> int:
        """A layer's MLP width: intermediate_size, twice it in Gemma 4's shared-KV layers where
        double_wide_mlp (the graph reads widths from the tensors; the GGUF shape checks use this)."""
        shared = layer >= self.num_layers - self.kv_shared_layers
        return self.intermediate_size * (2 if self.double_wide_mlp and shared else 1)

    def kv_owner(self, layer: int) -> int | None:
        """The layer whose K/V cache `layer` attends over: itself, or for one of the last
        kv_shared_layers (Gemma 4) the last layer before them of its type (transformers'
        kv_sharing_modes; None where there is none: config_check refuses such a config)."""
        first_shared = self.num_layers - self.kv_shared_layers
        if layer < first_shared:
            return layer
        kind = self.layer_type(layer)
        return next((i for i in range(first_shared - 1, -1, -1) if self.layer_type(i) == kind), None)

    def layer_type(self, layer: int) -> str:
        """ "full_attention", "sliding_attention", "linear_attention" (DeltaNet) or "conv"."""
        if self.layer_types:
            return self.layer_types[layer]
        return "sliding_attention" if self.sliding_window > 0 else "full_attention"


# Defaults where a family's config leaves RoPE's base out (transformers' own defaults).
GEMMA3_THETA = {"full_attention": 1_000_000.0, "sliding_attention": 10_000.0}
LEGACY_ROPE_TYPES = {"su": "longrope", "yarn": "longrope"}  # Phi-3's older names
MAX_LAYERS = 4096  # config_from_hf builds per-layer lists: bounded before it does


def _rope_settings(keys: ConfigKeys, layer_type: str | None = None) -> tuple[float, dict | None]:
    """(theta, scaling) of a layer type. transformers 5 writes `rope_parameters` (with rope_theta
    inside; Gemma 3: one dict per layer type); hub configs often still carry `rope_theta` +
    `rope_scaling` (Gemma 3: `rope_local_base_freq` for sliding layers). Accept both."""
    params = keys.section("rope_parameters")
    if layer_type in params.raw:
        params = params.section(layer_type)
    elif layer_type is not None:  # old Gemma 3 spelling: rope_scaling belongs to the full layers only
        local = layer_type == "sliding_attention"
        theta = keys.number("rope_local_base_freq" if local else "rope_theta", GEMMA3_THETA[layer_type])
        scaling = {} if local else keys.section("rope_scaling").raw
        params = ConfigKeys({"rope_theta": theta, **scaling}, keys.path, "rope_scaling.")
    scaling = None if layer_type else keys.section("rope_scaling")
    default_theta = GEMMA3_THETA[layer_type] if layer_type else keys.number("rope_theta", 10000.0)
    theta = params.number("rope_theta", default_theta)
    if _rope_type(params) != "default":
        scaling = params
    if scaling is None or _rope_type(scaling) == "default":
        return theta, None
    kind = _rope_type(scaling)
    return theta, dict(scaling.raw, rope_type=LEGACY_ROPE_TYPES.get(kind, kind))


def _rope_type(params: ConfigKeys) -> str:
    return params.str("rope_type", None) or params.str("type", "default")


def _ids(keys: ConfigKeys, key: str) -> list:
    value = keys.get(key, [])
    ids = value if isinstance(value, list) else [value]
    if not all(is_int(i) for i in ids):
        keys.fail(key, "a token id or a list of them", value)
    return ids


# Multimodal checkpoints whose text tower is a causal LM of its own: its config is `text_config`
# (weights: read_model drops the tower's prefix).
TEXT_TOWERS = {
    "Gemma3ForConditionalGeneration": "Gemma3ForCausalLM",
    "Qwen3_5ForConditionalGeneration": "Qwen3_5ForCausalLM",
    "Gemma4ForConditionalGeneration": "Gemma4ForCausalLM",
    "SmolVLMForConditionalGeneration": "LlamaForCausalLM",
    "Idefics3ForConditionalGeneration": "LlamaForCausalLM",
}
# Those whose vision tower Wisp runs (py_engine/vision/encoder.py), and its graph's kind.
VISION_TOWERS = {
    "SmolVLMForConditionalGeneration": "smolvlm",
    "Idefics3ForConditionalGeneration": "smolvlm",
    "Gemma3ForConditionalGeneration": "gemma3",
    "Qwen3_5ForConditionalGeneration": "qwen3_5",
}
PER_LAYER_TYPE_ROPE = ("Gemma3ForCausalLM", "Gemma4ForCausalLM")
# Text towers whose RoPE is multimodal, and transformers' sections where the config names none.
MROPE_SECTIONS = {"Qwen3_5ForCausalLM": (11, 11, 10)}
MAX_MROPE_SECTION = 4096
# Encoders: embedders, not causal LMs. BERT (models/bert.py), and Gemma 3's text model run
# bidirectionally (EmbeddingGemma: models/gemma3.py build_gemma3_encoder), whose config reads as its
# causal LM's (ENCODER_LAYOUTS) and must say use_bidirectional_attention.
ENCODER_ARCHITECTURES = ("BertModel", "Gemma3TextModel")
ENCODER_LAYOUTS = {"Gemma3TextModel": "Gemma3ForCausalLM"}


def architecture_of(raw: dict, path) -> str:
    """config.json's architectures[0]: the model class its weights were saved from."""
    archs = raw.get("architectures")
    if not archs:
        raise ModelFileError(path, "no 'architectures' entry")
    if not isinstance(archs, list):
        raise ModelFileError(path, f"architectures should be a list of class names, got {describe(archs)}")
    if not isinstance(archs[0], str):
        raise ModelFileError(path, f"architectures[0] should be a class name, got {describe(archs[0])}")
    return archs[0]


def config_from_hf(raw: dict, path) -> ModelConfig:
    """config.json's ModelConfig, every value of its type (read_model then runs check_config)."""
    architecture = architecture_of(raw, path)
    keys = ConfigKeys(raw, path)
    if architecture in TEXT_TOWERS:
        tower = keys.section("text_config")
        keys = ConfigKeys({**tower.raw, "dtype": keys.str("dtype", keys.str("torch_dtype", None))}, path, tower.where)
        architecture = TEXT_TOWERS[architecture]
    heads, hidden = keys.int("num_attention_heads"), keys.int("hidden_size")
    if heads < 1:  # divides below
        keys.fail("num_attention_heads", "at least 1", heads)
    head_dim = keys.int("head_dim", None)
    if head_dim is None and hidden % heads:
        keys.fail("hidden_size", f"a multiple of num_attention_heads ({heads}) where head_dim is not given", hidden)
    layout = ENCODER_LAYOUTS.get(architecture, architecture)  # the architecture whose config keys it has
    if layout != architecture and keys.bool("use_bidirectional_attention", False) is not True:
        got = keys.get("use_bidirectional_attention")
        keys.fail("use_bidirectional_attention", f"true ({architecture} embeds as an encoder)", got)
    per_layer_type = layout in PER_LAYER_TYPE_ROPE
    theta, scaling = _rope_settings(keys, "full_attention" if per_layer_type else None)
    local_theta, local_scaling = _rope_settings(keys, "sliding_attention") if per_layer_type else (None, None)
    window = keys.int("sliding_window", 0)
    if keys.bool("use_sliding_window", True) is False:
        window = 0
    layers = keys.int("num_hidden_layers")
    if not 1 <= layers <= MAX_LAYERS:  # before any per-layer list is built
        keys.fail("num_hidden_layers", f"from 1 to {MAX_LAYERS}", layers)
    layer_types = keys.get("layer_types", None)
    if layer_types is None or layer_types == []:  # absent, null or empty: the architecture's default
        layer_types = _default_layer_types(layout, keys, layers)
    elif not isinstance(layer_types, list) or not all(isinstance(kind, str) for kind in layer_types):
        keys.fail("layer_types", "a list of layer type names", layer_types)
    if layer_types and len(layer_types) != layers:
        raise ModelFileError(path, f"layer_types has {len(layer_types)} entries for {layers} layers")
    max_position = keys.int("max_position_embeddings", 4096)
    if scaling is not None and scaling["rope_type"] == "longrope":
        # Phi-3 keeps these beside rope_scaling; the long factors start past the original length.
        scaling = {
            "original_max_position_embeddings": keys.int("original_max_position_embeddings", 0),
            "max_position_embeddings": max_position,
            **scaling,
        }
    partial = keys.section("rope_parameters").number("partial_rotary_factor", 1.0)
    bert = architecture == "BertModel"  # BERT's own keys: LayerNorm's eps, the activation, position embeddings
    eps = keys.number("layer_norm_eps", 1e-12) if bert else keys.number("rms_norm_eps", keys.number("norm_eps", 1e-6))
    return ModelConfig(
        architecture=architecture,
        vocab_size=keys.int("vocab_size"),
        hidden_size=hidden,
        intermediate_size=keys.int("intermediate_size"),
        num_layers=layers,
        num_heads=heads,
        num_kv_heads=keys.int("num_key_value_heads", heads),
        head_dim=hidden // heads if head_dim is None else head_dim,
        rms_norm_eps=eps,
        rope_theta=theta,
        rope_scaling=scaling,
        partial_rotary_factor=keys.number("partial_rotary_factor", partial),
        max_position=max_position,
        tie_word_embeddings=keys.bool("tie_word_embeddings", keys.bool("tie_embedding", False)),
        sliding_window=window,
        attention_bias=keys.bool("attention_bias", False),
        eos_token_ids=_ids(keys, "eos_token_id"),
        bos_token_id=keys.int("bos_token_id", None),
        layer_types=list(layer_types),
        local_rope_theta=local_theta,
        local_rope_scaling=local_scaling,
        query_pre_attn_scalar=keys.number("query_pre_attn_scalar", None),
        attn_logit_softcapping=keys.number("attn_logit_softcapping", 0.0),
        final_logit_softcapping=keys.number("final_logit_softcapping", 0.0),
        dtype=keys.str("dtype", keys.str("torch_dtype", None)),
        linear_key_heads=keys.int("linear_num_key_heads", 0),
        linear_value_heads=keys.int("linear_num_value_heads", 0),
        linear_key_head_dim=keys.int("linear_key_head_dim", 0),
        linear_value_head_dim=keys.int("linear_value_head_dim", 0),
        conv_kernel=keys.int("linear_conv_kernel_dim", 0) or keys.int("conv_L_cache", 0),
        conv_bias=keys.bool("conv_bias", False),
        hidden_act=keys.str("hidden_act", "gelu") if bert else "",
        position_embedding_type=keys.str("position_embedding_type", "absolute") if bert else "",
        mrope_section=_mrope_section(keys, architecture),
        **(_gemma4(keys, layer_types) if architecture == "Gemma4ForCausalLM" else {}),
    )


def _gemma4(keys: ConfigKeys, layer_types: list) -> dict:
    """Gemma 4's ModelConfig fields, with transformers' Gemma4TextConfig defaults. The full layers'
    head_dim is `global_head_dim` in hub configs; transformers 5 saves it in per_layer_config (one
    entry a full layer) instead. What the graph does not build is refused here by name."""
    for key, built in (("attention_k_eq_v", False), ("enable_moe_block", False)):
        if keys.bool(key, built) != built:
            keys.fail(key, f"{built} (Wisp does not build {key} layers yet)", keys.get(key))
    if keys.get("use_bidirectional_attention", None) == "all":
        keys.fail("use_bidirectional_attention", "null or 'vision' (Wisp's text models are causal)", "all")
    global_head_dim = keys.int("global_head_dim", 512)
    per_layer = keys.section("per_layer_config")
    for layer, kind in enumerate(layer_types):
        if kind == "full_attention" and str(layer) in per_layer.raw:
            global_head_dim = per_layer.section(str(layer)).int("head_dim", global_head_dim)
    per_layer_input = keys.get("hidden_size_per_layer_input", 256)  # null or 0: no per-layer embeddings
    return {
        "global_head_dim": global_head_dim,
        "per_layer_input_size": 0 if per_layer_input is None else keys.int("hidden_size_per_layer_input"),
        "per_layer_vocab": keys.int("vocab_size_per_layer_input", 262_144),
        "kv_shared_layers": keys.int("num_kv_shared_layers", 0),
        "double_wide_mlp": keys.bool("use_double_wide_mlp", False),
    }


def _mrope_section(keys: ConfigKeys, architecture: str) -> tuple:
    """rope_parameters.mrope_section of a multimodal-RoPE text tower (MROPE_SECTIONS): three counts."""
    default = MROPE_SECTIONS.get(architecture)
    if default is None:
        return ()
    params = keys.section("rope_parameters")
    value = params.get("mrope_section", list(default))
    if not (
        isinstance(value, list) and len(value) == 3 and all(is_int(v) and 0 <= v <= MAX_MROPE_SECTION for v in value)
    ):
        params.fail("mrope_section", f"3 counts of frequencies from 0 to {MAX_MROPE_SECTION}", value)
    return tuple(value)


def _default_layer_types(architecture: str, keys: ConfigKeys, layers: int) -> list[str]:
    """transformers' defaults where a config has no layer_types: Gemma 2 alternates sliding and
    full layers; Gemma 3 makes every `sliding_window_pattern`-th (6) layer full; Qwen3.5 every
    `full_attention_interval`-th (4) layer full, the rest DeltaNet; LFM2 lists its attention
    layers (`full_attn_idxs`, default all), the rest short convolutions."""
    if architecture == "Lfm2ForCausalLM":
        full = keys.get("full_attn_idxs", None)
        if full is not None and (not isinstance(full, list) or not all(is_int(i) for i in full)):
            keys.fail("full_attn_idxs", "a list of layer numbers", full)
        full = range(layers) if full is None else set(full)
        return ["full_attention" if i in full else "conv" for i in range(layers)]
    every = {
        "Qwen3_5ForCausalLM": ("full_attention_interval", 4),
        "Gemma2ForCausalLM": (None, 2),
        "Gemma3ForCausalLM": ("sliding_window_pattern", 6),
        "Gemma4ForCausalLM": (None, 6),
    }.get(architecture)
    if every is None:
        return []
    key, default = every
    every = default if key is None else keys.int(key, default)
    if every < 1:
        keys.fail(key, "at least 1", every)
    other = "linear_attention" if architecture == "Qwen3_5ForCausalLM" else "sliding_attention"
    types = [other if (i + 1) % every else "full_attention" for i in range(layers)]
    if architecture == "Gemma4ForCausalLM":  # transformers forces Gemma 4's last layer full
        types[-1] = "full_attention"
    return types
