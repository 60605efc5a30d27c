"""Qwen3.5's vision tower (transformers' Qwen3_5VisionModel: Qwen3-VL's ViT without its deepstack
features), from pixel rows to the text tower's image embeddings.

A forward is one picture, resized by the processor to a grid of rows x cols patches of patch_size pixels
(vision/qwen3_5.py), its patches the rows in merge-block order (the merge x merge patches that become one
token are consecutive: shaders/image_patches_merged.wgsl). Each row is 3 x temporal_patch_size x patch^2
values (a still picture's frame repeated), so the Conv3d patch embedding is a matmul over the rows (from
llama.cpp's mmproj, whose converter splits the Conv3d a frame a matrix: one frame a row, a matmul a frame,
summed). Then:

- the learned position embeddings (a square table of num_position_embeddings) resampled bilinearly to the
  picture's grid and added (shaders/embed_interp.wgsl, taps and weights from vision/qwen3_5_grid.py);
- per block (pre-LN, eps 1e-6): x += proj(attention(LayerNorm1(x))), the fused qkv's q and k turned by a
  2D RoPE (half the angles the patch's row's, half its column's: shaders/rope_rows.wgsl), the attention
  bidirectional over the picture's patches (encoder_attention.wgsl); x += fc2(act(fc1(LayerNorm2(x))));
- the merger: LayerNorm over each patch, then merge^2 consecutive rows read as one of merge^2 x hidden
  (the forward's output rows, Step.logit_rows: rows / merge^2), fc1, exact-erf GELU, fc2 to the text
  tower's width (out_hidden_size): image_features.

Checkpoints name it model.visual.* (transformers 5) or visual.* (the older layout); both are read as the
first. Every tensor's shape is checked against config.json before a graph is made.
"""

from __future__ import annotations

import math

from ..errors import ModelFileError
from ..runtime.graph import Graph, ceil_div
from ..runtime.linear_plan import LOGIT_ROWS, weight_defines
from .bert import encoder_attention, encoder_rope, gelu, input_tensor, layer_norm
from .builder import GraphBuilder
from .config import MAX_LAYERS, ModelConfig
from .config_values import ConfigKeys
from .siglip import flat_patches, renamed

VISION = "model.visual."
PREFIXES = {"model.visual.": VISION, "visual.": VISION}
PATCH_WEIGHT = VISION + "patch_embed.proj.weight"
POSITIONS = VISION + "pos_embed.weight"
TANH_GELUS = ("gelu_pytorch_tanh", "gelu_new")
# The most patches one picture's forward takes: 4096 is a 1024 x 1024 picture at patch 16 (1,024 tokens);
# the processor's larger pictures are resized to fit (vision/qwen3_5.py). Fewer where a row's widest
# activation would pass one storage binding.
MAX_PICTURE_PATCHES = 4096
MAX_WIDTH = 65536  # a bound on every width before any per-row size is computed
LAYER_NORM_EPS = 1e-6  # Qwen3_5VisionBlock's and the merger's LayerNorms


def qwen3_5_vision_config(raw: dict, path, max_binding: int = 1 << 27) -> tuple[ModelConfig, dict]:
    """config.json's vision_config as the tower's ModelConfig (an encoder's fields) and its geometry: kind
    "qwen3_5", patch_size, temporal, merge, side (the position table's), theta (the 2D RoPE's base),
    out_hidden, max_patches (a forward's rows) and tokens (its most output rows)."""
    keys = ConfigKeys(raw, path)
    vision = keys.section("vision_config")
    hidden, heads = vision.int("hidden_size", 1152), vision.int("num_heads", vision.int("num_attention_heads", 16))
    layers = vision.int("depth", vision.int("num_hidden_layers", 27))
    intermediate, out_hidden = vision.int("intermediate_size", 4304), vision.int("out_hidden_size", 3584)
    for name, value in (("hidden_size", hidden), ("intermediate_size", intermediate), ("out_hidden_size", out_hidden)):
        if not 1 <= value <= MAX_WIDTH:
            vision.fail(name, f"from 1 to {MAX_WIDTH}", value)
    if heads < 1 or hidden % heads or (hidden // heads) % 4 or hidden // heads > 256:
        vision.fail("num_heads", "a divisor of hidden_size giving heads of a multiple of 4 dims, at most 256", heads)
    if not 1 <= layers <= MAX_LAYERS:
        vision.fail("depth", f"from 1 to {MAX_LAYERS}", layers)
    patch, temporal = vision.int("patch_size", 16), vision.int("temporal_patch_size", 2)
    merge, channels = vision.int("spatial_merge_size", 2), vision.int("in_channels", 3)
    for name, value, most in (("patch_size", patch, 1024), ("temporal_patch_size", temporal, 16)):
        if not 1 <= value <= most:
            vision.fail(name, f"from 1 to {most}", value)
    if not 1 <= merge <= 16:
        vision.fail("spatial_merge_size", "from 1 to 16", merge)
    if channels != 3:
        vision.fail("in_channels", "3 (RGB)", channels)
    act = vision.str("hidden_act", "gelu_pytorch_tanh")
    if act not in (*TANH_GELUS, "gelu"):
        vision.fail("hidden_act", f"one of gelu, {', '.join(TANH_GELUS)}", act)
    positions = vision.int("num_position_embeddings", 2304)
    if not 1 <= positions <= 1 << 20:
        vision.fail("num_position_embeddings", "from 1 to 2^20", positions)
    rope = vision.section("rope_parameters")
    if rope.str("rope_type", "axial") != "axial":
        rope.fail("rope_type", '"axial" (the 2D RoPE of rows and columns)', rope.get("rope_type"))
    theta = rope.number("rope_theta", 10000.0)
    if not theta > 1:
        rope.fail("rope_theta", "a number above 1", theta)
    widest = max(3 * hidden, intermediate, out_hidden, 3 * temporal * patch * patch)
    most = min(MAX_PICTURE_PATCHES, max_binding // (4 * widest)) // (merge * merge) * merge * merge
    if most < merge * merge:
        raise ModelFileError(path, f"vision_config: a row of {widest} floats leaves no room for a picture's patches")
    cfg = ModelConfig(
        architecture="Qwen3_5VisionModel",
        vocab_size=0,
        hidden_size=hidden,
        intermediate_size=intermediate,
        num_layers=layers,
        num_heads=heads,
        num_kv_heads=heads,
        head_dim=hidden // heads,
        rms_norm_eps=LAYER_NORM_EPS,  # the LayerNorms read it
        rope_theta=theta,
        max_position=most,
        hidden_act=act,
    )
    # frames: those a patch row holds (a still picture's one, repeated), the Conv3d one matrix over them;
    # llama.cpp's mmproj splits it into a matrix a frame, each reading a one-frame row (formats/mmproj_qwen.py).
    geometry = {"kind": "qwen3_5", "patch_size": patch, "temporal": temporal, "frames": temporal, "merge": merge}
    geometry |= {"side": math.isqrt(positions), "theta": theta, "out_hidden": out_hidden}
    return cfg, geometry | {"max_patches": most, "tokens": most // (merge * merge)}


def qwen3_5_vision_tensors(tensors: dict) -> dict:
    """The checkpoint's vision tower under this module's names (PREFIXES), the Conv3d patch embedding as
    its [hidden, 3 x temporal x patch^2] matrix; a name given twice is refused."""
    return flat_patches(renamed(tensors, PREFIXES), PATCH_WEIGHT)


def expected_shapes(cfg: ModelConfig, geometry: dict) -> dict[str, tuple]:
    """Every tensor the graph reads and its shape, from config.json."""
    h, inter, m2 = cfg.hidden_size, cfg.intermediate_size, geometry["merge"] ** 2
    shapes = {name: (h, 3 * geometry["frames"] * geometry["patch_size"] ** 2) for name in patch_matrices(geometry)}
    shapes |= {VISION + "patch_embed.proj.bias": (h,), POSITIONS: (geometry["side"] ** 2, h)}
    for i in range(cfg.num_layers):
        p = f"{VISION}blocks.{i}."
        for name, rows, cols in (("attn.qkv", 3 * h, h), ("attn.proj", h, h), ("mlp.linear_fc1", inter, h)):
            shapes[f"{p}{name}.weight"], shapes[f"{p}{name}.bias"] = (rows, cols), (rows,)
        shapes[p + "mlp.linear_fc2.weight"], shapes[p + "mlp.linear_fc2.bias"] = (h, inter), (h,)
        for norm in ("norm1", "norm2"):
            shapes[f"{p}{norm}.weight"] = shapes[f"{p}{norm}.bias"] = (h,)
    m = VISION + "merger."
    shapes[m + "norm.weight"] = shapes[m + "norm.bias"] = (h,)
    shapes[m + "linear_fc1.weight"], shapes[m + "linear_fc1.bias"] = (m2 * h, m2 * h), (m2 * h,)
    shapes[m + "linear_fc2.weight"], shapes[m + "linear_fc2.bias"] = (
        (geometry["out_hidden"], m2 * h),
        (geometry["out_hidden"],),
    )
    return shapes


def patch_matrices(geometry: dict) -> list[str]:
    """The patch embedding's matrices: the Conv3d's one over every frame, or (frames 1) one a frame, the
    k-th named PATCH_WEIGHT.k from the second on (llama.cpp's v.patch_embd.weight.1)."""
    if geometry["frames"] == geometry["temporal"]:
        return [PATCH_WEIGHT]
    return [PATCH_WEIGHT] + [f"{PATCH_WEIGHT}.{k}" for k in range(1, geometry["temporal"])]


def check_shapes(b: GraphBuilder, geometry: dict) -> None:
    for name, shape in expected_shapes(b.cfg, geometry).items():
        info = b.tensor_info(name)  # a ModelFileError where it is missing
        if tuple(info.shape) != shape:
            raise ModelFileError(
                info.path, f"tensor {name!r} has shape {list(info.shape)}, config.json says {list(shape)}"
            )


def build_qwen3_5_vision(b: GraphBuilder, geometry: dict) -> Graph:
    """One picture's vision tower and merger (b's max_rows: its most patches; a forward's Step.logit_rows:
    its tokens). Inputs: patches [rows, 3 t p^2] f32, pos_taps / pos_weights [rows, 4] (u32, f32),
    vision_rope [rows, head_dim / 2, 2] f32, spans [rows, 2] (the picture's rows, for every row).
    Output: image_features [tokens, out_hidden]."""
    check_shapes(b, geometry)
    cfg, g = b.cfg, b.g
    hidden, hd = cfg.hidden_size, cfg.head_dim
    m2 = geometry["merge"] ** 2
    patches = input_tensor(b, "patches", 4 * 3 * geometry["frames"] * geometry["patch_size"] ** 2)
    taps, weights = input_tensor(b, "pos_taps", 16), input_tensor(b, "pos_weights", 16)
    cos_sin = input_tensor(b, "vision_rope", 4 * hd)
    spans = input_tensor(b, "spans", 8)
    where = b.act("positions", hidden)
    table = b.matrix([POSITIONS])[0]
    if len(table) != 1:
        raise ModelFileError(b.tensor_info(POSITIONS).path, f"tensor {POSITIONS!r} is larger than one binding")
    shard, _, _ = table[0]
    g.op(
        "embed_interp",
        {"taps": taps, "weights": weights, "w": shard, "y": where},
        {"dim": hidden, "row_count": shard.rows[1], "pad0": 0, "pad1": 0},
        lambda rows: (ceil_div(hidden, 256), rows, 1),
        weight_defines(hidden, shard.dtype),
    )
    first, *others = patch_matrices(geometry)
    x = b.linear(patches, [first], bias=[VISION + "patch_embed.proj.bias"], residual=where)
    for frame in others:  # each frame's matrix over the one frame the rows hold: the still picture's
        x = b.linear(patches, [frame], residual=x)
    for i in range(cfg.num_layers):
        p = f"{VISION}blocks.{i}."
        qkv = b.linear(layer_norm(b, x, p + "norm1"), [p + "attn.qkv.weight"], bias=[p + "attn.qkv.bias"])
        a = encoder_attention(b, encoder_rope(b, qkv, cos_sin), spans)
        x = b.linear(a, [p + "attn.proj.weight"], bias=[p + "attn.proj.bias"], residual=x)
        h = b.linear(layer_norm(b, x, p + "norm2"), [p + "mlp.linear_fc1.weight"], bias=[p + "mlp.linear_fc1.bias"])
        h = gelu(b, h, tanh=cfg.hidden_act in TANH_GELUS)
        x = b.linear(h, [p + "mlp.linear_fc2.weight"], bias=[p + "mlp.linear_fc2.bias"], residual=x)
    m = VISION + "merger."
    x = layer_norm(b, x, m + "norm")
    tokens, width = g.max_rows // m2, m2 * hidden
    # x's rows of hidden read as rows of merge^2 x hidden: the merged tokens, Step.logit_rows of them.
    merged = b.linear(
        x, [m + "linear_fc1.weight"], bias=[m + "linear_fc1.bias"], rows=LOGIT_ROWS, out=b.act("merged", width, tokens)
    )
    g.op(
        "gelu",
        {"x": merged},
        {"width": width, "pad0": 0, "pad1": 0, "pad2": 0},
        lambda rows: (ceil_div(width, 256), rows // m2, 1),
        {"TANH": False, "GELU": True},  # nn.GELU(): the exact erf form
    )
    y = g.outputs["image_features"] = g.tensor("image_features", tokens * geometry["out_hidden"] * 4, "output")
    b.linear(merged, [m + "linear_fc2.weight"], bias=[m + "linear_fc2.bias"], rows=LOGIT_ROWS, out=y)
    return g
