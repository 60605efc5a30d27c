"""Load what a chat or generation needs: the engine, the tokenizer (if any) and the stop ids."""
from __future__ import annotations

from pathlib import Path

from .engine import Engine
from .errors import ModelFileError
from .formats.hf_dir import read_json


async def load_model(path: Path, device, context: int = 2048, with_tokenizer: bool = True, progress=None):
    """A GGUF file (tokenizer and chat template from its metadata) or an HF model directory.
    progress: called with (bytes uploaded, bytes expected) while weights reach the GPU."""
    path = Path(path)
    if not path.exists():
        raise ModelFileError(path, "model path not found")
    engine = await Engine.load(path, device, context=context, progress=progress)
    stop_ids = set(engine.cfg.eos_token_ids)
    tok = None
    if path.suffix == ".gguf":
        if with_tokenizer:
            from .formats.gguf import read_gguf
            from .formats.gguf_tokenizer import tokenizer_from_gguf

            tok = tokenizer_from_gguf(read_gguf(path))
            stop_ids.update(tok.eos_ids)
        return engine, tok, stop_ids
    gen_config = path / "generation_config.json"
    if gen_config.exists():
        eos = read_json(gen_config).get("eos_token_id")
        stop_ids.update(eos if isinstance(eos, list) else [eos] if eos is not None else [])
    if with_tokenizer or (path / "tokenizer.json").exists():
        from .tokenizer import Tokenizer

        tok = Tokenizer.from_model_dir(path)
        stop_ids.update(tok.eos_ids)
    return engine, tok, stop_ids
