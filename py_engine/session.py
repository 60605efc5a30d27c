"""Load what a chat or generation needs: the engine, the tokenizer (if any) and the stop ids.

Loading is two steps: read_model_files reads and checks everything a model's files say (config,
tensor index, tokenizer, stop ids) and plans its graph once, with no device; load_model then
uploads to a device. The CLI reads first, so a malformed model is reported before a GPU driver
is opened (and has its say on stderr)."""

from __future__ import annotations

from dataclasses import dataclass, field

from .engine import PREFILL_ROWS, Engine
from .formats.model_files import read_model, tensor_info
from .formats.source import ModelSource, open_source
from .json_file import read_json
from .kv_cache import ring_slack
from .models import graph_generator
from .models.builder import GraphBuilder
from .models.config_check import FieldCheck


@dataclass
class ModelFiles:
    """A model's files, read and checked: what loading needs besides a device."""

    source: ModelSource
    read: tuple  # read_model's (config, tensors by HF name, parsed GGUF or None)
    tokenizer: object | None = None
    stop_ids: set = field(default_factory=set)

    @property
    def cfg(self):
        return self.read[0]


def read_model_files(model, *, with_tokenizer: bool = True) -> ModelFiles:
    """model: a GGUF file (tokenizer and chat template from its metadata), an HF model directory,
    or a ModelSource (the browser's). Raises WispError for anything malformed."""
    source = open_source(model)
    read = read_model(source)
    cfg, tensors, gguf = read
    plan_without_device(cfg, tensors, source.label)
    files = ModelFiles(source, read, stop_ids=set(cfg.eos_token_ids))
    if gguf is not None:
        if with_tokenizer:
            from .formats.gguf_tokenizer import tokenizer_from_gguf

            files.tokenizer = tokenizer_from_gguf(gguf)
            files.stop_ids = set(files.tokenizer.eos_ids)  # llama.cpp's end-of-generation set, exactly
        return files
    small = source.small_dir()
    if source.exists("generation_config.json"):
        path = small / "generation_config.json"
        eos = read_json(path).get("eos_token_id")
        ids = eos if isinstance(eos, list) else [] if eos is None else [eos]
        check = FieldCheck(path)
        files.stop_ids.update(check.count("eos_token_id", i, low=0, high=cfg.vocab_size - 1) for i in ids)
    if with_tokenizer:
        from .tokenizer import Tokenizer

        files.tokenizer = Tokenizer.from_model_dir(small)
        files.stop_ids.update(files.tokenizer.eos_ids)
    return files


def plan_without_device(cfg, tensors: dict, label: str, max_rows: int = PREFILL_ROWS) -> None:
    """Plan the model's graph once as Engine.load will (the device only changes which formats
    weights are read in and how they are split): every tensor the architecture reads is present
    and in a dtype some kernel reads, or a ModelFileError says which is not."""
    builder = GraphBuilder(
        cfg,
        lambda name: tensor_info(tensors, name, label),
        max_rows,
        min(cfg.max_position, 2048),
        False,
        ("f32", "f32"),
        1 << 27,  # WebGPU's default largest storage binding
        ring_slack(max_rows),
    )
    graph_generator(cfg.architecture, label)(builder)


async def load_model(model, device, *, with_tokenizer: bool = True, **engine_options):
    """(engine, tokenizer or None, stop ids): Engine.load's engine, with what generation needs
    besides. model: what read_model_files takes, or its ModelFiles. engine_options: Engine.load's
    (context, progress, packed_kv, gpu_budget, …)."""
    files = model if isinstance(model, ModelFiles) else read_model_files(model, with_tokenizer=with_tokenizer)
    engine = await Engine.load(files.source, device, read=files.read, **engine_options)
    return engine, files.tokenizer, files.stop_ids
