"""Validation of HF tokenizer files (tokenizer/hf/files.py, sections.py, Tokenizer.from_spec):
a field of the wrong type anywhere in tokenizer.json or tokenizer_config.json, an id outside the
vocabulary, a duplicate id, a section of an unknown type or a garbage charsmap is a ModelFileError
naming the file and the field, never a raw Python exception."""

import base64
import copy
import json
import math

import pytest

from py_engine.errors import ModelFileError
from py_engine.tokenizer import Tokenizer

BASE = {
    "added_tokens": [{"id": 5, "content": "<s>", "special": True}],
    "normalizer": {"type": "Sequence", "normalizers": [{"type": "NFC"}]},
    "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False},
    "post_processor": {
        "type": "TemplateProcessing",
        "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
        "special_tokens": {"<s>": {"id": "<s>", "ids": [5], "tokens": ["<s>"]}},
    },
    "decoder": {"type": "ByteLevel"},
    "model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "ab": 2, "c": 3, "<unk>": 4}, "merges": ["a b"]},
}
UNIGRAM = {"model": {"type": "Unigram", "unk_id": 0, "vocab": [["<unk>", 0.0], ["a", -1.0], ["b", -2.0]]}}


def set_path(data: dict, path: str, value) -> dict:
    """A copy of `data` with the field at a dotted path ("model.vocab.a", "added_tokens.0.id") set."""
    data = copy.deepcopy(data)
    *parents, last = path.split(".")
    node = data
    for key in parents:
        node = node[int(key)] if isinstance(node, list) else node[key]
    node[int(last) if isinstance(node, list) else last] = value
    return data


TOKENIZER_CASES = {
    "vocab_a_list": ("model.vocab", ["a", "b"], "model.vocab: expected an object of token: id, got a list"),
    "id_a_string": ("model.vocab.a", "0", "model.vocab['a']: expected a token id"),
    "id_negative": ("model.vocab.a", -1, "model.vocab['a']: expected a token id"),
    "duplicate_id": ("model.vocab.b", 0, "model.vocab: 'a' and 'b' both have id 0"),
    "merges_a_dict": ("model.merges", {"a": "b"}, "model.merges: expected a list, got an object"),
    "merge_of_numbers": ("model.merges", [[1, 2]], "model.merges[0]: expected"),
    "unk_outside_the_vocab": ("model.unk_token", "<x>", "unk_token '<x>' is not in the vocab"),
    "flag_a_string": ("model.fuse_unk", "yes", "model.fuse_unk: expected true or false"),
    "unknown_normalizer": ("normalizer", {"type": "Bogus"}, "normalizer: unsupported normalizer type 'Bogus'"),
    "step_a_string": ("normalizer.normalizers", ["NFC"], "normalizer.normalizers[0]: expected a normalizer object"),
    "step_null": ("normalizer.normalizers", [None], "normalizer.normalizers[0]: expected a normalizer object"),
    "pattern_a_number": (
        "normalizer",
        {"type": "Replace", "pattern": 5, "content": "x"},
        'normalizer.pattern: expected an object with "String" or "Regex"',
    ),
    "charsmap_not_base64": ("normalizer", {"type": "Precompiled", "precompiled_charsmap": "!!é"}, "is not base64"),
    "charsmap_garbage": (
        "normalizer",
        {"type": "Precompiled", "precompiled_charsmap": base64.b64encode(b"\xff" * 12).decode()},
        "precompiled charsmap is malformed",
    ),
    "split_behavior_a_number": (
        "pre_tokenizer",
        {"type": "Split", "pattern": {"String": " "}, "behavior": 5},
        "pre_tokenizer.behavior: expected a string",
    ),
    "metaspace_replacement_two_chars": (
        "pre_tokenizer",
        {"type": "Metaspace", "replacement": "ab"},
        "pre_tokenizer.replacement: expected a single character",
    ),
    "metaspace_scheme_unknown": (
        "decoder",
        {"type": "Metaspace", "prepend_scheme": "sometimes"},
        "decoder.prepend_scheme: expected 'always' or 'first' or 'never'",
    ),
    "strip_negative": ("decoder", {"type": "Strip", "content": " ", "start": -1}, "decoder.start: expected a count"),
    "decoder_a_list": ("decoder", [{"type": "Fuse"}], "decoder: expected a decoder object or null, got a list"),
    "special_id_outside_the_vocab": (
        "post_processor.special_tokens.<s>.ids",
        [99],
        "post_processor: the special tokens it adds: 99 is not a token id",
    ),
    "special_ids_not_numbers": ("post_processor.special_tokens.<s>.ids", ["5"], ".ids[0]: expected a token id"),
    "bert_cls_reversed": (
        "post_processor",
        {"type": "BertProcessing", "cls": [0, "a"], "sep": ["b", 1]},
        "post_processor.cls[0]: expected a string",
    ),
    "template_special_token_null": (
        "post_processor.single",
        [{"SpecialToken": None}],
        "post_processor.single[0].SpecialToken: expected an object",
    ),
    "added_id_a_string": ("added_tokens.0.id", "5", "added_tokens[0].id: expected a token id"),
    "added_content_null": ("added_tokens.0.content", None, "added_tokens[0].content: expected a string"),
    "added_tokens_an_object": ("added_tokens", {"id": 5}, "added_tokens: expected a list"),
    "model_a_list": ("model", [], "model: expected an object"),
}


def nested(depth: int) -> dict:
    node = {"type": "NFC"}
    for _ in range(depth):
        node = {"type": "Sequence", "normalizers": [node]}
    return node


def write(tmp_path, data, config=None):
    (tmp_path / "tokenizer.json").write_text(json.dumps(data, allow_nan=True), encoding="utf-8")
    if config is not None:
        (tmp_path / "tokenizer_config.json").write_text(json.dumps(config), encoding="utf-8")
    return tmp_path


def expect_error(folder, file_name: str, problem: str) -> None:
    with pytest.raises(ModelFileError) as caught:
        Tokenizer.from_model_dir(folder)
    assert caught.value.path == str(folder / file_name), caught.value
    assert problem in caught.value.problem, caught.value.problem


def test_the_base_files_load(tmp_path):
    tokenizer = Tokenizer.from_model_dir(write(tmp_path, BASE, {"eos_token": "c"}))
    assert tokenizer.encode("abc", add_special_tokens=True) == [5, 2, 3]
    (tmp_path / "unigram").mkdir()
    assert Tokenizer.from_model_dir(write(tmp_path / "unigram", UNIGRAM)).encode("ab") == [1, 2]


@pytest.mark.parametrize("name", list(TOKENIZER_CASES))
def test_bad_tokenizer_json(tmp_path, name):
    path, value, problem = TOKENIZER_CASES[name]
    expect_error(write(tmp_path, set_path(BASE, path, value)), "tokenizer.json", problem)


@pytest.mark.parametrize(
    "path,value,problem",
    [
        ("model.vocab.1.1", math.nan, "model.vocab[1][1]: expected a finite number, got a number (nan)"),
        ("model.vocab.1", "a", "model.vocab[1]: expected a [piece, score] pair"),
        ("model.unk_id", 9, "model.unk_id: 9 is not an index of model.vocab (3 pieces)"),
        ("model.byte_fallback", None, "model.byte_fallback: expected true or false, got null"),
    ],
)
def test_bad_unigram_model(tmp_path, path, value, problem):
    expect_error(write(tmp_path, set_path(UNIGRAM, path, value)), "tokenizer.json", problem)


def test_an_empty_vocabulary(tmp_path):
    data = {"model": {"type": "BPE", "vocab": {}, "merges": []}}
    expect_error(write(tmp_path, data), "tokenizer.json", "the vocabulary is empty")


def test_sequences_nested_too_deep(tmp_path):
    expect_error(write(tmp_path, {**BASE, "normalizer": nested(40)}), "tokenizer.json", "nested more than 16 deep")
    Tokenizer.from_model_dir(write(tmp_path, {**BASE, "normalizer": nested(3)}))


@pytest.mark.parametrize(
    "config,problem",
    [
        ({"eos_token": [1]}, 'eos_token: expected a string, {"content": string} or null'),
        ({"bos_token": {"content": 5}}, "bos_token.content: expected a string"),
        ({"chat_template": 5}, "chat_template: expected a string, a list of named templates or null"),
        ({"chat_template": [{"name": ["x"], "template": "t"}]}, "chat_template[0].name: expected a string"),
        ({"chat_template": ["t"]}, "chat_template[0]: expected an object"),
        ({"eos_token": "<nope>"}, "eos_token '<nope>' is not in the vocabulary"),
    ],
)
def test_bad_tokenizer_config(tmp_path, config, problem):
    expect_error(write(tmp_path, BASE, config), "tokenizer_config.json", problem)
