"""How a model turns a text into one vector: its pooling, normalisation and longest input, read from
its sentence-transformers files where it has them (modules.json, the Pooling module's
config.json, sentence_bert_config.json), else the architecture's usual choice (an encoder: mean
pooling, as sentence-transformers wraps a plain transformer; a decoder: its last token). Also from
those files: the Dense projections after pooling (EmbeddingGemma's two, no bias, identity
activation: their weights join the model's tensors) and the named prompts of
config_sentence_transformers.json ("query": "task: search result | query: ", ...).

Every file is read through the model source (its small files), so the browser's source works as
the desktop's; a file that says something we cannot do (a Dense activation, max pooling) is a
ModelFileError naming it, never silently another vector."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

from ..errors import ModelFileError, WispError
from ..formats.json_file import describe, parse_json, read_json
from ..formats.safetensors import parse_header

MODULES_FILE = "modules.json"
ST_CONFIG_FILE = "sentence_bert_config.json"
PROMPTS_FILE = "config_sentence_transformers.json"
TOKENIZER_CONFIG_FILE = "tokenizer_config.json"
# The files besides config.json and the tokenizer's that an embedding model may carry: the server
# and the browser's model source must offer them with the model (formats/hf_dir.SMALL_FILES).
POOLING_CONFIG = "1_Pooling/config.json"
EMBEDDING_FILES = (MODULES_FILE, ST_CONFIG_FILE, POOLING_CONFIG, PROMPTS_FILE)

POOLINGS = ("cls", "mean", "lasttoken")
_POOLING_FLAGS = {  # sentence-transformers' Pooling config keys -> our mode (None: not supported)
    "pooling_mode_cls_token": "cls",
    "pooling_mode_mean_tokens": "mean",
    "pooling_mode_lasttoken": "lasttoken",
    "pooling_mode_max_tokens": None,
    "pooling_mode_mean_sqrt_len_tokens": None,
    "pooling_mode_weightedmean_tokens": None,
}
_MODULES_OK = ("Transformer", "Pooling", "Dense", "Normalize")  # sentence_transformers.models.<name>
IDENTITY = "torch.nn.modules.linear.Identity"  # the one Dense activation supported
# Dense config keys at the values the graph computes (sentence-transformers' defaults).
_DENSE_DEFAULTS = {
    "module_input_name": "sentence_embedding",
    "module_output_name": "sentence_embedding",
    "use_residual": False,
}
# The vector sizes a model was trained to be cut to (Matryoshka), by architecture: EmbeddingGemma's
# model card (its files do not say). Any other size of its vector is refused, as every size but
# the whole vector of a model not listed here.
MATRYOSHKA = {"Gemma3TextModel": (768, 512, 256, 128)}
DECODER_MAX_TOKENS = 2048  # a decoder's default longest input: its KV cache is sized by it
ENCODER_MAX_TOKENS = 2048  # an encoder's longest input at most: a whole text is one forward's rows


class DenseLayer(NamedTuple):
    """A sentence-transformers Dense module: y = W x (+ b) of the pooled vector, identity activation."""

    weight: str  # its tensors' names among the model's: "<module path>/linear.weight"
    bias: str | None
    n_in: int
    n_out: int
    tensors: dict  # those names -> their TensorInfo in <module path>/model.safetensors


@dataclass(frozen=True)
class EmbedSettings:
    pooling: str  # "cls", "mean" or "lasttoken"
    max_tokens: int  # the longest input, special tokens included; longer ones are truncated
    lowercase: bool = False  # sentence_bert_config.json's do_lower_case: the text is lowercased first
    dense: tuple = ()  # DenseLayers after pooling, in order
    prompts: dict = field(default_factory=dict)  # name -> the text put before an input
    default_prompt: str | None = None  # the prompt an input gets when none is named
    dimensions: tuple = ()  # the sizes a vector may be cut to, largest (the whole vector) first


def embed_settings(source, cfg, encoder: bool, pooling: str | None = None, max_tokens: int | None = None):
    """The model's EmbedSettings; `pooling` / `max_tokens` given override what its files say."""
    if pooling is not None and pooling not in POOLINGS:
        raise WispError(f"pooling {pooling!r} is not one of {', '.join(POOLINGS)}")
    small = source.small_dir()
    folder = source.kind == "hf"  # a GGUF file has no sentence-transformers files beside it
    files_pooling, dense = _modules(source, small, cfg.hidden_size) if folder else (None, ())
    if dense and not encoder:  # a decoder's graph ends in its last row's pooling (bert.EmbeddingBuilder.logits)
        raise ModelFileError(small / MODULES_FILE, "Dense modules after a decoder's pooling are not supported")
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
    prompts, default_prompt = _prompts(source, small) if folder else ({}, None)
    width = dense[-1].n_out if dense else cfg.hidden_size
    cuts = tuple(d for d in MATRYOSHKA.get(cfg.architecture, ()) if d < width)
    return EmbedSettings(chosen, limit, lowercase, dense, prompts, default_prompt, (width, *cuts))


def _positive(config: dict, key: str, path) -> int | None:
    value = config.get(key)
    if value is None or (isinstance(value, (int, float)) and not isinstance(value, bool) and value > 1 << 24):
        return None
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ModelFileError(path, f"{key} should be a positive integer, got {describe(value)}")
    return value


def _modules(source, small, hidden: int) -> tuple[str | None, tuple]:
    """The pooling modules.json's Pooling module asks for (None: no modules.json) and its Dense
    layers, in order (after the pooling of `hidden` numbers: the only place the graph projects).
    Modules that would change the vector otherwise (max pooling, ...) are refused."""
    if not source.exists(MODULES_FILE):
        return None, ()
    path = small / MODULES_FILE
    pooling, dense = None, []
    for module in _module_list(path):
        kind = module["type"].rpartition(".")[2]
        if kind not in _MODULES_OK:
            raise ModelFileError(path, f"sentence-transformers module {module['type']!r:.80} is not supported")
        if kind in ("Pooling", "Dense"):
            rel = f"{module['path']}/config.json" if module["path"] else "config.json"
            if not source.exists(rel):  # LocalModel refuses a path that climbs out of the folder
                raise ModelFileError(path, f"the {kind} module's {rel!r:.80} is missing")
            if kind == "Pooling":
                pooling = _pooling_mode(small / rel)
            elif pooling is None:
                raise ModelFileError(path, "a Dense module before the Pooling module is not supported")
            else:
                dense.append(_dense(source, module["path"], small / rel, dense[-1].n_out if dense else hidden))
    return pooling, tuple(dense)


def _dense(source, folder: str, path, n_in: int) -> DenseLayer:
    """A Dense module's layer from its config.json and model.safetensors (under `folder`), taking
    the n_in numbers the module before it gives."""
    config = read_json(path)
    sizes = [config.get(key) for key in ("in_features", "out_features")]
    if not all(isinstance(n, int) and not isinstance(n, bool) and 1 <= n <= 1 << 16 for n in sizes):
        raise ModelFileError(path, f"in_features and out_features should be sizes, got {describe(sizes)}")
    if sizes[0] != n_in:
        raise ModelFileError(path, f"in_features is {sizes[0]}, but the module before gives {n_in}")
    bias = config.get("bias", True)
    if not isinstance(bias, bool):
        raise ModelFileError(path, f"bias should be true or false, got {describe(bias)}")
    if config.get("activation_function", IDENTITY) != IDENTITY:
        raise ModelFileError(path, f"activation_function {describe(config['activation_function'])} is not supported")
    for key, value in _DENSE_DEFAULTS.items():
        if config.get(key, value) != value:
            raise ModelFileError(path, f"{key} {describe(config[key])} is not supported (only {value!r})")
    rel = f"{folder}/model.safetensors" if folder else "model.safetensors"
    if not source.exists(rel):
        raise ModelFileError(path, f"the Dense module's weights {rel!r:.80} are missing (only safetensors are read)")
    header = parse_header(lambda start, n: source.read(rel, start, n), source.size(rel), source.locate(rel))
    prefix = f"{folder}/" if folder else ""
    tensors = {prefix + name: info for name, info in header.items()}
    weight, bias_name = prefix + "linear.weight", prefix + "linear.bias" if bias else None
    for name, shape in ((weight, (sizes[1], sizes[0])), (bias_name, (sizes[1],))):
        if name is not None and (name not in tensors or tuple(tensors[name].shape) != shape):
            got = tuple(tensors[name].shape) if name in tensors else "missing"
            raise ModelFileError(source.locate(rel), f"tensor {name!r} should be of shape {shape}, got {got}")
    return DenseLayer(weight, bias_name, sizes[0], sizes[1], tensors)


def _prompts(source, small) -> tuple[dict, str | None]:
    """config_sentence_transformers.json's prompts (name -> text) and default_prompt_name."""
    if not source.exists(PROMPTS_FILE):
        return {}, None
    path = small / PROMPTS_FILE
    config = read_json(path)
    prompts = config.get("prompts") or {}
    if not isinstance(prompts, dict) or not all(isinstance(text, str) for text in prompts.values()):
        raise ModelFileError(path, f"prompts should be an object of texts by name, got {describe(prompts)}")
    default = config.get("default_prompt_name")
    if default is not None and default not in prompts:
        raise ModelFileError(path, f"default_prompt_name {describe(default)} is not one of its prompts")
    return prompts, default


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
    if config.get("include_prompt", True) is not True:  # the prompt's tokens are pooled with the text's
        raise ModelFileError(path, f"include_prompt {describe(config['include_prompt'])} is not supported (only true)")
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


def dense_module_files(modules_json: Path) -> list[str]:
    """The files of the Dense modules a modules.json names (`2_Dense/config.json`, `2_Dense/model.safetensors`,
    ...), for a server that lists exactly what it serves and a page that fetches them: only modules in a
    plain folder of the model's own (no nesting, nothing hidden); a file that cannot be read names none
    (the load then says what is wrong)."""
    try:
        modules = _module_list(modules_json)
    except ModelFileError:
        return []
    folders = [m["path"] for m in modules if m["type"].rpartition(".")[2] == "Dense"]
    plain = [f for f in folders if re.fullmatch(r"[A-Za-z0-9_-][A-Za-z0-9_.-]*", f)]
    return [f"{folder}/{name}" for folder in plain for name in ("config.json", "model.safetensors")]
