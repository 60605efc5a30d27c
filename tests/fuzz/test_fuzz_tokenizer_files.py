"""Fuzzing HF tokenizer files: mutated tokenizer.json / tokenizer_config.json through the loader
(Tokenizer.from_model_dir, as session.load_model calls it), then a first encode and decode.
Mutations are mostly structural (mutate_json: a node of another type, a key gone, a list emptied
or grown), some byte-level. Seeds: the Unigram fixture and small hand-made files in the shapes
real ones have (byte-level BPE as Qwen / Llama 3, SentencePiece BPE as Llama 2 / Gemma, BERT's
WordPiece), covering every normalizer, pre-tokenizer, decoder and post-processor we read."""

import json
import random
import shutil
import tempfile
from pathlib import Path

import pytest
from harness import fuzz, json_bytes, mutate_json

from py_engine.tokenizer import Tokenizer
from py_engine.tokenizer.byte_level import BYTE_TO_CHAR

FIXTURES = Path(__file__).parent.parent / "fixtures"
# tokenizer.json, then (where there is one) this line and tokenizer_config.json: one input, one file.
CONFIG_SEPARATOR = b"\n\x00--- tokenizer_config.json ---\x00\n"
TEXT = "Hello world! <s> 12 345 héllo\n\t<|im_end|> 日本 [CLS] ＡＢ"


def added(token_id: int, content: str, special: bool = True, **options) -> dict:
    flags = {"single_word": False, "lstrip": False, "rstrip": False, "normalized": not special}
    return {"id": token_id, "content": content, "special": special, **flags, **options}


def byte_level_bpe() -> tuple[dict, dict]:
    """Qwen / Llama 3 style: the 256 byte characters, a few merges, added tokens past the vocab."""
    # A third of the byte characters (the rest are dropped as unknown): a small seed mutates fast.
    vocab = {}
    merges = [["Ġ", "w"], ["h", "e"], ["l", "l"], ["he", "ll"], ["hell", "o"], ["Ġw", "o"], ["1", "2"]]
    for token in (
        BYTE_TO_CHAR[::3] + ["Ġ", "h", "e", "l", "o", "w", "1", "2"] + [left + right for left, right in merges]
    ):
        vocab.setdefault(token, len(vocab))
    end = len(vocab)
    data = {
        "version": "1.0",
        "added_tokens": [added(end, "<|endoftext|>"), added(end + 1, "<|im_start|>"), added(end + 2, "<|im_end|>")],
        "normalizer": {"type": "NFC"},
        "pre_tokenizer": {
            "type": "Sequence",
            "pretokenizers": [
                {
                    "type": "Split",
                    "pattern": {"Regex": "(?i:'s|'t)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}|\\s+(?!\\S)|\\s+"},
                    "behavior": "Isolated",
                    "invert": False,
                },
                {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False},
            ],
        },
        "post_processor": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False},
        "decoder": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False},
        "model": {"type": "BPE", "unk_token": None, "ignore_merges": True, "vocab": vocab, "merges": merges},
    }
    config = {
        "bos_token": None,
        "eos_token": "<|im_end|>",
        "pad_token": "<|endoftext|>",
        "chat_template": "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}",
    }
    return data, config


def sentencepiece_bpe() -> tuple[dict, dict]:
    """Llama 2 style: <unk> <s> </s>, byte fallback tokens, "▁" pieces, merges as strings."""
    pieces = ["▁", "h", "e", "l", "o", "w", "r", "d", "he", "ll", "▁he", "▁hell", "▁hello", "▁w", "▁wor", "or"]
    byte_tokens = [f"<0x{b:02X}>" for b in (*range(0x20, 0x30), *range(0xC0, 0xC4), 0xE6, 0x97, 0xA5, 0x9C, 0xAC)]
    vocab = {token: index for index, token in enumerate(["<unk>", "<s>", "</s>", *byte_tokens])}
    for piece in pieces:
        vocab[piece] = len(vocab)
    merges = ["h e", "l l", "▁ he", "▁he ll", "▁hell o", "▁ w", "o r", "▁w or"]
    data = {
        "version": "1.0",
        "added_tokens": [added(0, "<unk>"), added(1, "<s>"), added(2, "</s>")],
        "normalizer": {
            "type": "Sequence",
            "normalizers": [
                {"type": "Prepend", "prepend": "▁"},
                {"type": "Replace", "pattern": {"String": " "}, "content": "▁"},
            ],
        },
        "pre_tokenizer": None,
        "post_processor": {
            "type": "TemplateProcessing",
            "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
            "pair": [{"Sequence": {"id": "A", "type_id": 0}}, {"Sequence": {"id": "B", "type_id": 1}}],
            "special_tokens": {"<s>": {"id": "<s>", "ids": [1], "tokens": ["<s>"]}},
        },
        "decoder": {
            "type": "Sequence",
            "decoders": [
                {"type": "Replace", "pattern": {"String": "▁"}, "content": " "},
                {"type": "ByteFallback"},
                {"type": "Fuse"},
                {"type": "Strip", "content": " ", "start": 1, "stop": 0},
            ],
        },
        "model": {
            "type": "BPE",
            "unk_token": "<unk>",
            "fuse_unk": True,
            "byte_fallback": True,
            "vocab": vocab,
            "merges": merges,
        },
    }
    config = {"add_bos_token": True, "bos_token": {"content": "<s>", "lstrip": False}, "eos_token": "</s>"}
    return data, config


def gemma_bpe() -> tuple[dict, None]:
    """Gemma style: spaces replaced, split on them, a Replace / ByteFallback / Fuse decoder."""
    data, _ = sentencepiece_bpe()
    data["normalizer"] = {"type": "Replace", "pattern": {"String": " "}, "content": "▁"}
    data["pre_tokenizer"] = {"type": "Split", "pattern": {"String": " "}, "behavior": "MergedWithPrevious"}
    data["decoder"]["decoders"] = data["decoder"]["decoders"][:3]
    data["model"]["merges"] = [merge.split(" ") for merge in data["model"]["merges"]]
    return data, None


def wordpiece() -> tuple[dict, dict]:
    """BERT: a WordPiece vocab with ## continuations, BERT's normalizer and pre-tokenizer."""
    words = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "hello", "world", "!", "1", "##2", "he", "##llo", "日"]
    data = {
        "version": "1.0",
        "added_tokens": [added(index, token) for index, token in enumerate(words[:5])],
        "normalizer": {"type": "BertNormalizer", "clean_text": True, "handle_chinese_chars": True, "lowercase": True},
        "pre_tokenizer": {"type": "BertPreTokenizer"},
        "post_processor": {"type": "BertProcessing", "sep": ["[SEP]", 3], "cls": ["[CLS]", 2]},
        "decoder": {"type": "WordPiece", "prefix": "##", "cleanup": True},
        "model": {
            "type": "WordPiece",
            "unk_token": "[UNK]",
            "continuing_subword_prefix": "##",
            "max_input_chars_per_word": 100,
            "vocab": {token: index for index, token in enumerate(words)},
        },
    }
    config = {"cls_token": "[CLS]", "unk_token": "[UNK]", "sep_token": "[SEP]", "pad_token": {"content": "[PAD]"}}
    return data, config


def other_pipelines() -> list[tuple[dict, dict | None]]:
    """The remaining section types on the WordPiece vocabulary."""
    out = []
    for normalizer, pre_tokenizer, decoder in (
        (
            {"type": "Sequence", "normalizers": [{"type": "NFKC"}, {"type": "Lowercase"}, {"type": "StripAccents"}]},
            {"type": "Whitespace"},
            {"type": "Metaspace", "replacement": "▁", "prepend_scheme": "always"},
        ),
        (
            {"type": "Strip", "strip_left": True, "strip_right": False},
            {"type": "Sequence", "pretokenizers": [{"type": "WhitespaceSplit"}, {"type": "Digits"}]},
            {"type": "Metaspace", "replacement": "▁", "add_prefix_space": True},
        ),
        (
            {"type": "Replace", "pattern": {"Regex": "\\s+"}, "content": " "},
            {"type": "Metaspace", "replacement": "▁", "prepend_scheme": "first", "split": False},
            {"type": "Strip", "content": "▁", "start": 1, "stop": 1},
        ),
    ):
        data, config = wordpiece()
        data.update(normalizer=normalizer, pre_tokenizer=pre_tokenizer, decoder=decoder)
        data["post_processor"] = {
            "type": "TemplateProcessing",
            "single": [
                {"SpecialToken": {"id": "[CLS]", "type_id": 0}},
                {"Sequence": {"id": "A", "type_id": 0}},
                {"SpecialToken": {"id": "[SEP]", "type_id": 0}},
            ],
            "special_tokens": {"[CLS]": {"id": "[CLS]", "ids": [2], "tokens": ["[CLS]"]}},
        }
        config["chat_template"] = [
            {"name": "default", "template": "{{ messages }}"},
            {"name": "tool_use", "template": "{{ tools }}"},
        ]
        out.append((data, config))
    return out


def unigram() -> tuple[dict, dict]:
    """The Unigram fixture (Precompiled charsmap, Metaspace), its vocabulary cut to 100 pieces."""
    folder = FIXTURES / "tokenizer_unigram"
    data = json.loads((folder / "tokenizer.json").read_text(encoding="utf-8"))
    data["model"]["vocab"] = data["model"]["vocab"][:100]
    return data, json.loads((folder / "tokenizer_config.json").read_text(encoding="utf-8"))


SEEDS = [byte_level_bpe(), sentencepiece_bpe(), gemma_bpe(), wordpiece(), *other_pipelines(), unigram()]


def encode_input(data, config) -> bytes:
    text = json_bytes(data)
    return text if config is None else text + CONFIG_SEPARATOR + json_bytes(config)


def mutate(seed: tuple, rng: random.Random) -> bytes:
    """tokenizer.json edited (most often), or tokenizer_config.json, or the config dropped."""
    data, config = seed
    roll = rng.random()
    if roll < 0.75 or config is None:
        data = mutate_json(data, rng)
    elif roll < 0.95:
        config = mutate_json(config, rng)
    else:
        config = None
    text = json_bytes(data, rng)
    return text if config is None else text + CONFIG_SEPARATOR + json_bytes(config, rng)


def make_loader(folder: Path):
    def load(raw: bytes) -> None:
        """What loading an HF model's tokenizer does: the files, then a first encode and decode."""
        data, _, config = raw.partition(CONFIG_SEPARATOR)
        (folder / "tokenizer.json").write_bytes(data)
        (folder / "tokenizer_config.json").unlink(missing_ok=True)
        if config:
            (folder / "tokenizer_config.json").write_bytes(config)
        tokenizer = Tokenizer.from_model_dir(folder)
        ids = tokenizer.encode(TEXT, add_special_tokens=True)
        tokenizer.decode(ids)
        tokenizer.decode(ids + list(range(min(tokenizer.vocab_size, 40))), skip_special_tokens=True)
        stream = tokenizer.stream_decoder()
        for token in ids[:8]:
            stream.push(token)
        stream.flush()

    return load


@pytest.fixture(scope="module")
def load(tmp_path_factory):
    # Two small files written per input: in memory where the system has a RAM disk (a busy disk
    # takes milliseconds a write).
    shm = Path("/dev/shm")
    folder = Path(tempfile.mkdtemp(dir=shm)) if shm.is_dir() else tmp_path_factory.mktemp("tokenizer_files")
    yield make_loader(folder)
    shutil.rmtree(folder, ignore_errors=True)


def test_seeds_load(load):
    for data, config in SEEDS:
        load(encode_input(data, config))


def test_fuzz_tokenizer_files(load):
    counts = fuzz("tokenizer_files", SEEDS, mutate, load)
    assert counts["accepted"] > 0 and counts["typed_errors"] > 0
