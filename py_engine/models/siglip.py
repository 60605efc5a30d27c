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

Gemma 3's tower is the same SigLIP encoder under other names with another connector (models/
gemma3_vision.py): siglip_config and siglip_encoder serve both.
"""

from __future__ import annotations

import math
from dataclasses import replace

from ..errors import ModelFileError
from ..runtime.graph import Graph, Tensor
from ..runtime.linear_plan import weight_defines
from .bert import encoder_attention, gather_rows, gelu, input_tensor, layer_norm
from .builder import GraphBuilder
from .config import MAX_LAYERS, ModelConfig
from .config_values import ConfigKeys

VISION = "model.vision_model."
PROJECTION = "model.connector.modality_projection.proj.weight"
PATCH_WEIGHT = VISION + "embeddings.patch_embedding.weight"


def siglip_config(vision: ConfigKeys, path, scale: int = 1) -> tuple[ModelConfig, int, int]:
    """vision_config's SigLIP encoder as a ModelConfig (an encoder's fields; layer_norm_eps in
    rms_norm_eps, which the LayerNorms read), its image_size and patch_size; the patch grid's side
    must be a multiple of `scale` (the connector's pooling or shuffle)."""
    hidden, heads = vision.int("hidden_size", 768), vision.int("num_attention_heads", 12)
    if heads < 1 or hidden % heads:
        vision.fail("hidden_size", f"a multiple of num_attention_heads ({heads})", hidden)
    image, patch = vision.int("image_size", 224), vision.int("patch_size", 16)
    side = image // patch if patch > 0 else 0
    if patch < 1 or image % patch or scale < 1 or side % scale:
        raise ModelFileError(
            path,
            f"vision_config image_size {image} must be a multiple of patch_size {patch}, and their ratio of {scale}",
        )
    layers, intermediate = vision.int("num_hidden_layers", 12), vision.int("intermediate_size", 3072)
    if not 1 <= layers <= MAX_LAYERS:  # before the graph's per-layer ops are built
        vision.fail("num_hidden_layers", f"from 1 to {MAX_LAYERS}", layers)
    if intermediate < 1:
        vision.fail("intermediate_size", "at least 1", intermediate)
    cfg = ModelConfig(
        architecture="SiglipVisionModel",
        vocab_size=0,
        hidden_size=hidden,
        intermediate_size=intermediate,
        num_layers=layers,
        num_heads=heads,
        num_kv_heads=heads,
        head_dim=hidden // heads,
        rms_norm_eps=vision.number("layer_norm_eps", 1e-6),
        rope_theta=10000.0,  # unused: no rotary positions
        max_position=side * side,
        hidden_act=vision.str("hidden_act", "gelu_pytorch_tanh"),
    )
    return cfg, image, patch


def vision_config(raw: dict, path) -> tuple[ModelConfig, dict]:
    """SmolVLM's config.json's vision tower (siglip_config) and its geometry: kind "smolvlm",
    image_size, patch_size, scale_factor, tokens (a tile's image tokens)."""
    keys = ConfigKeys(raw, path)
    scale = keys.int("scale_factor", 2)
    cfg, image, patch = siglip_config(keys.section("vision_config"), path, scale)
    tokens = (image // patch // scale) ** 2
    return cfg, {"kind": "smolvlm", "image_size": image, "patch_size": patch, "scale_factor": scale, "tokens": tokens}


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
    """The checkpoint's vision tower and connector tensors (flat_patches' patch embedding)."""
    out = {name: info for name, info in tensors.items() if name.startswith((VISION, "model.connector."))}
    return flat_patches(out, PATCH_WEIGHT)


def flat_patches(tensors: dict, name: str) -> dict:
    """`tensors` with the patch embedding's convolution weight `name` (Conv2d's [hidden, 3, p, p],
    Qwen3.5's Conv3d [hidden, 3, frames, p, p]) seen as the matrix [hidden, 3 ... p^2] it is in memory."""
    weight = tensors.get(name)
    if weight is not None and len(weight.shape) > 2:
        tensors[name] = replace(weight, shape=(weight.shape[0], math.prod(weight.shape[1:])))
    return tensors


def renamed(tensors: dict, prefixes: dict) -> dict:
    """The tensors whose names start with one of `prefixes`' keys, under that prefix's value instead
    (a tower's names whatever the checkpoint's layout); a name given twice is refused."""
    out = {}
    for name, info in tensors.items():
        prefix = next((p for p in prefixes if name.startswith(p)), None)
        if prefix is None:
            continue
        canonical = prefixes[prefix] + name[len(prefix) :]
        if canonical in out:
            raise ModelFileError(info.path, f"tensor {canonical!r} is stored twice (as {name!r} too)")
        out[canonical] = info
    return out


def siglip_encoder(b: GraphBuilder, geometry: dict, prefix: str) -> Tensor:
    """One tile's SigLIP encoder (b's max_rows: the tile's patches), its tensors under `prefix`:
    the post-LayerNorm activations [rows, hidden]. Inputs: patches [rows, 3 p^2] f32, positions
    (each row's patch index), spans (the tile's rows, for every row)."""
    cfg = b.cfg
    patches = input_tensor(b, "patches", 4 * 3 * geometry["patch_size"] ** 2)
    positions = input_tensor(b, "positions", 4)
    spans = input_tensor(b, "spans", 8)
    e = prefix + "embeddings."
    where = gather_rows(b, b.matrix([e + "position_embedding.weight"]), positions)
    x = b.linear(patches, [e + "patch_embedding.weight"], bias=[e + "patch_embedding.bias"], residual=where)
    for i in range(cfg.num_layers):
        p = f"{prefix}encoder.layers.{i}."
        attn = p + "self_attn."
        h = layer_norm(b, x, p + "layer_norm1")
        qkv_names = [attn + f"{name}_proj" for name in "qkv"]
        qkv = b.linear(h, [n + ".weight" for n in qkv_names], bias=[n + ".bias" for n in qkv_names])
        a = encoder_attention(b, qkv, spans)
        x = b.linear(a, [attn + "out_proj.weight"], bias=[attn + "out_proj.bias"], residual=x)
        h = layer_norm(b, x, p + "layer_norm2")
        h = gelu(b, b.linear(h, [p + "mlp.fc1.weight"], bias=[p + "mlp.fc1.bias"]), tanh="tanh" in cfg.hidden_act)
        x = b.linear(h, [p + "mlp.fc2.weight"], bias=[p + "mlp.fc2.bias"], residual=x)
    return layer_norm(b, x, prefix + "post_layernorm")


def build_siglip(b: GraphBuilder, geometry: dict) -> Graph:
    """One tile's vision tower (siglip_encoder) and SmolVLM's connector. Inputs: siglip_encoder's,
    and shuffle (shuffle_order). Output: image_features [rows / s^2, the text tower's hidden size]."""
    cfg, g = b.cfg, b.g
    rows = g.max_rows
    scale = geometry["scale_factor"]
    shuffle = input_tensor(b, "shuffle", 4)
    x = siglip_encoder(b, geometry, VISION)
    table = [(x, 0, weight_defines(cfg.hidden_size, "f32"))]
    shuffled = gather_rows(b, (table, rows, cfg.hidden_size), shuffle)
    out_rows = rows // (scale * scale)
    text_hidden = b.shape(PROJECTION)[0]
    y = g.outputs["image_features"] = g.tensor("image_features", out_rows * text_hidden * 4, "output")
    b.linear(shuffled, [PROJECTION], fixed_rows=out_rows, out=y)
    return g
