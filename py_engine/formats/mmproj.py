"""llama.cpp's vision projector files (`mmproj-*.gguf`, general.architecture `clip`): the picture side of a
model whose text side is another GGUF (Qwen3.5's, projector `qwen3vl_merger`: formats/mmproj_qwen.py).
Read for SmolVLM / Idefics3 (clip.projector_type `idefics3`) into what
an HF SmolVLM folder gives: models/siglip.py's (ModelConfig, geometry), its tensors under HF names, and the
processor's settings (vision/smolvlm.py SmolVLMSettings).

Metadata (the keys llama.cpp's tools/mtmd/clip.cpp load_hparams reads) -> config.json's:

    clip.vision.embedding_length              vision_config.hidden_size
    clip.vision.attention.head_count          vision_config.num_attention_heads (head_count_kv and
                                              head_dim, where given, must be what SigLIP's are)
    clip.vision.feed_forward_length           vision_config.intermediate_size
    clip.vision.block_count                   vision_config.num_hidden_layers
    clip.vision.attention.layer_norm_epsilon  vision_config.layer_norm_eps
    clip.vision.image_size, patch_size        vision_config.image_size, patch_size
    clip.vision.projector.scale_factor        scale_factor (absent: 1, llama.cpp's default)
    clip.use_gelu                             hidden_act gelu_pytorch_tanh (ggml's GELU is the tanh form;
                                              without it llama.cpp runs quick-GELU, not SigLIP's: refused)
    clip.vision.projection_dim                the text tower's hidden size (the projection's rows)

Processor settings (SmolVLMSettings; the HF folder's preprocessor_config.json / processor_config.json):

    tile (max_image_size)                     clip.vision.image_size (llama.cpp's tiles are the tower's input)
    longest_edge (size)                       clip.vision.preproc_image_size; files converted before llama.cpp
                                              wrote it: 4 tiles, the ratio of every SmolVLM processor
    image_mean, image_std                     clip.vision.image_mean, image_std
    image_seq_len                             (image_size / patch_size / scale_factor)^2, what the tower makes of
                                              a tile (llama.cpp counts it so; the HF path checks the file by it)
    resample; the flags; rescale_factor       not stored: LANCZOS, resize, split, RGB, rescale by 1/255 and
                                              normalize, which llama.cpp always does for idefics3 and SmolVLM's
                                              processor files say
    the picture tokens' strings               not stored: SmolVLMProcessor's defaults (vision/smolvlm.py
                                              DEFAULT_TOKENS, and <row_R_col_C>), which llama.cpp's mtmd looks
                                              up by the same names; vision/input.py finds them in the text GGUF

A picture then goes through transformers' processor steps (vision/smolvlm.py), as an HF folder's does.

Tensors (GGUF dims are reversed on reading, so every shape here is HF's: [rows, columns], the patch
embedding's Conv2d [hidden, 3, p, p]):

    v.patch_embd.weight / .bias           model.vision_model.embeddings.patch_embedding.*
    v.position_embd.weight                model.vision_model.embeddings.position_embedding.weight
    v.blk.N.ln1 / ln2                     model.vision_model.encoder.layers.N.layer_norm1 / layer_norm2
    v.blk.N.attn_q / attn_k / attn_v / attn_out   ....self_attn.q_proj / k_proj / v_proj / out_proj
    v.blk.N.ffn_up / ffn_down             ....mlp.fc1 / fc2 (files converted before llama.cpp renamed them hold
                                          them the other way round: told apart by shape, as clip.cpp does)
    v.post_ln                             model.vision_model.post_layernorm
    mm.model.fc.weight                    model.connector.modality_projection.proj.weight

Every one must be there with the shape the metadata gives it, and no other tensor may be (one Wisp did not
read would be a part of the tower it leaves out).

Gemma 3 (clip.projector_type `gemma3`): the same SigLIP tensors under models/gemma3_vision.py's names
(model.vision_tower.*), clip.vision.projector.scale_factor the average pool's kernel (absent: 4, llama.cpp's
default and Gemma 3's 64 patches a side pooled to 16), and the projector's

    mm.soft_emb_norm.weight               model.multi_modal_projector.mm_soft_emb_norm.weight, with the 1 of
                                          Gemma's (1 + w) added by the converter
    mm.input_projection.weight            model.multi_modal_projector.mm_input_projection_weight, [vision
                                          hidden, text hidden] as HF's (the converter keeps it f16)

The processor's settings (vision/gemma3.py Gemma3Settings): the square clip.vision.image_size, its
mean and std, BILINEAR, convert to RGB, rescale by 1/255 and normalize, as Gemma 3's processor files say;
its picture tokens are Gemma 3's (<start_of_image>, <image_soft_token>, <end_of_image>), which llama.cpp's
mtmd writes too.
"""

from __future__ import annotations

from ..errors import ModelFileError
from ..models import gemma3_vision
from ..models.attention_grid import FEW_ROWS
from ..models.config import ModelConfig
from ..models.siglip import PROJECTION, VISION, flat_patches, vision_tensors
from ..vision.gemma3 import Gemma3Settings
from ..vision.qwen3_5 import Qwen35Settings
from ..vision.smolvlm import SmolVLMSettings
from .gguf import GGUFFile, parse_gguf
from .gguf_values import MAX_LAYERS, Metadata, is_number
from .mmproj_qwen import qwen_mmproj_config, qwen_mmproj_settings, qwen_mmproj_tensors

# clip.projector_type values Wisp reads: SmolVLM / Idefics3, Gemma 3, Qwen3.5 (formats/mmproj_qwen.py)
PROJECTORS = ("idefics3", "gemma3", "qwen3vl_merger")
KINDS = {
    "idefics3": "smolvlm",
    "gemma3": "gemma3",
    "qwen3vl_merger": "qwen3_5",
}  # the geometry kind (vision/encoder.py)
DEFAULT_SCALE = {"idefics3": 1, "gemma3": 4}  # clip.vision.projector.scale_factor where absent (llama.cpp's)
V = "clip.vision."
# SmolVLM's processors resize a picture's longest side to 4 tiles (SmolVLM-256M: 2048 / 512; transformers'
# SmolVLMImageProcessor defaults: 4 x 364 / 364): the first resize where a file does not say it.
TILES_LONGEST_EDGE = 4

NORMS = {"ln1": "layer_norm1", "ln2": "layer_norm2"}  # v.blk.N.<part> -> encoder.layers.N.<HF part>
ATTENTION = {
    "attn_q": "self_attn.q_proj",
    "attn_k": "self_attn.k_proj",
    "attn_v": "self_attn.v_proj",
    "attn_out": "self_attn.out_proj",
}


def read_mmproj(source) -> GGUFFile:
    """The header of a ModelSource holding one mmproj GGUF, checked to be llama.cpp's clip file with a vision
    tower and a projector Wisp reads."""
    name = source.files()[0]
    path = source.locate(name)
    gguf = parse_gguf(lambda start, length: source.read(name, start, length), source.size(name), path)
    meta = Metadata(gguf.metadata, path)
    arch = meta.string("general.architecture")
    if arch != "clip":
        raise ModelFileError(path, f"general.architecture is {arch!r:.40}: not a vision projector (mmproj) file")
    if not meta.flag("clip.has_vision_encoder", False):
        raise ModelFileError(path, "clip.has_vision_encoder is not true: this projector has no vision tower")
    key = "clip.projector_type" if meta.has("clip.projector_type") else V + "projector_type"
    projector = meta.string(key)
    if projector not in PROJECTORS:
        raise ModelFileError(
            path,
            f"projector type {projector!r:.40} is not supported "
            f"(Wisp reads {', '.join(PROJECTORS)}: SmolVLM, Gemma 3, Qwen3.5)",
        )
    return gguf


def projector_type(gguf: GGUFFile) -> str:
    meta = Metadata(gguf.metadata, gguf.path)
    return meta.string("clip.projector_type" if meta.has("clip.projector_type") else V + "projector_type")


def mmproj_config(gguf: GGUFFile) -> tuple[ModelConfig, dict]:
    """The vision tower's ModelConfig and geometry {kind, image_size, patch_size, scale_factor, tokens}, as
    models/siglip.py's vision_config makes them from config.json (Qwen3.5's: formats/mmproj_qwen.py)."""
    if projector_type(gguf) == "qwen3vl_merger":
        return qwen_mmproj_config(gguf)
    meta, path = Metadata(gguf.metadata, gguf.path), gguf.path
    hidden = meta.integer(V + "embedding_length", minimum=1)
    heads = meta.integer(V + "attention.head_count", minimum=1)
    if hidden % heads:
        meta.fail(V + "attention.head_count", f"is {heads}: embedding_length {hidden} is not a multiple of it")
    for key, value in (("attention.head_count_kv", heads), ("attention.head_dim", hidden // heads)):
        if meta.integer(V + key, value) != value:  # SigLIP's attention: no GQA, hidden / heads wide heads
            meta.fail(V + key, f"is {meta.meta[V + key]}, not {value}: not SmolVLM's vision tower")
    if meta.flag("clip.use_silu", False) or not meta.flag("clip.use_gelu", False):
        raise ModelFileError(path, "clip.use_gelu is not true: SmolVLM's vision tower uses GELU (tanh)")
    image, patch = meta.integer(V + "image_size", minimum=1), meta.integer(V + "patch_size", minimum=1)
    projector = projector_type(gguf)
    scale = meta.integer(V + "projector.scale_factor", DEFAULT_SCALE[projector], minimum=1)
    if image % patch or (image // patch) % scale:
        raise ModelFileError(
            path,
            f"{V}image_size {image} must be a multiple of patch_size {patch}, and their ratio of scale_factor {scale}",
        )
    side = image // patch
    cfg = ModelConfig(
        architecture="SiglipVisionModel",
        vocab_size=0,
        hidden_size=hidden,
        intermediate_size=meta.integer(V + "feed_forward_length", minimum=1),
        num_layers=meta.integer(V + "block_count", minimum=1, maximum=MAX_LAYERS),
        num_heads=heads,
        num_kv_heads=heads,
        head_dim=hidden // heads,
        rms_norm_eps=meta.number(V + "attention.layer_norm_epsilon", positive=True),
        rope_theta=10000.0,  # unused: no rotary positions
        max_position=side * side,
        hidden_act="gelu_pytorch_tanh",
    )
    tokens = (side // scale) ** 2
    geometry = {"kind": KINDS[projector], "image_size": image, "patch_size": patch, "tokens": tokens}
    if projector == "gemma3":
        if tokens <= FEW_ROWS:  # as gemma3_vision_config: a picture's tokens attend as a prompt's
            meta.fail(
                V + "projector.scale_factor", f"is {scale}: {tokens} tokens a picture, Wisp needs more than {FEW_ROWS}"
            )
        return cfg, {**geometry, "pool": scale, "soft_norm_offset": 0.0}  # the converter added the 1
    return cfg, {**geometry, "scale_factor": scale}


def mmproj_tensors(gguf: GGUFFile, cfg: ModelConfig, geometry: dict) -> dict:
    """The tower's and connector's tensors under the HF names models/siglip.py reads (vision_tensors'
    layout: the patch embedding as its [hidden, 3 p^2] matrix), each checked against the metadata."""
    if geometry["kind"] == "qwen3_5":
        return qwen_mmproj_tensors(gguf, cfg, geometry)
    meta = Metadata(gguf.metadata, gguf.path)
    hidden, ff, p = cfg.hidden_size, cfg.intermediate_size, geometry["patch_size"]
    side = geometry["image_size"] // p
    text_width = meta.integer(V + "projection_dim", minimum=1)
    expected = {  # GGUF name -> (HF name, shape)
        "v.patch_embd.weight": ("embeddings.patch_embedding.weight", (hidden, 3, p, p)),
        "v.patch_embd.bias": ("embeddings.patch_embedding.bias", (hidden,)),
        "v.position_embd.weight": ("embeddings.position_embedding.weight", (side * side, hidden)),
        "v.post_ln.weight": ("post_layernorm.weight", (hidden,)),
        "v.post_ln.bias": ("post_layernorm.bias", (hidden,)),
    }
    for i in range(cfg.num_layers):
        fc1, fc2 = _ffn_names(gguf, i, hidden, ff)
        parts = {part: (hf, (hidden,)) for part, hf in NORMS.items()}
        parts |= {part: (hf, (hidden, hidden)) for part, hf in ATTENTION.items()}
        parts |= {fc1: ("mlp.fc1", (ff, hidden)), fc2: ("mlp.fc2", (hidden, ff))}
        for part, (hf, shape) in parts.items():
            expected[f"v.blk.{i}.{part}.weight"] = (f"encoder.layers.{i}.{hf}.weight", shape)
            expected[f"v.blk.{i}.{part}.bias"] = (f"encoder.layers.{i}.{hf}.bias", shape[:1])
    gemma3 = geometry["kind"] == "gemma3"
    prefix = gemma3_vision.VISION if gemma3 else VISION
    expected = {name: (prefix + hf_name, shape) for name, (hf_name, shape) in expected.items()}
    if gemma3:
        expected["mm.soft_emb_norm.weight"] = (gemma3_vision.SOFT_NORM, (hidden,))
        expected["mm.input_projection.weight"] = (gemma3_vision.PROJECTION, (hidden, text_width))
    else:
        s = geometry["scale_factor"]
        expected["mm.model.fc.weight"] = (PROJECTION, (text_width, hidden * s * s))
    out = {}
    for name, (hf_name, shape) in expected.items():
        info = gguf.tensors.get(name)
        if info is None:
            raise ModelFileError(gguf.path, f"missing tensor {name!r}")
        if tuple(info.shape) != shape:
            raise ModelFileError(
                gguf.path,
                f"tensor {name!r} has shape {list(info.shape)}, but the metadata makes it {list(shape)} "
                f"({V}embedding_length, projection_dim, image_size, patch_size, scale_factor)",
            )
        out[hf_name] = info
    unread = sorted(set(gguf.tensors) - set(expected))
    if unread:
        raise ModelFileError(gguf.path, f"tensor {unread[0]!r} is not part of the vision tower Wisp reads")
    return flat_patches(out, gemma3_vision.PATCH_WEIGHT) if gemma3 else vision_tensors(out)


def _ffn_names(gguf: GGUFFile, layer: int, hidden: int, ff: int) -> tuple[str, str]:
    """The GGUF parts holding fc1 and fc2: ffn_up and ffn_down, or the other way round in files converted
    before llama.cpp renamed them (clip.cpp's is_ffn_swapped: ffn_down is then fc1's [ff, hidden]). Square
    ones (ff == hidden) cannot be told apart: they are taken as named."""
    down = gguf.tensors.get(f"v.blk.{layer}.ffn_down.weight")
    swapped = ff != hidden and down is not None and tuple(down.shape) == (ff, hidden)
    return ("ffn_down", "ffn_up") if swapped else ("ffn_up", "ffn_down")


def mmproj_settings(gguf: GGUFFile, geometry: dict) -> SmolVLMSettings | Gemma3Settings | Qwen35Settings:
    """The processor's settings, from the file where it holds them (the module docstring's table)."""
    if geometry["kind"] == "qwen3_5":
        return qwen_mmproj_settings(gguf, geometry)
    meta = Metadata(gguf.metadata, gguf.path)
    tile = geometry["image_size"]
    if geometry["kind"] == "gemma3":
        mean, std = _triple(meta, V + "image_mean"), _triple(meta, V + "image_std")
        if 0.0 in std:
            meta.fail(V + "image_std", f"is {list(std)}: a zero would divide by zero")
        return Gemma3Settings(tile, geometry["tokens"], image_mean=mean, image_std=std)
    longest = meta.integer(V + "preproc_image_size", TILES_LONGEST_EDGE * tile, minimum=1)
    side = tile // geometry["patch_size"] // geometry["scale_factor"]
    mean, std = _triple(meta, V + "image_mean"), _triple(meta, V + "image_std")
    if 0.0 in std:
        meta.fail(V + "image_std", f"is {list(std)}: a zero would divide by zero")
    return SmolVLMSettings(longest, tile, side * side, resample="lanczos", image_mean=mean, image_std=std)


def _triple(meta: Metadata, key: str) -> tuple[float, float, float]:
    values = meta.array(key, is_number, length=3, what="3 numbers")
    return tuple(meta.check_number(key, v) for v in values)
