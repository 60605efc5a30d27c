"""Small synthetic GGUF files, shared by tests/test_gguf_tokenizer.py and
tools/make_gguf_tokenizer_refs.py (which records llama.cpp's tokenization and transformers' configs
for the files in RECIPES into tests/fixtures/gguf_tokenizer/synthetic.json, so the tests need
neither llama.cpp nor transformers).

A recipe is write_gguf's arguments with tensors given as shapes (float32 zeros); recipe_digest
fingerprints one (metadata_digest a metadata dict) so that a test notices a recipe changed after
the references were made.
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


def add_tokenizer(writer, tokenizer: dict) -> None:
    """A tokenizer dict: GGUFWriter adder names (tokens, types, scores, merges, pre, bos_token_id,
    ...) or full metadata keys (tokenizer.ggml.*, as tokenizer_vocab.gguf_metadata gives them)."""
    for key, value in tokenizer.items():
        if key.startswith("tokenizer.ggml."):
            add_metadata_value(writer, key, value)
        elif key == "tokens":
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


def write_gguf(path, arch="llama", metadata=(), tensors=None, tokenizer=None):
    """A small GGUF: `metadata` as (adder name, value) pairs of GGUFWriter, `tokenizer` a dict."""
    writer = gguf.GGUFWriter(str(path), arch)
    for adder, value in {**dict(BASE_METADATA), **dict(metadata)}.items():
        getattr(writer, adder)(value)
    add_tokenizer(writer, tokenizer or {})
    for name, array in (tensors or {"token_embd.weight": np.zeros((8, 16), np.float32)}).items():
        writer.add_tensor(name, array)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def add_metadata_value(writer, key: str, value) -> None:
    """One metadata key with GGUF's usual type for it: uint32 ids, float32 scores, int32 token
    types, uint8 charsmap, strings."""
    types = gguf.GGUFValueType
    if isinstance(value, list):
        item = {"tokenizer.ggml.scores": types.FLOAT32, "tokenizer.ggml.token_type": types.INT32}.get(key)
        item = types.UINT8 if key.endswith("charsmap") else item or types.STRING
        writer.add_key_value(key, value, types.ARRAY, sub_type=item)
    elif isinstance(value, bool):
        writer.add_bool(key, value)
    elif isinstance(value, int):
        writer.add_uint32(key, value)
    else:
        writer.add_string(key, value)


def write_metadata(path, metadata: dict, arch="llama"):
    """A small GGUF holding `metadata` (key -> value, e.g. tokenizer_vocab.gguf_metadata's) with
    GGUF's usual types: uint32 ids, float32 scores, int32 token types, uint8 charsmap."""
    writer = gguf.GGUFWriter(str(path), arch)
    for adder, value in BASE_METADATA:
        getattr(writer, adder)(value)
    for key, value in metadata.items():
        add_metadata_value(writer, key, value)
    writer.add_tensor("token_embd.weight", np.zeros((8, 16), np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


# ---- a SentencePiece ("llama") vocabulary with scores and token types ----

SPM_PIECES = (
    "▁ a b c h e l o w r d ▁a ab ▁ab abc ▁abc he ll llo hello ▁hello ▁w or ld ▁wor ▁world ▁▁ ▁▁▁ bc ca ▁c é ▁é lo el"
    " hel ▁he ▁hel"
).split()


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
    " hello": [259, 279],  # ▁ ▁hello: "▁" is prepended even to a leading space
    "abc abcab": [274, 274, 271],  # ▁abc ▁abc ab
    "<s>hello</s>": [1, 279, 2],  # <s> ▁hello </s>: "▁" is prepended after every special token too
    "hello<|user|>world": [279, 297, 284],  # ▁hello <|user|> ▁world
    "héllo zz": [259, 263, 290, 277, 259, 125, 125],  # ▁ h é llo ▁ <0x7A> <0x7A>
    "  a": [285, 270],  # ▁▁ ▁a: of "▁▁▁a", "▁▁" (score -26) merges before "▁a" (-11) can
    "[UNUSED]": [259] + [3 + b for b in b"[UNUSED]"],  # unused tokens are never matched
}

# The strings whose ids and decodings are compared with llama.cpp.
SPM_REFERENCE_TEXTS = SPM_TEXTS + [text for text in SPM_BY_HAND if text not in SPM_TEXTS]


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


# The pre-tokenizers and strings whose ids are compared with llama.cpp.
BYTE_LEVEL_PRES = ("gpt-2", "qwen2", "llama-bpe", "smollm", "default")
BYTE_LEVEL_TEXTS = ["ab abc", "abc<|end|>a<|u|>", "<raw tok>", "12 12 123", "ab\n\n  abc", "cab'sab", " ab . ab"]


# ---- a Gemma 4 ("gemma4") vocabulary: BPE over raw UTF-8, spaces as "▁", <0xNN> byte tokens ----

# (text, GGUF token type): Gemma 4's own special tokens, a visible user-defined one (the converter
# types <|"|> so), </s> as a normal token, and runs of newlines: "\n\n" is merged from "\n"s, "\n\n\n"
# is not (llama.cpp takes such a run whole, transformers merges what it can).
GEMMA4_SPECIAL = [
    ("<pad>", 3),
    ("<eos>", 3),
    ("<bos>", 3),
    ("<unk>", 2),
    ("<mask>", 3),
    ("<|turn>", 3),
    ("<turn|>", 3),
    ("<|tool_response>", 3),
    ("</s>", 1),
    ('<|"|>', 4),
    ("\n", 1),
    ("\n\n", 1),
    ("\n\n\n", 1),
]
GEMMA4_PIECES = (
    "▁ a b c h e l o w r d é \t ▁a ab ▁ab abc ▁abc he ll llo hello ▁hello ▁w or ld ▁wor ▁world ▁▁ ▁▁▁ . ' s ▁."
).split(" ")
GEMMA4_MERGES = [
    "▁ a",
    "a b",
    "▁a b",
    "ab c",
    "▁ab c",
    "h e",
    "l l",
    "ll o",
    "he llo",
    "▁ hello",
    "▁ w",
    "o r",
    "l d",
    "▁w or",
    "▁wor ld",
    "▁ ▁",
    "▁▁ ▁",
    "▁ .",
    "\n \n",
]


def gemma4_tokenizer(size: int | None = None, **extra) -> dict:
    """The vocabulary as llama.cpp's converter writes a Gemma 4 one (tokenizer.ggml.model "gemma4"),
    padded with <unusedN> control tokens to `size` (a model's vocab_size). add_bos_token is False
    and pre "default": llama.cpp adds BOS and splits as Gemma 4 whatever the file says."""
    tokens = [text for text, _ in GEMMA4_SPECIAL] + [f"<0x{b:02X}>" for b in range(256)] + GEMMA4_PIECES
    types = [kind for _, kind in GEMMA4_SPECIAL] + [6] * 256 + [1] * len(GEMMA4_PIECES)
    if size is not None:
        tokens += [f"<unused{i}>" for i in range(size - len(tokens))]
        types += [3] * (size - len(types))
    return dict(
        tokenizer_model="gemma4",
        tokens=tokens,
        types=types,
        merges=GEMMA4_MERGES,
        pre="default",
        bos_token_id=2,
        eos_token_id=1,
        unk_token_id=3,
        pad_token_id=0,
        add_bos_token=False,
        **extra,
    )


GEMMA4_TEXTS = [
    "hello world",
    " hello",
    "  hello",
    "a  b   c    d",
    "abc abcab",
    "hello\nworld",
    "a\n\nb",
    "\n",
    "\n\n",
    "\n\n\n",
    "\n\n\n\n",
    "\n\n\n\n\n\n\n",
    "x\n\n\ny \n\n\n ",
    "\r\n\r\n",
    "\t\ta",
    "héllo zz",
    "😀 ok",
    "日本 x",
    "non\u00a0breaking\u3000space",
    "",
    " ",
    "   ",
    "<bos>hello<eos>",
    "<|turn>user\nhello<turn|>\n<|turn>model\n",
    'a<|"|>b <|"|>',
    "a</s>b",
    "<unk> <mask>",
    "<unused3>x",
    "<0x41><0xZZ>",
    "hello . it 's",
    "he said 'hello' .",
]


# Texts for llama.cpp's references: every pre-tokenizer rule, white space of all kinds, scripts,
# numbers, marks, emoji, special-token look-alikes.
GGUF_TEXTS = [
    "Hello world",
    " Hello",
    "  Hello  ",
    "",
    " ",
    "   ",
    "\n",
    "\n\n\n\n",
    "x",
    "  leading, trailing  ",
    "I'm, you'll, they've, DON'T, She'S, it'd, O'Neil's, 'tis",
    "1234567 3.14159 12 345 1,000,000 x² ½ ① Ⅻ ٣٤٥٦ ١٢٣٤٥٦٧",
    "12abc345def6789 x1234y",
    "a\tb\t\tc\n\n\nd\r\ne \r\n\r\n  f\n \n  g",
    "def f(x):\n    if x:\n        return x * 2\n    return None\n",
    "$1,000.99 + 50% <tag> ^x~y|z` @user #hash",
    "é ñ Ångström naïve café e\u0301 résumé",
    "日本語のテキストと中文混在 カタカナ ひらがな",
    "한국어 텍스트 ㄱㄴ",
    "Привет, мир! Ελληνικά ΑΒΓ αβγ",
    "مرحبا بالعالم ۔،",
    "नमस्ते दुनिया। ক্ষ",
    "👩‍👩‍👧‍👦 🏳️‍🌈 👍🏽 😀🤖",
    "non\u00a0breaking\u2009thin\u3000ideographic\u2028sep\u0085nel",
    "zero\u200bwidth soft\u00adhyphen \u001fUS\u001c",
    "ＡＢＣ ﬁ ｶﾀｶﾅ ｶﾞ …",
    "CamelCaseWord HTTPServer iPhone ÉCOLE Éclair",
    "<sentinel:12> IMGIMGABCZ tab\there  two  spaces    four",
    "snake_case-kebab.dot/slash\\back",
    "unassigned \U000e0080 \U0010ffff \ue000 private",
    "Þorður ı İ ß ẞ ǅungla Ⓐ",
    "ไทย ລາວ ខ្មែរ မြန်မာ ꩠ",
    "wait... what?! (yes) [no] {maybe} — “quotes” ‘single’",
    "!!!abc ?hello ...ok",
    "<s> hi</s>",
    "<|im_start|>user\nhi<|im_end|>\n",
    "<start_of_turn>user\nhi<end_of_turn>",
    "<bos>x<eos> <|begin_of_text|>y<|eot_id|>",
    "[INST] hi [/INST] <0x41> <unk> <mask> [MASK] [CLS] [SEP] <sep> <pad>",
    "x" * 50,
    "the quick brown fox . isn't it ? don 't ' quoted '",
]


# ---- the files compared with transformers (tools/make_gguf_tokenizer_refs.py) ----

RECIPES = {
    "spm": dict(tokenizer=spm_tokenizer()),
    **{f"byte-level-{pre}": dict(tokenizer=byte_level_tokenizer(pre)) for pre in BYTE_LEVEL_PRES},
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


def metadata_digest(metadata: dict) -> str:
    text = json.dumps(metadata, sort_keys=True, ensure_ascii=True)
    return hashlib.sha256(text.encode()).hexdigest()


def tokenizer_digest(spec: dict) -> str:
    """A fingerprint of a tokenizer dict (gemma4_tokenizer's)."""
    return hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest()


def recipe_digest(name) -> str:
    """A fingerprint of RECIPES[name] (and the base metadata), independent of gguf-py's version."""
    recipe = {"arch": "llama", "metadata": [], "base": BASE_METADATA, **RECIPES[name]}
    text = json.dumps(recipe, sort_keys=True, ensure_ascii=True, default=list)
    return hashlib.sha256(text.encode()).hexdigest()
