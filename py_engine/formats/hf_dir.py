"""A HuggingFace model directory: config.json plus one or many *.safetensors files, read through a
model source (formats/source.py): small files from its small_dir, safetensors headers by range."""

from __future__ import annotations

from ..errors import ModelFileError
from .json_file import read_json
from .safetensors import TensorInfo, parse_header

INDEX_FILE = "model.safetensors.index.json"
# The files of an HF directory the engine reads besides the weights (here and tokenizer/hf/files.py):
# the server offers them with a model, the browser fetches them whole.
SMALL_FILES = (
    "config.json",
    "generation_config.json",
    "tokenizer.json",
    "tokenizer_config.json",
    "chat_template.jinja",
    INDEX_FILE,
    # sentence-transformers' description of an embedding model (embedding/settings.py: its pooling, prompts)
    "modules.json",
    "sentence_bert_config.json",
    "1_Pooling/config.json",
    "config_sentence_transformers.json",
    # a vision-language model's image processor (vision/smolvlm.py reads both)
    "preprocessor_config.json",
    "processor_config.json",
)


def read_tensor_index(source) -> dict[str, TensorInfo]:
    """All tensors of the model: from model.safetensors.index.json when sharded, else every *.safetensors."""
    index_path = source.small_dir() / INDEX_FILE
    if source.exists(INDEX_FILE):
        weight_map = read_json(index_path).get("weight_map")
        if not isinstance(weight_map, dict):
            raise ModelFileError(index_path, "no weight_map object")
        bad = [name for name in weight_map.values() if not isinstance(name, str) or not name.endswith(".safetensors")]
        if bad:
            raise ModelFileError(index_path, f"weight_map names {bad[0]!r}, not a *.safetensors file")
        files = sorted(set(weight_map.values()))
    else:
        files = [name for name in source.files() if name.endswith(".safetensors")]
        if not files:
            raise ModelFileError(source.label, "no *.safetensors weights in the model directory")
    tensors = {}
    for name in files:
        tensors.update(
            parse_header(
                lambda start, length, name=name: source.read(name, start, length),
                source.size(name),
                source.locate(name),
            )
        )
    if source.exists(INDEX_FILE):
        missing = sorted(set(weight_map) - set(tensors))
        if missing:
            raise ModelFileError(index_path, f"lists tensors that no shard contains: {missing[:3]}")
    return tensors
