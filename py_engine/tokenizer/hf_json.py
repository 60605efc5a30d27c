"""Read HF tokenizer files (tokenizer.json, tokenizer_config.json, chat_template.jinja) into
the keyword arguments of `Tokenizer.from_spec`."""

from pathlib import Path

from ..errors import ModelFileError
from ..json_file import read_json
from .added_tokens import AddedToken

TOKENIZER_FILE = "tokenizer.json"
CONFIG_FILE = "tokenizer_config.json"
CHAT_TEMPLATE_FILE = "chat_template.jinja"

# tokenizer_config.json entries handed to chat templates, as transformers does.
_TEMPLATE_TOKEN_NAMES = ("bos_token", "eos_token", "unk_token", "pad_token")


def _model_spec(path, data: dict) -> dict:
    """The `model` section as Tokenizer.from_spec arguments."""
    model = data.get("model")
    if not isinstance(model, dict):
        raise ModelFileError(path, "missing 'model' section")
    # Old files leave out the type; a merge list marks BPE.
    model_type = model.get("type", "BPE" if "merges" in model else None)
    if model_type == "BPE":
        return _bpe_spec(path, model)
    if model_type == "WordPiece":
        if not isinstance(model.get("vocab"), dict):
            raise ModelFileError(path, "WordPiece model needs a 'vocab' object")
        return dict(
            model_type="wordpiece",
            vocab=model["vocab"],
            unk_token=model.get("unk_token", "[UNK]"),
            continuing_subword_prefix=model.get("continuing_subword_prefix", "##"),
            max_input_chars_per_word=model.get("max_input_chars_per_word", 100),
        )
    if model_type == "Unigram":
        pieces = model.get("vocab")
        if not isinstance(pieces, list) or not all(isinstance(p, list) and len(p) == 2 for p in pieces):
            raise ModelFileError(path, "Unigram model needs a 'vocab' list of [piece, score] pairs")
        unk_id = model.get("unk_id")
        return dict(
            model_type="unigram",
            vocab=[piece for piece, _ in pieces],
            scores=[score for _, score in pieces],
            unk_token=None if unk_id is None else pieces[unk_id][0],
            byte_fallback=model.get("byte_fallback", False),
        )
    raise ModelFileError(path, f"unsupported tokenizer model type {model_type!r} (supported: BPE, WordPiece, Unigram)")


def _bpe_spec(path, model: dict) -> dict:
    if not isinstance(model.get("vocab"), dict) or not isinstance(model.get("merges"), list):
        raise ModelFileError(path, "BPE model needs a 'vocab' object and a 'merges' list")
    for option in ("continuing_subword_prefix", "end_of_word_suffix"):
        if model.get(option):
            raise ModelFileError(path, f"BPE option {option}={model[option]!r} is not supported")
    return dict(
        model_type="bpe",
        vocab=model["vocab"],
        merges=model["merges"],
        unk_token=model.get("unk_token"),
        fuse_unk=model.get("fuse_unk", False),
        byte_fallback=model.get("byte_fallback", False),
        ignore_merges=model.get("ignore_merges", False),
    )


def _added_tokens(path, data: dict) -> list[AddedToken]:
    try:
        return [
            AddedToken(
                id=entry["id"],
                content=entry["content"],
                special=entry.get("special", False),
                lstrip=entry.get("lstrip", False),
                rstrip=entry.get("rstrip", False),
                single_word=entry.get("single_word", False),
                # HF's default: special tokens match the raw text, others the normalized text.
                normalized=entry.get("normalized", not entry.get("special", False)),
            )
            for entry in data.get("added_tokens") or []
        ]
    except (KeyError, TypeError) as err:
        raise ModelFileError(path, f"malformed added_tokens entry: {err!r}") from None


def _token_text(value) -> str | None:
    """tokenizer_config.json writes special tokens as "text" or {"content": "text", ...}."""
    if isinstance(value, dict):
        return value.get("content")
    return value if isinstance(value, str) else None


def _config_template(config: dict) -> str | None:
    template = config.get("chat_template")
    if isinstance(template, list):  # named templates: [{"name": ..., "template": ...}]
        named = {entry.get("name"): entry.get("template") for entry in template if isinstance(entry, dict)}
        return named.get("default")
    return template if isinstance(template, str) else None


def read_tokenizer_files(path, config_path=None, chat_template_path=None) -> dict:
    data = read_json(path)
    added_tokens = _added_tokens(path, data)
    spec = dict(
        **_model_spec(path, data),
        added_tokens=added_tokens,
        normalizer=data.get("normalizer"),
        pre_tokenizer=data.get("pre_tokenizer"),
        decoder=data.get("decoder"),
        post_processor=data.get("post_processor"),
        source=str(path),
    )
    if config_path is not None:
        vocab = spec["vocab"]
        vocab = vocab if isinstance(vocab, dict) else {token: index for index, token in enumerate(vocab)}
        spec.update(_config_spec(config_path, vocab, added_tokens))
    if chat_template_path is not None:
        try:
            spec["chat_template"] = Path(chat_template_path).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as err:
            raise ModelFileError(chat_template_path, f"cannot read chat template: {err}") from None
    return spec


def _config_spec(config_path, vocab: dict[str, int], added_tokens: list[AddedToken]) -> dict:
    config = read_json(config_path)
    all_ids = {**vocab, **{token.content: token.id for token in added_tokens}}
    template_tokens = {}
    for name in _TEMPLATE_TOKEN_NAMES:
        text = _token_text(config.get(name))
        if text is not None:
            template_tokens[name] = text

    def token_id(name: str) -> int | None:
        text = template_tokens.get(name)
        if text is None:
            return None
        if text not in all_ids:
            raise ModelFileError(config_path, f"{name} {text!r} is not in the vocabulary")
        return all_ids[text]

    eos_id = token_id("eos_token")
    return dict(
        bos_id=token_id("bos_token"),
        eos_ids=[] if eos_id is None else [eos_id],
        chat_template=_config_template(config),
        template_tokens=template_tokens,
    )


def read_model_dir(directory) -> dict:
    directory = Path(directory)
    config_path = directory / CONFIG_FILE
    template_path = directory / CHAT_TEMPLATE_FILE
    return read_tokenizer_files(
        directory / TOKENIZER_FILE,
        config_path if config_path.is_file() else None,
        template_path if template_path.is_file() else None,
    )
