"""A HuggingFace model directory: config.json plus one or many *.safetensors files."""
from __future__ import annotations

import json
from pathlib import Path

from ..errors import ModelFileError
from .safetensors import TensorInfo, read_header


def read_json(path) -> dict:
    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ModelFileError(path, "file not found") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ModelFileError(path, f"malformed JSON ({exc})") from None
    if not isinstance(data, dict):
        raise ModelFileError(path, "expected a JSON object")
    return data


def read_tensor_index(model_dir) -> dict[str, TensorInfo]:
    """All tensors of the model: from model.safetensors.index.json when sharded, else every *.safetensors."""
    model_dir = Path(model_dir)
    index_path = model_dir / "model.safetensors.index.json"
    if index_path.exists():
        weight_map = read_json(index_path).get("weight_map")
        if not isinstance(weight_map, dict):
            raise ModelFileError(index_path, "no weight_map object")
        files = sorted(set(weight_map.values()))
    else:
        files = sorted(p.name for p in model_dir.glob("*.safetensors"))
        if not files:
            raise ModelFileError(model_dir, "no *.safetensors weights in the model directory")
    tensors = {}
    for name in files:
        tensors.update(read_header(model_dir / name))
    if index_path.exists():
        missing = sorted(set(weight_map) - set(tensors))
        if missing:
            raise ModelFileError(index_path, f"lists tensors that no shard contains: {missing[:3]}")
    return tensors
