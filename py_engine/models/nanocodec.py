"""NanoCodec's decoder (NVIDIA NeMo's AudioCodecModel.decode: GroupFiniteScalarQuantizer, then
CausalHiFiGANDecoder), the audio half of Kani-TTS-2, as one graph over a window of codec frames.

Its files are what tools/nanocodec_to_safetensors.py makes of a `.nemo` archive: config.json (the
decoder's and the quantizer's hyperparameters) and model.safetensors (the decoder's tensors, weight
norm folded). NanoCodec (nvidia/nemo-nano-codec-22khz-0.6kbps-12.5fps) is under the NVIDIA Open
Model License.

A forward decodes `rows` frames (each `groups` codes) into rows x hop PCM samples:
- FSQ: each code -> `dims` values (shaders/fsq_dequant.wgsl), a frame's groups side by side;
- pre_conv: a causal Conv1d (in_kernel_size);
- per upsample rate r: HalfSnake -> the causal transposed conv (kernel 2r, stride r, channels halved,
  shaders/conv_transpose1d.wgsl) -> HiFi-GAN's residual layer: for each kernel k, three residual
  blocks (dilations 1, 3, 5: HalfSnake -> causal conv k dilated -> HalfSnake -> causal conv k, + the
  block's input), the kernels' results averaged (by the HalfSnake that reads them: MEAN3);
- HalfSnake -> post_conv (causal, one channel) -> clamp to [-1, 1] (the reader's: the PCM comes back
  to the host anyway) or tanh (fused in the conv).
Activations are time-major [samples, channels] (the engine's rows-first layout, audio_ops.conv1d's).
Every convolution is causal (all its padding on the left), so output sample t depends on frames up
to t's only: decoding a window of new frames after `context_frames` earlier ones gives exactly the
samples a decode of the whole sequence gives there (py_engine/speech/nanocodec.py streams so).
Lengths vary per forward (a window's frames): the convolutions read theirs from the `lengths` input
(two words a stage: its samples in and out), the other kernels from Step.rows x their per_row.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..errors import ModelFileError
from ..runtime.graph import Graph, Tensor, ceil_div
from .audio_ops import conv1d, conv_weight
from .builder import GraphBuilder
from .config import ModelConfig
from .config_values import ConfigKeys

ACTIVATIONS = ("half_snake",)
OUTPUTS = ("clamp", "tanh")
MAX_LEVELS = 4  # fsq_dequant.wgsl's level0 .. level3


@dataclass(frozen=True)
class CodecConfig:
    sample_rate: int
    groups: int  # codebooks: codes a frame
    levels: tuple  # FSQ levels of a group's dims
    base_channels: int
    rates: tuple  # upsample rates, in order
    in_kernel: int
    out_kernel: int
    res_kernels: tuple
    dilations: tuple
    output: str  # "clamp" or "tanh"

    @property
    def dims(self) -> int:
        return len(self.levels)

    @property
    def codebook_size(self) -> int:
        return math.prod(self.levels)

    @property
    def hop(self) -> int:
        """PCM samples a frame."""
        return math.prod(self.rates)

    def channels(self, stage: int) -> int:
        """Channels after `stage` upsamplings (0: pre_conv's)."""
        return self.base_channels >> stage

    @property
    def context_frames(self) -> int:
        """Frames before a window's first new one that its new samples depend on (the receptive
        field, walked back from the output): the post conv's kernel - 1 samples, each residual
        layer's deepest chain (its kernel k's three blocks: (k - 1) d + (k - 1) each), each
        transposed conv's taps (kernel 2r reads input t / r and the one before), the pre conv's."""
        need = self.out_kernel - 1
        chain = max(sum((k - 1) * d + (k - 1) for d in self.dilations) for k in self.res_kernels)
        for rate in reversed(self.rates):
            need = ceil_div(need + chain, rate) + 1
        return need + self.in_kernel - 1


def codec_config(raw: dict, path) -> CodecConfig:
    """config.json (tools/nanocodec_to_safetensors.py's keys) checked: ModelFileError naming the key."""
    keys = ConfigKeys(raw, path)

    def int_list(key: str) -> tuple:
        value = keys.get(key)
        if not isinstance(value, list) or not value or not all(type(v) is int and v > 0 for v in value):
            keys.fail(key, "a list of positive integers", value)
        return tuple(value)

    if keys.str("model_type") != "nanocodec":
        keys.fail("model_type", '"nanocodec" (tools/nanocodec_to_safetensors.py writes it)', keys.get("model_type"))
    levels = int_list("num_levels_per_group")
    if len(levels) > MAX_LEVELS or min(levels) < 2:
        keys.fail("num_levels_per_group", f"1 to {MAX_LEVELS} levels of at least 2", list(levels))
    groups, base = keys.int("num_groups"), keys.int("base_channels")
    if groups < 1 or keys.int("input_dim") != groups * len(levels):
        keys.fail("input_dim", f"num_groups x levels a group ({groups} x {len(levels)})", keys.get("input_dim"))
    rates = int_list("up_sample_rates")
    if base < 2 or base % (1 << len(rates)):
        keys.fail("base_channels", f"a multiple of 2^{len(rates)} (halved by each upsampling)", base)
    for key, allowed in (("activation", ACTIVATIONS), ("output_activation", OUTPUTS)):
        if keys.str(key) not in allowed:
            keys.fail(key, " or ".join(allowed), keys.get(key))
    if keys.str("pad_mode", "zeros") != "zeros" or keys.bool("n_groups_equal_to_out_channels", True) is not True:
        raise ModelFileError(path, "only zero padding and upsampling grouped by output channel are supported")
    cfg = CodecConfig(
        sample_rate=keys.int("sample_rate"),
        groups=groups,
        levels=levels,
        base_channels=base,
        rates=rates,
        in_kernel=keys.int("in_kernel_size"),
        out_kernel=keys.int("out_kernel_size"),
        res_kernels=int_list("resblock_kernel_sizes"),
        dilations=int_list("resblock_dilation_sizes"),
        output=keys.str("output_activation"),
    )
    if cfg.sample_rate < 1 or cfg.in_kernel < 1 or cfg.out_kernel < 1:
        raise ModelFileError(path, "sample_rate, in_kernel_size and out_kernel_size must be positive")
    if keys.int("samples_per_frame", cfg.hop) != cfg.hop:
        keys.fail("samples_per_frame", f"the product of up_sample_rates ({cfg.hop})", keys.get("samples_per_frame"))
    return cfg


def codec_model_config(cfg: CodecConfig) -> ModelConfig:
    """The ModelConfig a GraphBuilder wants: the codec has no tokens, heads or RoPE (the builder's
    ids and cos_sin inputs are never bound)."""
    return ModelConfig(
        architecture="NanoCodecDecoder",
        vocab_size=0,
        hidden_size=cfg.base_channels,
        intermediate_size=cfg.base_channels,
        num_layers=1,
        num_heads=1,
        num_kv_heads=1,
        head_dim=2,
        rms_norm_eps=0.0,
        rope_theta=10000.0,
    )


def half_snake(b: GraphBuilder, xs: list[Tensor], alpha: str, channels: int, per_row: int) -> Tensor:
    """HalfSnake of x (or of the mean of three: a residual layer's kernels) with `alpha`'s snakes."""
    y = b.act("snake", channels, b.g.max_rows * per_row)
    mean = len(xs) == 3
    b.g.op(
        "half_snake",
        {"x": xs[0], "x2": xs[1] if mean else b.dummy, "x3": xs[2] if mean else b.dummy}
        | {"alpha": b.flat_vector(alpha), "y": y},
        {"channels": channels, "snake_channels": channels // 2, "per_row": per_row, "pad0": 0},
        lambda rows: (ceil_div(rows * per_row * channels, 256), 1, 1),
        {"MEAN3": mean},
    )
    return y


def upsample(b: GraphBuilder, x: Tensor, prefix: str, rate: int, channels: int, per_row: int) -> Tensor:
    """The causal transposed conv of `prefix` ([channels, 1, 2 rate] grouped by its channels / 2
    outputs) to per_row samples a frame."""
    weight = prefix + "weight"
    in_channels, cout_g, kernel = b.shape(weight)
    out_channels = channels // 2
    if in_channels != channels or cout_g != 1 or kernel != 2 * rate:
        raise ModelFileError(
            b.tensor_info(weight).path, f"{weight}: shape {b.shape(weight)}, not [{channels}, 1, {2 * rate}]"
        )
    y = b.act("upsample", out_channels, b.g.max_rows * per_row)
    b.g.op(
        "conv_transpose1d",
        {"x": x, "w": conv_weight(b, weight), "bias": b.vector([prefix + "bias"]), "y": y},
        {"in_channels": channels, "out_channels": out_channels, "groups": out_channels, "kernel": kernel}
        | {"stride": rate, "per_row": per_row, "has_bias": 1, "pad0": 0},
        lambda rows: (ceil_div(rows * per_row * out_channels, 256), 1, 1),
    )
    return y


def build_nanocodec(b: GraphBuilder, cfg: CodecConfig) -> Graph:
    """The decoder over b's max_rows frames. Inputs: codes (u32 [rows, groups]), lengths (u32, two
    words a stage: stage s's samples, rows x its per_row, twice). Output: pcm (f32 [rows x hop]),
    before the clamp."""
    g, frames = b.g, b.g.max_rows
    codes = g.inputs["codes"] = g.tensor("codes", frames * cfg.groups * 4, "input")
    lengths = g.inputs["lengths"] = g.tensor("lengths", 8 * (len(cfg.rates) + 1), "input")
    x = b.act("fsq", cfg.groups * cfg.dims, frames)
    levels = {f"level{i}": cfg.levels[i] if i < cfg.dims else 1 for i in range(MAX_LEVELS)}
    g.op(
        "fsq_dequant",
        {"codes": codes, "y": x},
        {"groups": cfg.groups, "dims": cfg.dims, **levels, "pad0": 0, "pad1": 0},
        lambda rows: (ceil_div(rows * cfg.groups * cfg.dims, 256), 1, 1),
    )
    x = conv1d(
        b,
        x,
        "pre_conv.conv.weight",
        "pre_conv.conv.bias",
        in_len=frames,
        pad=(cfg.in_kernel - 1, 0),
        lengths=(lengths, 0),
    )
    xs, per_row = [x], 1
    for stage, rate in enumerate(cfg.rates):
        channels = cfg.channels(stage)
        x = half_snake(b, xs, f"activations.{stage}.activation.snake_act.alpha", channels, per_row)
        per_row *= rate
        x = upsample(b, x, f"up_sample_conv_layers.{stage}.conv.", rate, channels, per_row)
        xs = [
            residual_chain(b, x, f"res_layers.{stage}.res_blocks.{i}.", kernel, cfg, stage + 1, per_row, lengths)
            for i, kernel in enumerate(cfg.res_kernels)
        ]
    last = cfg.channels(len(cfg.rates))
    x = half_snake(b, xs, "post_activation.activation.snake_act.alpha", last, per_row)
    pcm = g.outputs["pcm"] = g.tensor("pcm", frames * cfg.hop * 4, "output")
    stage = 2 * len(cfg.rates)
    conv1d(
        b,
        x,
        "post_conv.conv.weight",
        "post_conv.conv.bias",
        in_len=frames * cfg.hop,
        pad=(cfg.out_kernel - 1, 0),
        activation="tanh" if cfg.output == "tanh" else None,
        lengths=(lengths, stage),
        out=pcm,
    )
    return g


def residual_chain(
    b: GraphBuilder, x: Tensor, prefix: str, kernel: int, cfg: CodecConfig, stage: int, per_row: int, lengths
) -> Tensor:
    """One kernel's HiFiGANResBlock: a residual block per dilation, each HalfSnake -> causal conv
    (kernel, dilated) -> HalfSnake -> causal conv (kernel) + its input."""
    channels, length = cfg.channels(stage), b.g.max_rows * per_row
    for i, dilation in enumerate(cfg.dilations):
        p = f"{prefix}res_blocks.{i}."
        h = half_snake(b, [x], p + "input_activation.activation.snake_act.alpha", channels, per_row)
        h = conv1d(
            b,
            h,
            p + "input_conv.conv.weight",
            p + "input_conv.conv.bias",
            in_len=length,
            dilation=dilation,
            pad=((kernel - 1) * dilation, 0),
            lengths=(lengths, 2 * stage),
        )
        h = half_snake(b, [h], p + "skip_activation.activation.snake_act.alpha", channels, per_row)
        x = conv1d(
            b,
            h,
            p + "skip_conv.conv.weight",
            p + "skip_conv.conv.bias",
            in_len=length,
            pad=(kernel - 1, 0),
            residual=x,
            lengths=(lengths, 2 * stage),
        )
    return x
