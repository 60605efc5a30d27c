"""SmolVLM's (Idefics3's) vision tower and connector: SigLIP's encoder over one tile's patches, then
the pixel shuffle and the projection into the text tower's embedding space (transformers'
SmolVLMVisionTransformer and SmolVLMConnector).

A forward is one tile (a square image of `image_size` pixels, as the processor cuts them): its
(image_size / patch_size)^2 patches are the rows, each 3 * patch_size^2 pixel values in the order of
the patch embedding's Conv2d weight (channel, then row, then column: py_engine/vision/patches.py
writes them). Per layer (pre-LN): x += out_proj(attention(LayerNorm1(x))); x += fc2(GELU-tanh(fc1(
LayerNorm2(x)))), attention bidirectional over the tile's patches; then the post-LayerNorm.

The connector's pixel shuffle regroups the patch grid's s x s neighbourhoods (s = scale_factor):
its output row r, chunk j (of s^2, each hidden_size wide) is the input row of patch (h' s + j // s,
w' s + j % s), with (h', w') row r's place in the grid of side / s. Rows of hidden_size laid out one
after another, that is a row permutation (`shuffle_order`), done here by the embedding gather
(shaders/embedding.wgsl reads the post-LayerNorm activations as an f32 table); the projection then
reads s^2 consecutive rows as one row of s^2 * hidden_size.
"""

from __future__ import annotations

import math
from dataclasses import replace

from ..errors import ModelFileError
from ..runtime.graph import Graph
from ..runtime.linear_plan import weight_defines
from .bert import encoder_attention, gather_rows, gelu, input_tensor, layer_norm
from .builder import GraphBuilder
from .config import ModelConfig
from .config_values import ConfigKeys

VISION = "model.vision_model."
PROJECTION = "model.connector.modality_projection.proj.weight"
PATCH_WEIGHT = VISION + "embeddings.patch_embedding.weight"


def vision_config(raw: dict, path) -> tuple[ModelConfig, dict]:
    """config.json's vision tower as a ModelConfig (an encoder's fields; layer_norm_eps in
    rms_norm_eps, which the LayerNorms read) and its geometry: image_size, patch_size, scale_factor."""
    keys = ConfigKeys(raw, path)
    vision = keys.section("vision_config")
    hidden, heads = vision.int("hidden_size", 768), vision.int("num_attention_heads", 12)
    if heads < 1 or hidden % heads:
        vision.fail("hidden_size", f"a multiple of num_attention_heads ({heads})", hidden)
    image, patch = vision.int("image_size", 224), vision.int("patch_size", 16)
    scale = keys.int("scale_factor", 2)
    side = image // patch if patch > 0 else 0
    if patch < 1 or image % patch or scale < 1 or side % scale:
        raise ModelFileError(
            path,
            f"vision_config image_size {image} must be a multiple of patch_size {patch}, and their ratio of scale_factor {scale}",
        )
    cfg = ModelConfig(
        architecture="SiglipVisionModel",
        vocab_size=0,
        hidden_size=hidden,
        intermediate_size=vision.int("intermediate_size", 3072),
        num_layers=vision.int("num_hidden_layers", 12),
        num_heads=heads,
        num_kv_heads=heads,
        head_dim=hidden // heads,
        rms_norm_eps=vision.number("layer_norm_eps", 1e-6),
        rope_theta=10000.0,  # unused: no rotary positions
        max_position=side * side,
        hidden_act=vision.str("hidden_act", "gelu_pytorch_tanh"),
    )
    return cfg, {"image_size": image, "patch_size": patch, "scale_factor": scale}


def shuffle_order(side: int, scale: int) -> list[int]:
    """The pixel shuffle as a row permutation of a side x side patch grid (module docstring)."""
    out_side = side // scale
    order = []
    for r in range(out_side * out_side):
        h, w = divmod(r, out_side)
        for j in range(scale * scale):
            order.append((h * scale + j // scale) * side + w * scale + j % scale)
    return order


def vision_tensors(tensors: dict) -> dict:
    """The checkpoint's vision tower and connector tensors, the patch embedding's Conv2d weight
    [hidden, 3, p, p] seen as the matrix [hidden, 3 p^2] it is in memory."""
    out = {name: info for name, info in tensors.items() if name.startswith((VISION, "model.connector."))}
    weight = out.get(PATCH_WEIGHT)
    if weight is not None and len(weight.shape) == 4:
        out[PATCH_WEIGHT] = replace(weight, shape=(weight.shape[0], math.prod(weight.shape[1:])))
    return out


def build_siglip(b: GraphBuilder, geometry: dict) -> Graph:
    """One tile's vision tower and connector (b's max_rows: the tile's patches). Inputs: patches
    [rows, 3 p^2] f32, positions (each row's patch index), spans (the tile's rows, for every row),
    shuffle (shuffle_order). Output: image_features [rows / s^2, the text tower's hidden size]."""
    cfg, g = b.cfg, b.g
    rows = g.max_rows
    scale = geometry["scale_factor"]
    patches = input_tensor(b, "patches", 4 * 3 * geometry["patch_size"] ** 2)
    positions = input_tensor(b, "positions", 4)
    spans = input_tensor(b, "spans", 8)
    shuffle = input_tensor(b, "shuffle", 4)
    e = VISION + "embeddings."
    where = gather_rows(b, b.matrix([e + "position_embedding.weight"]), positions)
    x = b.linear(patches, [PATCH_WEIGHT], bias=[e + "patch_embedding.bias"], residual=where)
    for i in range(cfg.num_layers):
        p = f"{VISION}encoder.layers.{i}."
        attn = p + "self_attn."
        h = layer_norm(b, x, p + "layer_norm1")
        qkv_names = [attn + f"{name}_proj" for name in "qkv"]
        qkv = b.linear(h, [n + ".weight" for n in qkv_names], bias=[n + ".bias" for n in qkv_names])
        a = encoder_attention(b, qkv, spans)
        x = b.linear(a, [attn + "out_proj.weight"], bias=[attn + "out_proj.bias"], residual=x)
        h = layer_norm(b, x, p + "layer_norm2")
        h = gelu(b, b.linear(h, [p + "mlp.fc1.weight"], bias=[p + "mlp.fc1.bias"]), tanh="tanh" in cfg.hidden_act)
        x = b.linear(h, [p + "mlp.fc2.weight"], bias=[p + "mlp.fc2.bias"], residual=x)
    x = layer_norm(b, x, VISION + "post_layernorm")
    table = [(x, 0, weight_defines(cfg.hidden_size, "f32"))]
    shuffled = gather_rows(b, (table, rows, cfg.hidden_size), shuffle)
    out_rows = rows // (scale * scale)
    text_hidden = b.shape(PROJECTION)[0]
    y = g.outputs["image_features"] = g.tensor("image_features", out_rows * text_hidden * 4, "output")
    b.linear(shuffled, [PROJECTION], fixed_rows=out_rows, out=y)
    return g
