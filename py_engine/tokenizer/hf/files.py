"""Read HF tokenizer files (tokenizer.json, tokenizer_config.json, chat_template.jinja) into
the keyword arguments of `Tokenizer.from_spec`."""

import math
from contextlib import contextmanager
from pathlib import Path

from ...errors import ModelFileError
from ...formats.json_file import read_json
from ..spec_error import SpecError
from .added_tokens import AddedToken
from .sections import boolean, count, fail, list_of, optional, string, token_id

TOKENIZER_FILE = "tokenizer.json"
CONFIG_FILE = "tokenizer_config.json"
CHAT_TEMPLATE_FILE = "chat_template.jinja"

# tokenizer_config.json entries handed to chat templates, as transformers does.
_TEMPLATE_TOKEN_NAMES = ("bos_token", "eos_token", "unk_token", "pad_token")


def _model_spec(path, data: dict) -> dict:
    """The `model` section as Tokenizer.from_spec arguments."""
    model = data.get("model")
    if model is None:
        raise ModelFileError(path, "missing 'model' section")
    if not isinstance(model, dict):
        fail("model", "an object", model)
    # Old files leave out the type; a merge list marks BPE.
    model_type = model.get("type", "BPE" if "merges" in model else None)
    if model_type == "BPE":
        return _bpe_spec(model)
    if model_type == "WordPiece":
        return dict(
            model_type="wordpiece",
            vocab=_vocab(model),
            unk_token=_option(model, "unk_token", string, "[UNK]"),
            continuing_subword_prefix=_option(model, "continuing_subword_prefix", string, "##"),
            max_input_chars_per_word=_option(model, "max_input_chars_per_word", count, 100),
        )
    if model_type == "Unigram":
        pieces = model.get("vocab")
        list_of(_piece_and_score)(pieces, "model.vocab")
        unk_id = _option(model, "unk_id", optional(token_id), None)
        if unk_id is not None and unk_id >= len(pieces):
            raise SpecError(f"model.unk_id: {unk_id} is not an index of model.vocab ({len(pieces)} pieces)")
        return dict(
            model_type="unigram",
            vocab=[piece for piece, _ in pieces],
            scores=[float(score) for _, score in pieces],
            unk_token=None if unk_id is None else pieces[unk_id][0],
            byte_fallback=_option(model, "byte_fallback", boolean, False),
        )
    raise ModelFileError(
        path, f"unsupported tokenizer model type {model_type!r:.60} (supported: BPE, WordPiece, Unigram)"
    )


def _bpe_spec(model: dict) -> dict:
    if not isinstance(model.get("merges"), list):
        fail("model.merges", "a list", model.get("merges"))
    for option in ("continuing_subword_prefix", "end_of_word_suffix"):
        if _option(model, option, optional(string), None):
            raise SpecError(f"model.{option}: BPE option {option}={model[option]!r:.60} is not supported")
    return dict(
        model_type="bpe",
        vocab=_vocab(model),
        merges=model["merges"],  # each checked as BPE reads it
        unk_token=_option(model, "unk_token", optional(string), None),
        fuse_unk=_option(model, "fuse_unk", boolean, False),
        byte_fallback=_option(model, "byte_fallback", boolean, False),
        ignore_merges=_option(model, "ignore_merges", boolean, False),
    )


def _option(section: dict, name: str, check, default):
    """section[name] passing check(value, where); `default` where it is missing."""
    if name not in section:
        return default
    check(section[name], f"model.{name}")
    return section[name]


def _vocab(model: dict) -> dict[str, int]:
    """model.vocab: {token: id}, every id a different one."""
    vocab = model.get("vocab")
    if not isinstance(vocab, dict):
        fail("model.vocab", "an object of token: id", vocab)
    tokens_by_id: dict[int, str] = {}
    for token, index in vocab.items():
        token_id(index, f"model.vocab[{token[:40]!r}]")
        if index in tokens_by_id:
            raise SpecError(f"model.vocab: {tokens_by_id[index][:40]!r} and {token[:40]!r} both have id {index}")
        tokens_by_id[index] = token
    return vocab


def _piece_and_score(value, where):
    """A Unigram piece: [text, finite score]."""
    if not isinstance(value, list) or len(value) != 2:
        fail(where, "a [piece, score] pair", value)
    string(value[0], f"{where}[0]")
    score = value[1]
    if not isinstance(score, (int, float)) or isinstance(score, bool) or not math.isfinite(score):
        fail(f"{where}[1]", "a finite number", score)


def _added_token(value, where):
    if not isinstance(value, dict):
        fail(where, "an object", value)
    token_id(value.get("id"), f"{where}.id")
    string(value.get("content"), f"{where}.content")
    for flag in ("special", "lstrip", "rstrip", "single_word", "normalized"):
        if flag in value:
            boolean(value[flag], f"{where}.{flag}")


def _added_tokens(data: dict) -> list[AddedToken]:
    entries = data.get("added_tokens")
    if entries is None:
        return []
    list_of(_added_token)(entries, "added_tokens")
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
        for entry in entries
    ]


def _token_text(config: dict, name: str) -> str | None:
    """tokenizer_config.json writes special tokens as "text" or {"content": "text", ...}."""
    value = config.get(name)
    if isinstance(value, dict):
        string(value.get("content"), f"{name}.content")
        return value["content"]
    if value is not None and not isinstance(value, str):
        fail(name, 'a string, {"content": string} or null', value)
    return value


def _named_template(value, where):
    if not isinstance(value, dict):
        fail(where, 'an object {"name": ..., "template": ...}', value)
    string(value.get("name"), f"{where}.name")
    string(value.get("template"), f"{where}.template")


def _config_template(config: dict) -> str | None:
    template = config.get("chat_template")
    if isinstance(template, list):  # named templates: [{"name": ..., "template": ...}]
        list_of(_named_template)(template, "chat_template")
        return {entry["name"]: entry["template"] for entry in template}.get("default")
    if template is not None and not isinstance(template, str):
        fail("chat_template", "a string, a list of named templates or null", template)
    return template


@contextmanager
def _fields_of(path):
    """A SpecError naming a field becomes a ModelFileError naming the file too."""
    try:
        yield
    except SpecError as err:
        raise ModelFileError(path, str(err)) from None


def read_tokenizer_files(path, config_path=None, chat_template_path=None) -> dict:
    """Raises ModelFileError naming the file and the field. The pipeline sections are checked by
    Tokenizer.from_spec (sections.py)."""
    data = read_json(path)
    with _fields_of(path):
        added_tokens = _added_tokens(data)
        model = _model_spec(path, data)
    spec = dict(
        **model,
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
    with _fields_of(config_path):
        for name in _TEMPLATE_TOKEN_NAMES:
            text = _token_text(config, name)
            if text is not None:
                template_tokens[name] = text
        chat_template = _config_template(config)

    def id_of(name: str) -> int | None:
        text = template_tokens.get(name)
        if text is None:
            return None
        if text not in all_ids:
            raise ModelFileError(config_path, f"{name} {text!r:.60} is not in the vocabulary")
        return all_ids[text]

    eos_id = id_of("eos_token")
    return dict(
        bos_id=id_of("bos_token"),
        eos_ids=[] if eos_id is None else [eos_id],
        chat_template=chat_template,
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
