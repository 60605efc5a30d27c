"""Load what a chat or generation needs: the engine, the tokenizer (if any) and the stop ids."""

from __future__ import annotations

from .engine import Engine
from .formats.model_files import read_model
from .formats.source import open_source
from .json_file import read_json


async def load_model(model, device, *, with_tokenizer: bool = True, **engine_options):
    """(engine, tokenizer or None, stop ids): Engine.load's engine, with what generation needs
    besides. model: a GGUF file (tokenizer and chat template from its metadata), an HF model
    directory, or a ModelSource (the browser's). engine_options: Engine.load's (context, progress,
    packed_kv, gpu_budget, …)."""
    source = open_source(model)
    read = read_model(source)
    engine = await Engine.load(source, device, read=read, **engine_options)
    cfg, _, gguf = read
    stop_ids = set(cfg.eos_token_ids)
    tok = None
    if gguf is not None:
        if with_tokenizer:
            from .formats.gguf_tokenizer import tokenizer_from_gguf

            tok = tokenizer_from_gguf(gguf)
            stop_ids = set(tok.eos_ids)  # llama.cpp's end-of-generation set, exactly
        return engine, tok, stop_ids
    small = source.small_dir()
    if source.exists("generation_config.json"):
        eos = read_json(small / "generation_config.json").get("eos_token_id")
        stop_ids.update(eos if isinstance(eos, list) else [eos] if eos is not None else [])
    if with_tokenizer:
        from .tokenizer import Tokenizer

        tok = Tokenizer.from_model_dir(small)
        stop_ids.update(tok.eos_ids)
    return engine, tok, stop_ids
