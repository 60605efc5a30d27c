"""llama.cpp's vision projector file for Qwen3.5 (clip.projector_type `qwen3vl_merger`, what its converter's
Qwen3VLVisionModel writes for Qwen3_5ForConditionalGeneration), read into what an HF Qwen3.5 folder gives:
models/qwen3_5_vision.py's (ModelConfig, geometry), its tensors under HF names, and the processor's settings
(vision/qwen3_5.py Qwen35Settings). formats/mmproj.py dispatches here by projector type.

Metadata -> config.json's vision_config:

    clip.vision.embedding_length              hidden_size
    clip.vision.attention.head_count          num_heads
    clip.vision.feed_forward_length           intermediate_size
    clip.vision.block_count                   depth
    clip.vision.patch_size                    patch_size
    clip.vision.image_size                    sqrt(num_position_embeddings) x patch_size (the converter's)
    clip.vision.spatial_merge_size            spatial_merge_size (absent: 2, llama.cpp's)
    clip.vision.attention.layer_norm_epsilon  the LayerNorms' eps (the converter writes the text tower's
                                              rms_norm_eps; transformers' is 1e-6 whatever it is)
    clip.vision.projection_dim                out_hidden_size (the text tower's hidden size)
    clip.use_gelu                             hidden_act gelu_pytorch_tanh (llama.cpp's GELU is the tanh form)
    clip.vision.is_deepstack_layers           all false: Qwen3-VL's deepstack features are refused
    not stored                                temporal_patch_size 2 (the converter takes no other), the 2D
                                              RoPE's theta 1e4 (llama.cpp's)

Tensors (GGUF dims reversed on reading: HF's shapes):

    v.patch_embd.weight, .weight.1        the Conv3d patch embedding's two frames, each [hidden, 3, p, p]: a
                                          still picture's frames are equal, so the patch rows hold one frame
                                          and both matrices read it (geometry frames 1)
    v.patch_embd.bias                     patch_embed.proj.bias
    v.position_embd.weight                pos_embed.weight
    v.blk.N.ln1 / ln2                     blocks.N.norm1 / norm2
    v.blk.N.attn_qkv / attn_out           blocks.N.attn.qkv / attn.proj
    v.blk.N.ffn_up / ffn_down             blocks.N.mlp.linear_fc1 / linear_fc2
    v.post_ln                             merger.norm
    mm.0 / mm.2                           merger.linear_fc1 / linear_fc2

Every one must be there with the shape the metadata gives it, and no other tensor may be.

The processor's settings: llama.cpp's (clip.cpp for Qwen-VL projectors: 8 to 4096 tokens a picture, each
merge x merge patches; BICUBIC), the file's mean and std, the rest as Qwen's preprocessor files say (RGB,
rescale by 1/255, normalize); the pixels then go through transformers' smart_resize and Pillow's resize, as
an HF folder's do, with those bounds (and the tower's 4096 patches).
"""

from __future__ import annotations

from dataclasses import replace

from ..errors import ModelFileError
from ..models.config import ModelConfig
from ..models.qwen3_5_vision import PATCH_WEIGHT, VISION, expected_shapes, qwen3_5_vision_config
from ..vision.qwen3_5 import Qwen35Settings
from .gguf import GGUFFile
from .gguf_values import MAX_LAYERS, Metadata, is_number

V = "clip.vision."
MIN_TOKENS, MAX_TOKENS = 8, 4096  # llama.cpp's bounds on a Qwen-VL picture's tokens (clip.cpp)
LLAMA_CPP_THETA = 10000.0
PARTS = {  # v.blk.N.<part> -> blocks.N.<HF part>
    "ln1": "norm1",
    "ln2": "norm2",
    "attn_qkv": "attn.qkv",
    "attn_out": "attn.proj",
    "ffn_up": "mlp.linear_fc1",
    "ffn_down": "mlp.linear_fc2",
}


def qwen_mmproj_config(gguf: GGUFFile) -> tuple[ModelConfig, dict]:
    """The tower's ModelConfig and geometry, as models/qwen3_5_vision.py makes them from config.json."""
    meta, path = Metadata(gguf.metadata, gguf.path), gguf.path
    if meta.flag("clip.use_silu", False) or not meta.flag("clip.use_gelu", False):
        raise ModelFileError(path, "clip.use_gelu is not true: Qwen3.5's vision tower uses GELU (tanh)")
    layers = meta.integer(V + "block_count", minimum=1, maximum=MAX_LAYERS)
    deepstack = meta.array(V + "is_deepstack_layers", None, [False] * layers, types=(bool,), what="flags")
    if any(deepstack):
        meta.fail(
            V + "is_deepstack_layers", "marks deepstack layers (Qwen3-VL's): Wisp runs Qwen3.5's tower, which has none"
        )
    patch, image = meta.integer(V + "patch_size", minimum=1), meta.integer(V + "image_size", minimum=1)
    if image % patch:
        meta.fail(V + "image_size", f"is {image}: not a multiple of patch_size {patch} (a square table of positions)")
    vision = {
        "depth": layers,
        "hidden_size": meta.integer(V + "embedding_length", minimum=1),
        "num_heads": meta.integer(V + "attention.head_count", minimum=1),
        "intermediate_size": meta.integer(V + "feed_forward_length", minimum=1),
        "out_hidden_size": meta.integer(V + "projection_dim", minimum=1),
        "patch_size": patch,
        "spatial_merge_size": meta.integer(V + "spatial_merge_size", 2, minimum=1),
        "num_position_embeddings": (image // patch) ** 2,
        "hidden_act": "gelu_pytorch_tanh",
        "rope_parameters": {"rope_type": "axial", "rope_theta": LLAMA_CPP_THETA},
    }
    cfg, geometry = qwen3_5_vision_config({"vision_config": vision}, path)
    cfg.rms_norm_eps = meta.number(V + "attention.layer_norm_epsilon", 1e-6, positive=True)
    return cfg, {**geometry, "frames": 1}


def qwen_mmproj_tensors(gguf: GGUFFile, cfg: ModelConfig, geometry: dict) -> dict:
    """The tower's tensors under the HF names models/qwen3_5_vision.py reads (the patch embedding's frames as
    [hidden, 3 p^2] matrices), each checked against the metadata."""
    shapes = expected_shapes(cfg, geometry)  # HF name -> shape, the patch matrices already [hidden, 3 p^2]
    h, p = cfg.hidden_size, geometry["patch_size"]
    names = {"v.patch_embd.weight": PATCH_WEIGHT, "v.patch_embd.weight.1": PATCH_WEIGHT + ".1"}
    names |= {
        "v.patch_embd.bias": VISION + "patch_embed.proj.bias",
        "v.position_embd.weight": VISION + "pos_embed.weight",
    }
    for i in range(cfg.num_layers):
        for part, hf in PARTS.items():
            for kind in ("weight", "bias"):
                names[f"v.blk.{i}.{part}.{kind}"] = f"{VISION}blocks.{i}.{hf}.{kind}"
    for gguf_name, hf in (("v.post_ln", "merger.norm"), ("mm.0", "merger.linear_fc1"), ("mm.2", "merger.linear_fc2")):
        for kind in ("weight", "bias"):
            names[f"{gguf_name}.{kind}"] = f"{VISION}{hf}.{kind}"
    out = {}
    for name, hf_name in names.items():
        info = gguf.tensors.get(name)
        if info is None:
            raise ModelFileError(gguf.path, f"missing tensor {name!r}")
        shape = (h, 3, p, p) if hf_name.startswith(PATCH_WEIGHT) else shapes[hf_name]
        if tuple(info.shape) != shape:
            raise ModelFileError(
                gguf.path,
                f"tensor {name!r} has shape {list(info.shape)}, but the metadata makes it {list(shape)} "
                f"({V}embedding_length, feed_forward_length, projection_dim, image_size, patch_size)",
            )
        out[hf_name] = info
    unread = sorted(set(gguf.tensors) - set(names))
    if unread:
        raise ModelFileError(gguf.path, f"tensor {unread[0]!r} is not part of the vision tower Wisp reads")
    for name in (PATCH_WEIGHT, PATCH_WEIGHT + ".1"):  # each frame's Conv2d as the matrix it is in memory
        out[name] = replace(out[name], shape=(h, 3 * p * p))
    return out


def qwen_mmproj_settings(gguf: GGUFFile, geometry: dict) -> Qwen35Settings:
    """The processor's settings (the module docstring's): llama.cpp's bounds, the file's mean and std."""
    meta = Metadata(gguf.metadata, gguf.path)
    mean, std = (_triple(meta, V + key) for key in ("image_mean", "image_std"))
    if 0.0 in std:
        meta.fail(V + "image_std", f"is {list(std)}: a zero would divide by zero")
    token = (geometry["patch_size"] * geometry["merge"]) ** 2
    most = geometry["max_patches"] * geometry["patch_size"] ** 2
    return Qwen35Settings(
        min(MIN_TOKENS * token, most),
        min(MAX_TOKENS * token, most),
        geometry["patch_size"],
        geometry["temporal"],
        geometry["merge"],
        image_mean=mean,
        image_std=std,
    )


def _triple(meta: Metadata, key: str) -> tuple[float, float, float]:
    values = meta.array(key, is_number, length=3, what="3 numbers")
    return tuple(meta.check_number(key, v) for v in values)
