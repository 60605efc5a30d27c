"""A model's files read into what the engine plans from: its ModelConfig and its tensors under HF
names (GGUF header, HF config.json + safetensors, MLX quantization, multimodal text towers)."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..errors import ModelFileError
from ..models import graph_generator
from ..models.config import TEXT_TOWERS, architecture_of, config_from_hf
from ..models.config_check import check_config
from ..models.tensor_check import check_tensors
from .gguf import parse_gguf
from .gguf_model import config_from_gguf, hf_tensors, longrope_scaling, proportional_rope
from .hf_dir import read_tensor_index
from .json_file import read_json
from .mlx import mlx_tensors
from .source import ModelSource


@dataclass
class ModelFiles:
    """A model's files, read and checked (session.read_model_files): what loading needs besides a
    device."""

    source: ModelSource
    read: tuple  # read_model's (config, tensors by HF name, parsed GGUF or None)
    tokenizer: object | None = None
    stop_ids: set = field(default_factory=set)
    # Where its picture side is read from, checked (vision/input.py check_vision): an HF SmolVLM folder
    # itself, or llama.cpp's mmproj GGUF given beside it; None for a model without one (or read
    # without its tokenizer, which pictures need).
    vision: ModelSource | None = None

    @property
    def cfg(self):
        return self.read[0]


def read_model(source):
    """(config, tensors by HF name, the parsed GGUF or None) of a model source. Whatever the
    format, the config passes check_config and the tensors the graphs read check_tensors here:
    nothing past this sees an unchecked value."""
    if source.kind == "gguf":
        name = source.files()[0]
        path = source.locate(name)
        gguf = parse_gguf(lambda start, length: source.read(name, start, length), source.size(name), path)
        cfg = config_from_gguf(gguf)  # with the RoPE layout

        def read(start, length):
            return source.read(name, start, length)

        # Phi-3's LongRoPE factors and Gemma 4's proportional RoPE are tensors.
        rope = longrope_scaling(gguf, read) or proportional_rope(gguf, cfg, read)
        if rope is not None:
            cfg.rope_scaling = rope
        graph_generator(cfg.architecture, path)  # UnsupportedArchitectureError unless one of ours
        check_config(cfg, path)
        tensors = hf_tensors(gguf)
        check_tensors(cfg, tensors, path)
        return cfg, tensors, gguf
    config_path = source.small_dir() / "config.json"
    raw = read_json(config_path)
    cfg = config_from_hf(raw, config_path)
    graph_generator(cfg.architecture, config_path, encoders=True)  # session.py refuses to generate with an encoder
    check_config(cfg, config_path)
    tensors = read_tensor_index(source)
    if raw.get("quantization"):  # MLX; a non-object is refused there
        tensors = mlx_tensors(tensors, raw["quantization"], config_path)
    if architecture_of(raw, config_path) in TEXT_TOWERS:
        tensors = text_tower(tensors)
    check_tensors(cfg, tensors, config_path)
    return cfg, tensors, None


# Where multimodal checkpoints keep their text tower's weights (transformers 5, then older files).
TEXT_TOWER_PREFIXES = ("model.language_model.", "language_model.model.", "model.text_model.")


def text_tower(tensors: dict) -> dict:
    """A multimodal checkpoint's text-tower tensors under the causal LM's names (the vision
    tower's are left out): model.language_model.X / language_model.model.X / (SmolVLM)
    model.text_model.X -> model.X."""
    out = {}
    for name, info in tensors.items():
        for prefix in TEXT_TOWER_PREFIXES:
            if name.startswith(prefix):
                out["model." + name[len(prefix) :]] = info
        if name in ("lm_head.weight", "language_model.lm_head.weight"):
            out["lm_head.weight"] = info
    return out


def tensor_info(tensors, name, path):
    if name not in tensors:
        raise ModelFileError(path, f"missing tensor {name!r}")
    return tensors[name]
