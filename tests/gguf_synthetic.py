"""Small synthetic GGUF files, shared by tests/test_gguf_tokenizer.py and
tools/make_gguf_tokenizer_refs.py (which records transformers' answers for the files in RECIPES
into tests/fixtures/gguf_tokenizer/synthetic.json, so the tests need neither transformers nor torch).

A recipe is write_gguf's arguments with tensors given as shapes (float32 zeros); recipe_digest
fingerprints one so that a test notices a recipe changed after the references were made.
"""

import hashlib
import json

import gguf
import numpy as np

BASE_METADATA = (
    ("add_block_count", 1),
    ("add_context_length", 128),
    ("add_embedding_length", 16),
    ("add_feed_forward_length", 32),
    ("add_head_count", 2),
    ("add_head_count_kv", 2),
    ("add_layer_norm_rms_eps", 1e-5),
    ("add_rope_freq_base", 10000.0),
)


def write_gguf(path, arch="llama", metadata=(), tensors=None, tokenizer=None):
    """A small GGUF: `metadata` as (adder name, value) pairs of GGUFWriter, `tokenizer` a dict."""
    writer = gguf.GGUFWriter(str(path), arch)
    for adder, value in {**dict(BASE_METADATA), **dict(metadata)}.items():
        getattr(writer, adder)(value)
    for key, value in (tokenizer or {}).items():
        if key == "tokens":
            writer.add_token_list(value)
        elif key == "types":
            writer.add_token_types(value)
        elif key == "scores":
            writer.add_token_scores(value)
        elif key == "merges":
            writer.add_token_merges(value)
        elif key == "pre":
            writer.add_string("tokenizer.ggml.pre", value)
        else:
            getattr(writer, f"add_{key}")(value)
    for name, array in (tensors or {"token_embd.weight": np.zeros((8, 16), np.float32)}).items():
        writer.add_tensor(name, array)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


# ---- a SentencePiece ("llama") vocabulary with scores and token types ----

SPM_PIECES = [
    "▁",
    "a",
    "b",
    "c",
    "h",
    "e",
    "l",
    "o",
    "w",
    "r",
    "d",
    "▁a",
    "ab",
    "▁ab",
    "abc",
    "▁abc",
    "he",
    "ll",
    "llo",
    "hello",
    "▁hello",
    "▁w",
    "or",
    "ld",
    "▁wor",
    "▁world",
    "▁▁",
    "▁▁▁",
    "bc",
    "ca",
    "▁c",
    "é",
    "▁é",
    "lo",
    "el",
    "hel",
    "▁he",
    "▁hel",
]


def spm_tokenizer(add_space_prefix=True, add_bos=None) -> dict:
    tokens = ["<unk>", "<s>", "</s>"] + [f"<0x{b:02X}>" for b in range(256)] + SPM_PIECES
    types = [2, 3, 3] + [6] * 256 + [1] * len(SPM_PIECES)
    # Scores rank pieces by position, longer pieces a little lower: some merges tie.
    scores = [0.0] * 259 + [-float(i) - (0.5 if len(p) > 2 else 0.0) for i, p in enumerate(SPM_PIECES)]
    tokens += ["<|user|>", "<ctrl>", "[UNUSED]"]
    types += [4, 3, 5]
    scores += [0.0, 0.0, 0.0]
    spec = dict(
        tokenizer_model="llama",
        tokens=tokens,
        types=types,
        scores=scores,
        bos_token_id=1,
        eos_token_id=2,
        unk_token_id=0,
        add_space_prefix=add_space_prefix,
        chat_template="{{ bos_token }}{% for m in messages %}[{{ m['role'] }}] {{ m['content'] }}"
        "{{ eos_token }}{% endfor %}",
    )
    if add_bos is not None:
        spec["add_bos_token"] = add_bos
    return spec


SPM_TEXTS = [
    "hello world",
    " hello",
    "abc abcab",
    "<s>hello</s>",
    "hello<|user|>world",
    "héllo zz",
    "  a",
    "a<ctrl>b",
    "[UNUSED]",
    "",
    "   ",
    "a b  c",
    "hello\nworld",
    "cabc é é",
    "<|user|>",
    "<ctrl> hello",
    "hello<ctrl>",
    "😀 ok",
    "a<unk>b",
    "<unk>",
    "hello <s> world",
]

# Derived by hand from the vocabulary above (ids: <unk> 0, <s> 1, </s> 2, <0xNN> 3 + NN, pieces from 259).
SPM_BY_HAND = {
    "hello world": [279, 284],  # ▁hello ▁world
    "abc abcab": [274, 274, 271],  # ▁abc ▁abc ab
    "<s>hello</s>": [1, 278, 2],  # <s> hello </s>: no "▁" after a token, only at the input's start
    "hello<|user|>world": [279, 297, 267, 281, 282],  # ▁hello <|user|> w or ld
    "héllo zz": [259, 263, 290, 277, 259, 125, 125],  # ▁ h é llo ▁ <0x7A> <0x7A>
    "  a": [259, 270],  # ▁ ▁a: "▁a" outscores "▁▁"
    "[UNUSED]": [259] + [3 + b for b in b"[UNUSED]"],  # unused tokens are never matched
}

# The strings whose ids, ids with special tokens and decodings are compared with transformers.
SPM_HF_TEXTS = SPM_TEXTS + list(SPM_BY_HAND)


# ---- small byte-level ("gpt2") vocabularies ----

BYTE_LEVEL_TOKENS = ["a", "b", "c", "Ġ", "1", "2", "ab", "Ġa", "Ġab", "abc", "<|end|>", "<raw tok>", "<|u|>", "12"]
BYTE_LEVEL_MERGES = ["a b", "Ġ a", "Ġa b", "ab c", "1 2"]


def byte_level_tokenizer(pre="gpt-2", **extra) -> dict:
    types = [1] * len(BYTE_LEVEL_TOKENS)
    types[10], types[11], types[12] = 3, 3, 4  # <|end|>, "<raw tok>" (has a real space) control; <|u|> user
    return dict(
        tokenizer_model="gpt2",
        tokens=BYTE_LEVEL_TOKENS,
        types=types,
        merges=BYTE_LEVEL_MERGES,
        pre=pre,
        eos_token_id=10,
        bos_token_id=10,
        **extra,
    )


# The pre-tokenizers and strings whose ids (without special tokens) are compared with transformers.
BYTE_LEVEL_HF_PRES = ("gpt-2", "qwen2", "llama-bpe")
BYTE_LEVEL_HF_TEXTS = ["ab abc", "abc<|end|>a<|u|>", "<raw tok>", "12 12 123", "ab\n\n  abc", "cab'sab"]


# ---- the files compared with transformers (tools/make_gguf_tokenizer_refs.py) ----

RECIPES = {
    "spm": dict(tokenizer=spm_tokenizer()),
    **{f"byte-level-{pre}": dict(tokenizer=byte_level_tokenizer(pre)) for pre in BYTE_LEVEL_HF_PRES},
    "gemma3": dict(
        arch="gemma3",
        metadata=[
            ("add_key_length", 8),
            ("add_value_length", 8),
            ("add_sliding_window", 512),
            ("add_rope_freq_base", 1e6),
            ("add_layer_norm_rms_eps", 1e-6),
        ],
        tokenizer=byte_level_tokenizer(),
    ),
    # Qwen3's head_dim is not hidden / heads; transformers takes its default (128), not the key.
    "qwen3": dict(
        arch="qwen3",
        metadata=[("add_key_length", 128)],
        tokenizer=byte_level_tokenizer(),
        tensors={"token_embd.weight": (14, 16), "output.weight": (14, 16)},
    ),
}


def write_synthetic(directory, name):
    """RECIPES[name] written to directory / f"{name}.gguf"."""
    recipe = dict(RECIPES[name])
    if "tensors" in recipe:
        recipe["tensors"] = {key: np.zeros(shape, np.float32) for key, shape in recipe["tensors"].items()}
    return write_gguf(directory / f"{name}.gguf", **recipe)


def recipe_digest(name) -> str:
    """A fingerprint of RECIPES[name] (and the base metadata), independent of gguf-py's version."""
    recipe = {"arch": "llama", "metadata": [], "base": BASE_METADATA, **RECIPES[name]}
    text = json.dumps(recipe, sort_keys=True, ensure_ascii=True, default=list)
    return hashlib.sha256(text.encode()).hexdigest()
