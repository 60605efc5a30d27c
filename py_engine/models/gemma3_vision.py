"""Gemma 3's vision tower and multi-modal projector (transformers' Gemma3ForConditionalGeneration:
SiglipVisionModel, then Gemma3MultiModalProjector).

A forward is one picture: the processor resizes every picture to one square of image_size pixels,
whose (image_size / patch_size)^2 patches are the rows of models/siglip.py's encoder. The projector
then pools the side x side patch grid to mm_tokens_per_image tokens (an average over kernel x kernel
patches, kernel = side / sqrt(mm_tokens_per_image): shaders/avg_pool.wgsl), normalises each with
Gemma's (1 + w) RMSNorm (mm_soft_emb_norm, eps the tower's layer_norm_eps) and multiplies it by
mm_input_projection_weight, which is stored [vision hidden, text hidden] (a torch.matmul operand, not
an nn.Linear's [out, in]: shaders/matmul_kn.wgsl reads it as stored; llama.cpp's mmproj stores it
transposed, nn.Linear's way, and the ordinary linear op reads that).

Checkpoints name the tower three ways: the hub's (vision_tower.vision_model.*, multi_modal_projector.*),
transformers 5's save (vision_tower.* without vision_model.) and transformers 5's modules
(model.vision_tower.*, model.multi_modal_projector.*); gemma3_vision_tensors reads them all into the
last.
"""

from __future__ import annotations

import math

from ..errors import ModelFileError
from ..runtime.graph import Graph
from ..runtime.linear_plan import weight_defines
from .attention_grid import FEW_ROWS
from .builder import GraphBuilder
from .config import ModelConfig
from .config_values import ConfigKeys
from .siglip import flat_patches, renamed, siglip_config, siglip_encoder

VISION = "model.vision_tower."
PROJECTOR = "model.multi_modal_projector."
PROJECTION = PROJECTOR + "mm_input_projection_weight"
SOFT_NORM = PROJECTOR + "mm_soft_emb_norm.weight"
PATCH_WEIGHT = VISION + "embeddings.patch_embedding.weight"
# Where checkpoints keep the tower and projector (module docstring), and the names read here.
PREFIXES = {
    "model.vision_tower.vision_model.": VISION,
    "vision_tower.vision_model.": VISION,
    "model.vision_tower.": VISION,
    "vision_tower.": VISION,
    "model.multi_modal_projector.": PROJECTOR,
    "multi_modal_projector.": PROJECTOR,
}
MAX_TOKENS_PER_IMAGE = 65536  # a bound before any per-token list is made (Gemma 3: 256)


def gemma3_vision_config(raw: dict, path) -> tuple[ModelConfig, dict]:
    """config.json's vision tower (siglip_config) and its geometry: kind "gemma3", image_size,
    patch_size, tokens (mm_tokens_per_image, a square) and pool (the average pool's kernel)."""
    keys = ConfigKeys(raw, path)
    tokens = keys.int("mm_tokens_per_image", 256)
    per_side = math.isqrt(tokens) if 0 < tokens <= MAX_TOKENS_PER_IMAGE else 0
    if per_side * per_side != tokens:
        keys.fail("mm_tokens_per_image", f"a square number of tokens up to {MAX_TOKENS_PER_IMAGE}", tokens)
    cfg, image, patch = siglip_config(keys.section("vision_config"), path, per_side)
    side = image // patch
    # Every one of a picture's tokens is a row of the prompt kernel's forward (engine.py: a picture's
    # tokens attend to each other, which only attention_tiled.wgsl does): more than a few rows' forward.
    if tokens <= FEW_ROWS:
        keys.fail("mm_tokens_per_image", f"more than {FEW_ROWS} (a picture's tokens attend as a prompt's)", tokens)
    geometry = {"kind": "gemma3", "image_size": image, "patch_size": patch, "tokens": tokens, "pool": side // per_side}
    return cfg, geometry


def gemma3_vision_tensors(tensors: dict) -> dict:
    """The checkpoint's vision tower and projector tensors under this module's names (PREFIXES), the
    patch embedding as its [hidden, 3 p^2] matrix; a name given twice is refused."""
    return flat_patches(renamed(tensors, PREFIXES), PATCH_WEIGHT)


def projection_width(tensors: dict) -> int:
    """The width of the image embeddings: mm_input_projection_weight's columns ([vision, text])."""
    return tensors[PROJECTION].shape[1]


def build_gemma3_vision(b: GraphBuilder, geometry: dict) -> Graph:
    """One picture's vision tower and projector (b's max_rows: its patches). Inputs: siglip_encoder's.
    Output: image_features [tokens, the text tower's hidden size]."""
    cfg, g = b.cfg, b.g
    hidden, tokens = cfg.hidden_size, geometry["tokens"]
    x = siglip_encoder(b, geometry, VISION)
    pooled = b.act("pooled", hidden, rows=tokens)
    b.g.op(
        "avg_pool",
        {"x": x, "y": pooled},
        {"dim": hidden, "side": geometry["image_size"] // geometry["patch_size"], "kernel": geometry["pool"]}
        | {"tokens": tokens},
        lambda rows: (-(-hidden // 256), tokens, 1),
    )
    normed = b.act("soft_norm", hidden, rows=tokens)
    b.g.op(
        "rmsnorm",
        {"x": pooled, "w": b.vector([SOFT_NORM]), "residual": b.dummy, "y": normed},
        {"dim": hidden, "eps": cfg.rms_norm_eps, "w_offset": geometry.get("soft_norm_offset", 1.0)}
        | {"last_row_only": 0, "add_residual": 0}
        | {"pad0": 0, "pad1": 0, "pad2": 0},
        lambda rows: (tokens, 1, 1),
    )
    shape = b.shape(PROJECTION)
    if len(shape) != 2 or shape[0] != hidden:
        raise ModelFileError(
            b.tensor_info(PROJECTION).path, f"tensor {PROJECTION!r} has shape {list(shape)}, not [{hidden}, N]"
        )
    text_hidden = shape[1]
    y = g.outputs["image_features"] = g.tensor("image_features", tokens * text_hidden * 4, "output")
    shards, _, _ = b.matrix([PROJECTION])
    if len(shards) != 1:
        raise ModelFileError(b.tensor_info(PROJECTION).path, f"tensor {PROJECTION!r} is larger than one binding")
    shard, _, _ = shards[0]
    b.g.op(
        "matmul_kn",
        {"x": normed, "w": shard, "y": y},
        {"k": hidden, "n": text_hidden, "rows": tokens, "pad0": 0},
        lambda rows: (-(-text_hidden // 256), -(-tokens // 4), 1),
        weight_defines(text_hidden, shard.dtype),
    )
    return g
