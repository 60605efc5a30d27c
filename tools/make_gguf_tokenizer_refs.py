r"""Tokenizer and config references for the real GGUF models, from HF transformers' GGUF loader.

For each model: ~40 varied strings -> ids (with and without special tokens) and the decoded text,
2-3 conversations rendered by the chat template stored in the GGUF (text and ids), and the config
numbers transformers' AutoConfig derives from the file. tests/test_gguf_tokenizer.py checks
py_engine's GGUF tokenizer and config against these. Needs transformers>=5, gguf and tokenizers.

One known disagreement: transformers has no split for `tokenizer.ggml.pre` "smollm" and falls back
to GGUF-less GPT-2 splitting, while llama.cpp (and SmolLM's own tokenizer.json) first cut every
\p{N} character off on its own. The two differ where a space precedes a non-ASCII number such as
"①". We follow llama.cpp; for those strings the file also records `ids_split_fixed`: the ids of
transformers' own tokenizer with the pre-tokenizer replaced by llama.cpp's split (see SPLIT_FIXES).

It also writes synthetic.json: transformers' answers for the small synthetic GGUF files of
tests/gguf_synthetic.py (a SentencePiece vocabulary, byte-level ones, Gemma3 and Qwen3 configs),
which it builds in a temporary directory exactly as the tests do. The tests then need neither
transformers nor torch (transformers' GGUF loader imports torch).

    python tools/make_gguf_tokenizer_refs.py [--model NAME=PATH.gguf ...] [--only models|synthetic]

Without --model, the catalog models come from py_engine.model_cache.ensure_model (downloaded on
first use).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))  # gguf_synthetic: the synthetic files, shared with the tests
OUT_DIR = ROOT / "tests" / "fixtures" / "gguf_tokenizer"
MODELS = ("smollm2-135m-instruct", "qwen2.5-coder-0.5b-instruct")

TEXTS = [
    "",
    " ",
    "Hello world",
    "Hello, world! How are you today?",
    "I'm, you'll, they've, DON'T, She'S, it'd",
    "The quick brown fox jumps over the lazy dog.",
    "def f(x):\n    if x:\n        return x * 2\n    return None\n",
    "for (int i = 0; i < n; ++i) { sum += a[i]; }",
    "const add = (a, b) => a + b; // arrow\nconsole.log(add(1, 2));",
    "SELECT name, COUNT(*) FROM users WHERE age >= 18 GROUP BY name;",
    '<div class="x">&amp; &lt;tag&gt;</div>',
    "1234567 3.14159 12 345",
    "2024-01-15T08:30:00Z",
    "$1,000,000.99 and 50% off; 0x1F, 1e-9, -42",
    "x² + y³ = z½ ① Ⅻ ٣",
    "é ñ Ångström naïve café façade résumé",
    "e\u0301 vs \u00e9 (combining accent)",
    "日本語のテキストと中文混在",
    "한국어 텍스트",
    "Привет, мир! Ελληνικά",
    "مرحبا بالعالم",
    "नमस्ते दुनिया",
    "👩‍👩‍👧‍👦 🏳️‍🌈 👍🏽👋🏿 😀🤖🎉",
    "a\tb\t\tc",
    "   ",
    "\n\n\n",
    "line one\r\nline two\r\n",
    "trailing spaces   ",
    "   leading spaces",
    "a  b   c    d",
    "non\u00a0breaking\u2009thin\u3000ideographic",
    "zero\u200bwidth and soft\u00adhyphen",
    "ﬁ ligature, ＡＢＣ fullwidth",
    "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n",
    "x<|endoftext|>y",
    "<|im_end|><|im_end|>",
    " <|im_start|> spaced <|im_end|> ",
    '<tool_call>\n{"name": "f"}\n</tool_call>',
    "<|fim_prefix|>def f():<|fim_suffix|>\n<|fim_middle|>",
    "<repo_name>wisp<file_sep><filename>a.py",
    "<|not_a_token|> <s> </s> [INST]",
    "In 1998, Ångström-level precision wasn't common; today it's routine. The café served "
    "3.14159 pies to 1234567 guests 😀! They've said: \"DON'T PANIC\" — naïve résumé.  \n",
]

CONVERSATIONS = [
    [{"role": "user", "content": "What is 2+2?"}],
    [
        {"role": "system", "content": "You are terse. Réponds en français."},
        {"role": "user", "content": "Write a Python function that reverses a string. 🤔"},
        {"role": "assistant", "content": "def rev(s):\n    return s[::-1]"},
        {"role": "user", "content": "Thanks! Now in C?"},
    ],
    [
        {"role": "user", "content": "Hi"},
        {"role": "assistant", "content": "Hello! How can I help?"},
        {"role": "user", "content": "  spaces  and\ttabs\n\n"},
    ],
]

CONFIG_KEYS = (
    "vocab_size",
    "hidden_size",
    "intermediate_size",
    "num_hidden_layers",
    "num_attention_heads",
    "num_key_value_heads",
    "head_dim",
    "rms_norm_eps",
    "max_position_embeddings",
    "tie_word_embeddings",
    "bos_token_id",
    "eos_token_id",
    "model_type",
)


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as file:
        for block in iter(lambda: file.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def config_reference(path: Path) -> dict:
    from transformers import AutoConfig

    config = AutoConfig.from_pretrained(path.parent, gguf_file=path.name).to_dict()
    out = {key: config.get(key) for key in CONFIG_KEYS}
    if out["head_dim"] is None:
        out["head_dim"] = config["hidden_size"] // config["num_attention_heads"]
    params = config.get("rope_parameters") or {}
    out["rope_theta"] = params.get("rope_theta", config.get("rope_theta"))
    out["rope_type"] = params.get("rope_type", "default")
    return out


def split_fixes() -> dict:
    """tokenizer.ggml.pre -> the pre-tokenizer llama.cpp applies, where transformers differs."""
    from tokenizers import pre_tokenizers

    return {
        "smollm": pre_tokenizers.Sequence(
            [
                pre_tokenizers.Digits(individual_digits=True),
                pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True),
            ]
        ),
    }


def pre_type(path: Path) -> str | None:
    from gguf import GGUFReader

    field = GGUFReader(path).fields.get("tokenizer.ggml.pre")
    return None if field is None else field.contents()


def reference(path: Path) -> dict:
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(path.parent, gguf_file=path.name)
    pre = pre_type(path)
    fixed = None
    if pre in split_fixes():
        fixed = AutoTokenizer.from_pretrained(path.parent, gguf_file=path.name)
        fixed.backend_tokenizer.pre_tokenizer = split_fixes()[pre]
    encode = []
    for text in TEXTS:
        ids = tok.encode(text, add_special_tokens=False)
        entry = {
            "text": text,
            "ids": ids,
            "ids_with_special": tok.encode(text, add_special_tokens=True),
            "decoded": tok.decode(ids),
            "decoded_skip_special": tok.decode(ids, skip_special_tokens=True),
        }
        if fixed is not None and fixed.encode(text, add_special_tokens=False) != ids:
            entry["ids_split_fixed"] = fixed.encode(text, add_special_tokens=False)
            entry["ids_with_special_split_fixed"] = fixed.encode(text, add_special_tokens=True)
        encode.append(entry)
    chat = []
    for messages in CONVERSATIONS:
        text = tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
        ids = tok.apply_chat_template(messages, tokenize=True, add_generation_prompt=True, return_dict=False)
        if hasattr(ids, "keys"):  # some versions return a BatchEncoding
            ids = ids["input_ids"]
        entry = {"messages": messages, "text": text, "ids": list(ids)}
        if fixed is not None and fixed.encode(text, add_special_tokens=False) != entry["ids"]:
            entry["ids_split_fixed"] = fixed.encode(text, add_special_tokens=False)
        chat.append(entry)
    return {
        "file": path.name,
        "tokenizer_ggml_pre": pre,
        "sha256": sha256(path),
        "transformers": __import__("transformers").__version__,
        "special": {name: getattr(tok, name) for name in ("bos_token", "eos_token", "unk_token", "pad_token")},
        "config": config_reference(path),
        "encode": encode,
        "chat": chat,
    }


def hf_rope_theta(hf) -> float:
    """transformers 5 keeps rope_theta in rope_parameters, per layer type for Gemma3."""
    params = getattr(hf, "rope_parameters", None) or {}
    if "full_attention" in params:
        params = params["full_attention"]
    return params.get("rope_theta", getattr(hf, "rope_theta", None))


SYNTHETIC_CONFIG_KEYS = (
    "hidden_size",
    "intermediate_size",
    "num_hidden_layers",
    "num_attention_heads",
    "num_key_value_heads",
    "head_dim",
    "rms_norm_eps",
    "vocab_size",
    "tie_word_embeddings",
    "max_position_embeddings",
    "sliding_window",
)


def synthetic_reference() -> dict:
    """transformers' ids, decodings and config numbers for the files in gguf_synthetic.RECIPES."""
    import gguf_synthetic as syn
    import transformers

    def encode_entry(hf, text):
        ids = hf.encode(text, add_special_tokens=False)
        return {
            "text": text,
            "ids": ids,
            "ids_with_special": hf.encode(text, add_special_tokens=True),
            "decoded": hf.decode(ids),
            "decoded_skip_special": hf.decode(ids, skip_special_tokens=True),
        }

    files = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name in syn.RECIPES:
            path = syn.write_synthetic(Path(tmp), name)
            entry = {"recipe_sha256": syn.recipe_digest(name)}
            if name == "spm":
                hf = transformers.AutoTokenizer.from_pretrained(tmp, gguf_file=path.name)
                entry["encode"] = [encode_entry(hf, text) for text in syn.SPM_HF_TEXTS]
            elif name.startswith("byte-level-"):
                hf = transformers.AutoTokenizer.from_pretrained(tmp, gguf_file=path.name)
                entry["encode"] = [
                    {"text": text, "ids": hf.encode(text, add_special_tokens=False)} for text in syn.BYTE_LEVEL_HF_TEXTS
                ]
            else:
                hf = transformers.AutoConfig.from_pretrained(tmp, gguf_file=path.name)
                entry["config"] = {key: getattr(hf, key, None) for key in SYNTHETIC_CONFIG_KEYS}
                entry["config"]["rope_theta"] = hf_rope_theta(hf)
            files[name] = entry
    return {"transformers": transformers.__version__, "files": files}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--model",
        action="append",
        default=[],
        metavar="NAME=PATH.gguf",
        help="a model and its file (default: the catalog models via ensure_model)",
    )
    parser.add_argument(
        "--only", choices=("models", "synthetic"), help="write only the real models' references, or only synthetic.json"
    )
    args = parser.parse_args(argv)
    OUT_DIR.mkdir(parents=True, exist_ok=True)
    if args.only != "synthetic":
        if args.model:
            models = dict(spec.split("=", 1) for spec in args.model)
        else:
            sys.path.insert(0, str(ROOT))
            from py_engine.model_cache import ensure_model

            models = {name: ensure_model(name) for name in MODELS}
        for name, path in models.items():
            data = reference(Path(path))
            out = OUT_DIR / f"{name}.json"
            out.write_text(json.dumps(data, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
            print(f"{out}: {len(data['encode'])} strings, {len(data['chat'])} conversations")
    if args.only != "models":
        data = synthetic_reference()
        out = OUT_DIR / "synthetic.json"
        out.write_text(json.dumps(data, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
        print(f"{out}: {len(data['files'])} synthetic files")
    return 0


if __name__ == "__main__":
    sys.exit(main())
