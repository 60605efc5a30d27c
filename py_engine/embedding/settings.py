"""How a model turns a text into one vector: its pooling, normalisation and longest input, read from
its sentence-transformers files where it has them (modules.json, the Pooling module's
config.json, sentence_bert_config.json), else the architecture's usual choice (an encoder: mean
pooling, as sentence-transformers wraps a plain transformer; a decoder: its last token).

Every file is read through the model source (its small files), so the browser's source works as
the desktop's; a file that says something we cannot do (a Dense layer, max pooling) is a
ModelFileError naming it, never silently another vector."""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import ModelFileError, WispError
from ..formats.json_file import describe, parse_json, read_json

MODULES_FILE = "modules.json"
ST_CONFIG_FILE = "sentence_bert_config.json"
TOKENIZER_CONFIG_FILE = "tokenizer_config.json"
# The files besides config.json and the tokenizer's that an embedding model may carry: the server
# and the browser's model source must offer them with the model (formats/hf_dir.SMALL_FILES).
POOLING_CONFIG = "1_Pooling/config.json"
EMBEDDING_FILES = (MODULES_FILE, ST_CONFIG_FILE, POOLING_CONFIG)

POOLINGS = ("cls", "mean", "lasttoken")
_POOLING_FLAGS = {  # sentence-transformers' Pooling config keys -> our mode (None: not supported)
    "pooling_mode_cls_token": "cls",
    "pooling_mode_mean_tokens": "mean",
    "pooling_mode_lasttoken": "lasttoken",
    "pooling_mode_max_tokens": None,
    "pooling_mode_mean_sqrt_len_tokens": None,
    "pooling_mode_weightedmean_tokens": None,
}
_MODULES_OK = ("Transformer", "Pooling", "Normalize")  # sentence_transformers.models.<name>
DECODER_MAX_TOKENS = 2048  # a decoder's default longest input: its KV cache is sized by it
ENCODER_MAX_TOKENS = 2048  # an encoder's longest input at most: a whole text is one forward's rows


@dataclass(frozen=True)
class EmbedSettings:
    pooling: str  # "cls", "mean" or "lasttoken"
    max_tokens: int  # the longest input, special tokens included; longer ones are truncated
    lowercase: bool = False  # sentence_bert_config.json's do_lower_case: the text is lowercased first


def embed_settings(source, cfg, encoder: bool, pooling: str | None = None, max_tokens: int | None = None):
    """The model's EmbedSettings; `pooling` / `max_tokens` given override what its files say."""
    if pooling is not None and pooling not in POOLINGS:
        raise WispError(f"pooling {pooling!r} is not one of {', '.join(POOLINGS)}")
    small = source.small_dir()
    folder = source.kind == "hf"  # a GGUF file has no sentence-transformers files beside it
    files_pooling = _modules_pooling(source, small) if folder else None
    st = read_json(small / ST_CONFIG_FILE) if folder and source.exists(ST_CONFIG_FILE) else {}
    longest = _positive(st, "max_seq_length", small / ST_CONFIG_FILE)
    if longest is None and folder and source.exists(TOKENIZER_CONFIG_FILE):
        # transformers' "no limit" is a huge sentinel (1e30): only a real length counts.
        longest = _positive(read_json(small / TOKENIZER_CONFIG_FILE), "model_max_length", small / TOKENIZER_CONFIG_FILE)
    limit = min(cfg.max_position, ENCODER_MAX_TOKENS if encoder else DECODER_MAX_TOKENS)
    if max_tokens is not None:
        most = limit if encoder else cfg.max_position
        if not isinstance(max_tokens, int) or isinstance(max_tokens, bool) or not 1 <= max_tokens <= most:
            raise WispError(f"max_tokens must be an integer from 1 to {most}, got {max_tokens!r}")
        limit = max_tokens
    elif longest is not None:
        limit = min(limit, longest)
    lowercase = st.get("do_lower_case", False)
    if not isinstance(lowercase, bool):
        raise ModelFileError(
            small / ST_CONFIG_FILE, f"do_lower_case should be true or false, got {describe(lowercase)}"
        )
    chosen = pooling or files_pooling or ("mean" if encoder else "lasttoken")
    if not encoder and chosen != "lasttoken":  # a decoder runs one text a forward, its last row kept
        raise WispError(f"{source.label}: {chosen} pooling of a decoder is not supported (only lasttoken)")
    return EmbedSettings(chosen, limit, lowercase)


def _positive(config: dict, key: str, path) -> int | None:
    value = config.get(key)
    if value is None or (isinstance(value, (int, float)) and not isinstance(value, bool) and value > 1 << 24):
        return None
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ModelFileError(path, f"{key} should be a positive integer, got {describe(value)}")
    return value


def _modules_pooling(source, small) -> str | None:
    """The pooling modules.json's Pooling module asks for (None: no modules.json). Modules that
    would change the vector otherwise (Dense, ...) are refused."""
    if not source.exists(MODULES_FILE):
        return None
    path = small / MODULES_FILE
    modules = _module_list(path)
    pooling = None
    for module in modules:
        kind = module["type"].rpartition(".")[2]
        if kind not in _MODULES_OK:
            raise ModelFileError(path, f"sentence-transformers module {module['type']!r:.80} is not supported")
        if kind == "Pooling":
            rel = f"{module['path']}/config.json" if module["path"] else "config.json"
            if not source.exists(rel):  # LocalModel refuses a path that climbs out of the folder
                raise ModelFileError(path, f"the Pooling module's {rel!r:.80} is missing")
            pooling = _pooling_mode(small / rel)
    return pooling


def _module_list(path) -> list[dict]:
    try:
        raw = path.read_bytes()  # a list, which read_json refuses: the same errors by hand
    except OSError as err:
        raise ModelFileError(path, f"cannot read file: {err.strerror or err}") from None
    modules = parse_json(raw, path)
    if not isinstance(modules, list):
        raise ModelFileError(path, f"expected a list of modules, got {describe(modules)}")
    for module in modules:
        if not isinstance(module, dict) or not isinstance(module.get("type"), str):
            raise ModelFileError(path, f"a module should be an object with a type, got {describe(module)}")
        if not isinstance(module.get("path", ""), str):
            raise ModelFileError(path, f"a module's path should be a string, got {describe(module.get('path'))}")
        module.setdefault("path", "")
    return modules


def _pooling_mode(path) -> str:
    config = read_json(path)
    if isinstance(config.get("pooling_mode"), str):  # a newer spelling: {"pooling_mode": "mean"}
        mode = {"mean": "mean", "cls": "cls", "lasttoken": "lasttoken"}.get(config["pooling_mode"])
        if mode is None:
            raise ModelFileError(path, f"pooling_mode {config['pooling_mode']!r:.40} is not supported")
        return mode
    chosen = [key for key in _POOLING_FLAGS if config.get(key) is True]
    if len(chosen) != 1 or _POOLING_FLAGS[chosen[0]] is None:
        raise ModelFileError(
            path, f"pooling {', '.join(chosen) or 'none'}: one of {', '.join(POOLINGS)} is supported, alone"
        )
    return _POOLING_FLAGS[chosen[0]]
