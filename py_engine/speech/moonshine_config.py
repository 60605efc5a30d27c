"""Moonshine's config.json and tensors read and checked (transformers' MoonshineConfig; tiny: hidden 288,
6 + 6 layers, 8 heads of 36; base: 416, 8 + 8, 8 heads of 52).

What the engine needs of it is a ModelConfig for the GraphBuilder (the decoder's numbers, which the
encoder shares: one hidden size, one head count) and a few of its own: the encoder's layer count and
activation, the decoder's start and end ids. Refused with a ModelFileError naming the file and key:
head counts that differ anywhere (transformers builds the encoder and decoder attention from one
head count and its queries with the key/value heads' count, so only equal counts are what the
checkpoint means), an odd rotary width, a RoPE other than the default, activations the kernels lack.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import ModelFileError
from ..models.config import MAX_LAYERS, ModelConfig, architecture_of
from ..models.config_values import ConfigKeys

ARCHITECTURE = "MoonshineForConditionalGeneration"
NORM_EPS = 1e-5  # nn.LayerNorm's and nn.GroupNorm's default: Moonshine's config does not name it
ENCODER_ACTS = {"gelu": "gelu", "gelu_new": "gelu_tanh", "gelu_pytorch_tanh": "gelu_tanh"}  # -> conv1d/gelu kernels'
DECODER_ACTS = ("silu",)  # gated_mul.wgsl's SiLU
MAX_WIDTH = 1 << 16
# The front-end: Conv1d(1 -> H, 127, stride 64, no bias), Conv1d(H -> 2H, 7, 3), Conv1d(2H -> H, 3, 2).
CONVS = ((127, 64), (7, 3), (3, 2))


@dataclass(frozen=True)
class MoonshineConfig:
    cfg: ModelConfig  # the decoder's numbers (num_layers: its layers), the encoder's too but its layer count
    encoder_layers: int
    encoder_act: str  # "gelu" (erf) or "gelu_tanh"
    decoder_start_id: int
    eos_ids: tuple

    @property
    def rotary_dim(self) -> int:
        return self.cfg.rotary_dim


def read_moonshine_config(raw: dict, path) -> MoonshineConfig:
    """config.json of a MoonshineForConditionalGeneration checkpoint, checked."""
    if architecture_of(raw, path) != ARCHITECTURE:
        raise ModelFileError(path, f"architectures[0] should be {ARCHITECTURE}, got {raw['architectures'][0]!r}")
    keys = ConfigKeys(raw, path)
    hidden = _count(keys, "hidden_size", MAX_WIDTH)
    layers = {side: _count(keys, f"{side}_num_hidden_layers", MAX_LAYERS) for side in ("encoder", "decoder")}
    heads = _count(keys, "encoder_num_attention_heads", MAX_WIDTH)
    for key in ("decoder_num_attention_heads", "encoder_num_key_value_heads", "decoder_num_key_value_heads"):
        if keys.int(key, heads) != heads:
            keys.fail(key, f"encoder_num_attention_heads ({heads}): the engine runs equal head counts only", raw[key])
    if hidden % heads or (hidden // heads) % 2:
        keys.fail("hidden_size", f"an even head_dim times the {heads} heads", hidden)
    head_dim = hidden // heads
    theta, factor = _rope(keys)
    rotary_dim = int(head_dim * factor)
    if rotary_dim < 2 or rotary_dim % 2:
        raise ModelFileError(
            path,
            f"partial_rotary_factor {factor} turns {rotary_dim} of head_dim {head_dim}: an even count from 2 needed",
        )
    encoder_act = keys.str("encoder_hidden_act", "gelu")
    if encoder_act not in ENCODER_ACTS:
        keys.fail("encoder_hidden_act", f"one of {', '.join(ENCODER_ACTS)}", encoder_act)
    decoder_act = keys.str("decoder_hidden_act", "silu")
    if decoder_act not in DECODER_ACTS:
        keys.fail("decoder_hidden_act", "silu", decoder_act)
    vocab = _count(keys, "vocab_size", 1 << 24)
    start = keys.int("decoder_start_token_id", 1)
    eos = keys.get("eos_token_id", 2)
    eos_ids = tuple(eos if isinstance(eos, list) else [eos])
    for token in (start, *eos_ids):
        if not isinstance(token, int) or isinstance(token, bool) or not 0 <= token < vocab:
            raise ModelFileError(
                path, f"token id {token!r} (decoder_start_token_id / eos_token_id) is not in the vocabulary of {vocab}"
            )
    if keys.bool("attention_bias", False):  # tiny's and base's have none; the cross K/V ops take no K bias
        keys.fail("attention_bias", "false", True)
    if keys.get("pad_head_dim_to_multiple_of", None) is not None:
        _count(keys, "pad_head_dim_to_multiple_of", MAX_WIDTH)  # zeros past head_dim: no effect on the result
    cfg = ModelConfig(
        architecture=ARCHITECTURE,
        vocab_size=vocab,
        hidden_size=hidden,
        intermediate_size=_count(keys, "intermediate_size", 1 << 20),
        num_layers=layers["decoder"],
        num_heads=heads,
        num_kv_heads=heads,
        head_dim=head_dim,
        rms_norm_eps=NORM_EPS,
        rope_theta=theta,
        partial_rotary_factor=factor,
        max_position=_count(keys, "max_position_embeddings", 1 << 20),
        tie_word_embeddings=keys.bool("tie_word_embeddings", True),
        eos_token_ids=list(eos_ids),
        bos_token_id=keys.int("bos_token_id", None),
    )
    return MoonshineConfig(cfg, layers["encoder"], ENCODER_ACTS[encoder_act], start, eos_ids)


def _count(keys: ConfigKeys, key: str, most: int) -> int:
    value = keys.int(key)
    if not 1 <= value <= most:
        keys.fail(key, f"from 1 to {most}", value)
    return value


def _rope(keys: ConfigKeys) -> tuple[float, float]:
    """(theta, partial_rotary_factor): transformers 5's rope_parameters, or the hub's top-level
    rope_theta / partial_rotary_factor (rope_scaling null); 0.9 where neither says (MoonshineConfig's)."""
    params = keys.section("rope_parameters")
    kind = params.str("rope_type", None) or params.str("type", "default")
    scaling = keys.section("rope_scaling")
    if kind != "default" or (
        scaling.raw and (scaling.str("rope_type", None) or scaling.str("type", "default")) != "default"
    ):
        raise ModelFileError(keys.path, f"Moonshine with RoPE scaling {kind!r}: only the default RoPE is supported")
    theta = params.number("rope_theta", keys.number("rope_theta", 10000.0))
    factor = params.number("partial_rotary_factor", keys.number("partial_rotary_factor", 0.9))
    if not theta > 0 or not 0 < factor <= 1:
        raise ModelFileError(
            keys.path, f"rope_theta {theta} and partial_rotary_factor {factor}: positive, the factor at most 1"
        )
    return theta, factor


def tensor_shapes(m: MoonshineConfig) -> dict[str, tuple]:
    """Every tensor the graphs read -> its shape (HF names)."""
    cfg = m.cfg
    h, inter, vocab = cfg.hidden_size, cfg.intermediate_size, cfg.vocab_size
    e, d = "model.encoder.", "model.decoder."
    shapes = {
        e + "conv1.weight": (h, 1, CONVS[0][0]),
        e + "conv2.weight": (2 * h, h, CONVS[1][0]),
        e + "conv2.bias": (2 * h,),
        e + "conv3.weight": (h, 2 * h, CONVS[2][0]),
        e + "conv3.bias": (h,),
        e + "groupnorm.weight": (h,),
        e + "groupnorm.bias": (h,),
        e + "layer_norm.weight": (h,),
        d + "embed_tokens.weight": (vocab, h),
        d + "norm.weight": (h,),
    }
    if not cfg.tie_word_embeddings:
        shapes["proj_out.weight"] = (vocab, h)
    attention = [f"{p}_proj.weight" for p in "qkvo"]
    for i in range(m.encoder_layers):
        p = f"{e}layers.{i}."
        shapes.update({p + "self_attn." + name: (h, h) for name in attention})
        shapes.update({p + "mlp.fc1.weight": (inter, h), p + "mlp.fc1.bias": (inter,)})
        shapes.update({p + "mlp.fc2.weight": (h, inter), p + "mlp.fc2.bias": (h,)})
        shapes.update({p + norm + ".weight": (h,) for norm in ("input_layernorm", "post_attention_layernorm")})
    for i in range(cfg.num_layers):
        p = f"{d}layers.{i}."
        for block in ("self_attn.", "encoder_attn."):
            shapes.update({p + block + name: (h, h) for name in attention})
        shapes.update({p + "mlp.fc1.weight": (2 * inter, h), p + "mlp.fc1.bias": (2 * inter,)})
        shapes.update({p + "mlp.fc2.weight": (h, inter), p + "mlp.fc2.bias": (h,)})
        norms = ("input_layernorm", "post_attention_layernorm", "final_layernorm")
        shapes.update({p + norm + ".weight": (h,) for norm in norms})
    return shapes


VECTOR_DTYPES = ("F32", "F16", "BF16")


def check_tensors(m: MoonshineConfig, tensors: dict, label) -> None:
    """Every tensor the graphs read is there, of its shape; vectors and conv weights in a dtype the
    upload converts (weights.py)."""
    for name, shape in tensor_shapes(m).items():
        info = tensors.get(name)
        if info is None:
            raise ModelFileError(label, f"missing tensor {name!r}")
        if tuple(info.shape) != shape:
            raise ModelFileError(
                info.path, f"tensor {name!r} has shape {list(info.shape)}; config.json implies {list(shape)}"
            )
        if (len(shape) != 2 or "conv" in name) and info.dtype not in VECTOR_DTYPES:
            raise ModelFileError(
                info.path, f"tensor {name!r}: dtype {info.dtype} (a norm, bias or conv weight must be F32, F16 or BF16)"
            )


def front_end_lengths(samples: int) -> tuple[int, int, int, int]:
    """(samples, conv1, conv2 and conv3 frames) of a window: transformers' floor at each stride
    (MoonshinePreTrainedModel._get_feat_extract_output_lengths); 0 frames where it is too short."""
    out = [samples]
    for kernel, stride in CONVS:
        n = out[-1]
        out.append((n - kernel) // stride + 1 if n >= kernel else 0)
    return tuple(out)


MIN_SAMPLES = next(n for n in range(1, 10_000) if front_end_lengths(n)[-1] >= 1)  # 895: the encoder's first frame
