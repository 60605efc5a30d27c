"""Graph ops of the speech models (Whisper: models/whisper.py, Moonshine: models/moonshine.py,
NanoCodec: models/nanocodec.py) beside GraphBuilder's own.

Interfaces (what a speech graph calls):
- conv1d(b, x, weight, ...) -> Tensor: PyTorch's Conv1d over time-major activations x [frames,
  channels] (rows are frames), shaders/conv1d.wgsl: stride, dilation, groups (depthwise
  included), zero padding left and right (causal: all left), bias, a fused activation ("gelu",
  "gelu_tanh", "tanh") and a residual added after it. Lengths are static (in_len), or a forward's
  own from a `lengths` input (lengths=(tensor, slot): the runner writes in_len and out_len there;
  in_len, out_len then size the buffers and the grid as the most).
- conv_weight(b, name): a checkpoint's convolution weight [out, in / groups, kernel] as an f32
  tensor (conv1d reads it so, whatever the checkpoint stores).
- cross_kv(b, x, k, v, v_bias, frames): an encoder's output x [frames, hidden] projected by a decoder
  layer's cross-attention K and V weights (v_bias: V's bias, or None): two "state" tensors, which
  the decoder graph binds too (loader.upload of both graphs keeps them in one buffer each).
- cross_attention(b, q, keys, values, ...): each query row of q over every frame of the frozen K/V
  (no mask): shaders/cross_attention.wgsl (a workgroup per head, row and split of the frames) and
  cross_attention_merge.wgsl -> [rows, heads * head_dim].
- projections(b, x, parts): x times several (weight, bias or None) into one row, side by side:
  Whisper's q|k|v, whose k has no bias.
"""

from __future__ import annotations

import math

from ..errors import ModelFileError
from ..runtime.graph import Tensor, WeightSpec, ceil_div
from ..runtime.linear_plan import linear_params
from .builder import GraphBuilder

ACTIVATIONS = {None: 0, "gelu": 1, "gelu_tanh": 2, "tanh": 3}  # conv1d.wgsl's ACTIVATION
NO_LENGTH = 0xFFFFFFFF
CONV_TILE = 64  # conv1d.wgsl's TILE
CROSS_CHUNK = 256  # cross_attention.wgsl's CHUNK: the most frames a workgroup scores at once
# Frames a split (a workgroup's share of a head's frames) at least: a decode token's 1,500 Whisper
# frames over 24 splits a head, not 6 of a CHUNK each (48 workgroups of 256 serial frames on an H200
# took 0.15 ms a layer, half of a decode token's time; the merge of 24 partials costs ~nothing).
CROSS_SPLIT = 64
CROSS_SPLITS_MAX = 256  # cross_attention_merge.wgsl's SPLITS_MAX


def conv_out_len(in_len: int, kernel: int, stride: int = 1, dilation: int = 1, pad: tuple = (0, 0)) -> int:
    """Frames a convolution gives from in_len (PyTorch's formula; 0 where the input is too short)."""
    span = dilation * (kernel - 1) + 1
    padded = in_len + pad[0] + pad[1]
    return 0 if padded < span else (padded - span) // stride + 1


def conv_weight(b: GraphBuilder, name: str) -> Tensor:
    """A checkpoint's Conv1d weight [out, in / groups, kernel] as f32, whatever its stored dtype."""
    shape = b.shape(name)
    if len(shape) != 3:
        raise ModelFileError(b.tensor_info(name).path, f"tensor {name!r}: a Conv1d weight is 3-D, not {shape}")
    return b.g.tensor(name, math.prod(shape) * 4, "weight", weight=WeightSpec((name,), "vector"), rows=(0, shape[0]))


def conv1d(
    b: GraphBuilder,
    x: Tensor,
    weight: str,
    bias: str | None = None,
    *,
    in_len: int,
    stride: int = 1,
    dilation: int = 1,
    groups: int = 1,
    pad: tuple = (0, 0),
    activation: str | None = None,
    residual: Tensor | None = None,
    lengths: tuple | None = None,
    x_stride: int | None = None,
    x_offset: int = 0,
    out: Tensor | None = None,
) -> Tensor:
    """y [out_len, out_channels] = act(conv(x) + bias) (+ residual) over x [in_len, x_stride] (its
    channels from x_offset). pad: (left, right) zeros. lengths: (a u32 input tensor, slot) whose
    words slot and slot + 1 hold this forward's in_len and out_len (in_len is then the most)."""
    out_channels, cin_g, kernel = b.shape(weight)
    in_channels = cin_g * groups
    if out_channels % groups:
        raise ModelFileError(
            b.tensor_info(weight).path, f"{weight!r}: {out_channels} output channels in {groups} groups"
        )
    out_len = conv_out_len(in_len, kernel, stride, dilation, pad)
    y = out or b.act("conv", out_channels, out_len)
    cout_g = out_channels // groups
    direct = groups > 1 and cout_g % CONV_TILE != 0  # a tile would straddle groups
    b.g.op(
        "conv1d",
        {
            "x": x,
            "w": conv_weight(b, weight),
            "bias": b.vector([bias]) if bias else b.dummy,
            "residual": residual or b.dummy,
            "lengths": lengths[0] if lengths else b.dummy,
            "y": y,
        },
        {
            "in_len": in_len,
            "out_len": out_len,
            "in_channels": in_channels,
            "out_channels": out_channels,
            "kernel": kernel,
            "stride": stride,
            "dilation": dilation,
            "groups": groups,
            "pad_left": pad[0],
            "has_bias": int(bias is not None),
            "has_residual": int(residual is not None),
            "length_at": lengths[1] if lengths else NO_LENGTH,
            "x_stride": x_stride or in_channels,
            "x_offset": x_offset,
            "pad0": 0,
            "pad1": 0,
        },
        lambda rows: (ceil_div(out_channels, CONV_TILE), ceil_div(out_len, CONV_TILE), 1),
        {"ACTIVATION": ACTIVATIONS[activation], "DIRECT": direct, "GELU": True},
    )
    return y


def projections(b: GraphBuilder, x: Tensor, parts: list[tuple[str, str | None]]) -> Tensor:
    """x times each (weight, bias or None) of `parts`, their outputs side by side in one row (one
    linear op a part: GraphBuilder.linear's bias covers all of its parts or none)."""
    widths = [b.shape(weight)[0] for weight, _ in parts]
    total = sum(widths)
    y = b.act("proj", total)
    at = 0
    for (weight, bias), width in zip(parts, widths):
        shards, _, k = b.matrix([weight])
        for shard, start, defines in shards:
            count = shard.rows[1]
            b._linear_op(
                {
                    "x": x,
                    "w": shard,
                    "bias": b.vector([bias], (start, count)) if bias else b.dummy,
                    "residual": b.dummy,
                    "y": y,
                    "norm": b.dummy,
                },
                linear_params(k, count, out_stride=total, out_offset=at + start, bias=bias is not None),
                defines,
            )
        at += width
    return y


def cross_kv(
    b: GraphBuilder, x: Tensor, k: str, v: str, v_bias: str | None, frames: int, name: str
) -> tuple[Tensor, Tensor]:
    """A decoder layer's frozen cross-attention keys and values (no K bias: Whisper's k_proj has
    none; Moonshine's neither) from the encoder's output x of at most `frames` rows: "state"
    tensors named name.k / name.v, also the encoder graph's outputs."""
    out = []
    for part, weight, bias in (("k", k, None), ("v", v, v_bias)):
        width = b.shape(weight)[0]
        state = b.g.tensor(f"{name}.{part}", frames * width * 4, "state")
        b.g.outputs[state.name] = state
        out.append(b.linear(x, [weight], bias=[bias] if bias else None, out=state))
    return out[0], out[1]


def cross_attention(
    b: GraphBuilder,
    q: Tensor,
    keys: Tensor,
    values: Tensor,
    *,
    heads: int,
    kv_heads: int,
    head_dim: int,
    frames: int,
    scale: float | None = None,
    lengths: tuple | None = None,
) -> Tensor:
    """Every query row of q [rows, heads * head_dim] over the frames of the frozen keys and values
    ([frames, kv_heads * head_dim], cross_kv's): [rows, heads * head_dim]. frames: the most;
    lengths: (a u32 input tensor, slot) holding a window's own count. scale: default head_dim^-0.5.
    The frames go in splits of CROSS_SPLIT (one split on a CPU adapter, whose every workgroup costs),
    merged by cross_attention_merge.wgsl."""
    splits = 1 if b.cpu else min(ceil_div(frames, CROSS_SPLIT), CROSS_SPLITS_MAX)
    split_len = ceil_div(ceil_div(frames, splits), CROSS_SPLIT) * CROSS_SPLIT
    partials = b.act("cross_partials", heads * splits * (head_dim + 2))
    b.g.op(
        "cross_attention",
        {"q": q, "k": keys, "v": values, "lengths": lengths[0] if lengths else b.dummy, "partials": partials},
        {
            "n_heads": heads,
            "head_dim": head_dim,
            "kv_group": heads // kv_heads,
            "frames": frames,
            "q_stride": heads * head_dim,
            "q_offset": 0,
            "kv_stride": kv_heads * head_dim,
            "scale": head_dim**-0.5 if scale is None else scale,
            "split_len": split_len,
            "splits": splits,
            "frames_at": lengths[1] if lengths else NO_LENGTH,
            "pad0": 0,
        },
        lambda rows: (heads, rows, splits),
    )
    y = b.act("cross", heads * head_dim)
    b.g.op(
        "cross_attention_merge",
        {"partials": partials, "y": y},
        {"n_heads": heads, "head_dim": head_dim, "splits": splits, "pad0": 0},
        lambda rows: (heads, rows, 1),
    )
    return y
