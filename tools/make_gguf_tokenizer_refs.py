r"""References for the GGUF tokenizer tests: llama.cpp's tokenization, transformers' configs and chat text.

llama.cpp is the reference for GGUF tokenization: every id and decoded text here comes from
llama_tokenize / llama_detokenize (tools/make_tokenizer_oracle.py builds a small program against a
llama.cpp build tree). Written to tests/fixtures/gguf_tokenizer/:

- <model>.json for the real catalog models: ~40 strings -> ids (with and without the special
  tokens llama.cpp adds) and their decodings, the end-of-generation ids, 2-3 conversations rendered
  by the GGUF's chat template (the text as transformers renders it, the ids from llama.cpp), and the
  config numbers transformers' AutoConfig derives from the file.
- synthetic.json for tests/gguf_synthetic.py's small files (built in a temporary directory exactly
  as the tests build them): llama.cpp's answers for the SentencePiece and byte-level ones,
  transformers' configs for the Gemma3 / Qwen3 ones.
- vocabs.json for the real vocabularies of tests/tokenizer_vocab.py in GGUF form (Mistral's
  SentencePiece, all-MiniLM-L6-v2's WordPiece, the test Unigram one, and a cut-down Llama-3
  byte-level one under every `tokenizer.ggml.pre` llama.cpp accepts).
- gemma4.json for gguf_synthetic's Gemma 4 vocabulary ("gemma4" tokenizer model): llama.cpp's
  answers for GEMMA4_TEXTS, and transformers' (the `tokenizers` pipeline transformers builds for
  Gemma: BPE with byte fallback, " " -> "▁") on the same vocabulary and merges.

    python tools/make_gguf_tokenizer_refs.py --llama-cpp /tmp/llamacpp [--model NAME=PATH.gguf ...]
        [--only models|synthetic|vocabs|gemma4]

Needs transformers>=5, gguf, tokenizers, torch (transformers' GGUF loader) and a llama.cpp build.
Without --model, the catalog models come from py_engine.model_cache.ensure_model.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "tests"), str(ROOT / "tools")]  # the test vocabularies and the oracle
OUT_DIR = ROOT / "tests" / "fixtures" / "gguf_tokenizer"
MODELS = ("smollm2-135m-instruct", "qwen2.5-coder-0.5b-instruct", "gemma-3-270m")
# Real vocabularies in GGUF form (tests/tokenizer_vocab.py), and the pre-tokenizer test texts.
VOCABS = ("mistral", "minilm", "unigram")
PRE_TEXTS = [
    "Hello world",
    "  leading, trailing  ",
    "I'm, you'll, they've, DON'T, She'S, it'd",
    "1234567 3.14159 12 345 x² ① ٣٤٥",
    "a\tb\t\tc\n\n\nd\r\ne \r\n\r\n  f",
    "$1,000.99 + 50% <tag> ^x~y|z`",
    "é ñ Ångström CamelCaseWord HTTPServer",
    "日本語のテキストと中文 한국어 Привет",
    "wait... what?! don 't ' quoted '",
    "<|begin_of_text|>x<|eot_id|>",
]

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


def reference(path: Path, oracle) -> dict:
    """llama.cpp's tokenization of TEXTS and the chat conversations (text rendered by transformers)."""
    from transformers import AutoTokenizer

    hf = AutoTokenizer.from_pretrained(path.parent, gguf_file=path.name)
    with oracle.open(path) as vocab:
        chat = []
        for messages in CONVERSATIONS if hf.chat_template else ():  # base models have none
            text = hf.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
            chat.append({"messages": messages, "text": text, "ids": vocab.tokenize(text)["ids"]})
        return {
            "file": path.name,
            "sha256": sha256(path),
            "transformers": __import__("transformers").__version__,
            "special": {name: getattr(hf, name) for name in ("bos_token", "eos_token", "unk_token", "pad_token")},
            "config": config_reference(path),
            "eog": vocab.tokens()["eog"],
            "encode": [{"text": text, **vocab.tokenize(text)} for text in TEXTS],
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


def synthetic_reference(oracle) -> dict:
    """llama.cpp's answers for the tokenizers and transformers' configs of gguf_synthetic.RECIPES."""
    import gguf_synthetic as syn
    import transformers

    files = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name in syn.RECIPES:
            path = syn.write_synthetic(Path(tmp), name)
            entry = {"recipe_sha256": syn.recipe_digest(name)}
            if name == "spm" or name.startswith("byte-level-"):
                texts = syn.SPM_REFERENCE_TEXTS if name == "spm" else syn.BYTE_LEVEL_TEXTS
                with oracle.open(path) as vocab:
                    entry["encode"] = [{"text": text, **vocab.tokenize(text)} for text in texts]
            else:
                hf = transformers.AutoConfig.from_pretrained(tmp, gguf_file=path.name)
                entry["config"] = {key: getattr(hf, key, None) for key in SYNTHETIC_CONFIG_KEYS}
                entry["config"]["rope_theta"] = hf_rope_theta(hf)
            files[name] = entry
    return {"transformers": transformers.__version__, "files": files}


def vocabs_reference(oracle) -> dict:
    """llama.cpp's tokenization of the real vocabularies in GGUF form (tokenizer_vocab.gguf_metadata),
    and of the cut-down Llama-3 one under each pre-tokenizer whose split suits byte-level text."""
    import gguf_synthetic as syn
    from tokenizer_vocab import gguf_metadata

    from py_engine.tokenizer.llama.pre import PRE_TOKENIZERS, SPLITS

    out = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name in VOCABS:
            metadata = gguf_metadata(name)
            with oracle.open(syn.write_metadata(Path(tmp) / f"{name}.gguf", metadata)) as vocab:
                encode = [{"text": text, **vocab.tokenize(text)} for text in syn.GGUF_TEXTS]
                out[name] = {
                    "metadata_sha256": syn.metadata_digest(metadata),
                    "eog": vocab.tokens()["eog"],
                    "encode": encode,
                }
        metadata = gguf_metadata("llama3-small")
        pres, answers = {}, []
        # SentencePiece-style splits (gemma4, whitespace) need a vocabulary of that kind.
        for pre in (name for name, value in PRE_TOKENIZERS.items() if SPLITS[value.split][1]):
            path = syn.write_metadata(Path(tmp) / "llama3.gguf", {**metadata, "tokenizer.ggml.pre": pre})
            with oracle.open(path) as vocab:
                answer = [[result["ids_special"], result["decoded"]] for result in map(vocab.tokenize, PRE_TEXTS)]
            if answer not in answers:
                answers.append(answer)
            pres[pre] = answers.index(answer)  # many pre-tokenizers tokenize alike
        out["llama3-small"] = {
            "metadata_sha256": syn.metadata_digest(metadata),
            "texts": PRE_TEXTS,
            "pre": pres,
            "answers": answers,
        }
    return out


def gemma4_hf_tokenizer(spec: dict):
    """The synthetic Gemma 4 vocabulary as a `tokenizers` tokenizer the way transformers' GemmaTokenizer
    builds one (tokenization_gemma.py); control tokens are its special added tokens, user-defined
    ones plain added tokens."""
    from tokenizers import AddedToken, Tokenizer, decoders, normalizers, pre_tokenizers
    from tokenizers.models import BPE

    vocab = {token: index for index, token in enumerate(spec["tokens"])}
    merges = [tuple(merge.split(" ", 1)) for merge in spec["merges"]]
    hf = Tokenizer(BPE(vocab=vocab, merges=merges, unk_token="<unk>", fuse_unk=True, byte_fallback=True))
    hf.normalizer = normalizers.Replace(" ", "\u2581")
    hf.pre_tokenizer = pre_tokenizers.Split(pattern=" ", behavior="merged_with_previous", invert=False)
    hf.decoder = decoders.Sequence([decoders.Replace("\u2581", " "), decoders.ByteFallback(), decoders.Fuse()])
    added = [(token, kind) for token, kind in zip(spec["tokens"], spec["types"]) if kind in (2, 3, 4)]
    hf.add_special_tokens([AddedToken(t, normalized=False, special=True) for t, kind in added if kind != 4])
    hf.add_tokens([AddedToken(t, normalized=False, special=False) for t, kind in added if kind == 4])
    return hf


def gemma4_reference(oracle) -> dict:
    """llama.cpp's and transformers' answers for gguf_synthetic's Gemma 4 vocabulary."""
    import gguf_synthetic as syn
    import tokenizers

    spec = syn.gemma4_tokenizer(320)
    hf = gemma4_hf_tokenizer(spec)
    with tempfile.TemporaryDirectory() as tmp:
        path = syn.write_gguf(Path(tmp) / "gemma4.gguf", tokenizer=spec)
        with oracle.open(path) as vocab:
            encode = []
            for text in syn.GEMMA4_TEXTS:
                ids = hf.encode(text, add_special_tokens=False).ids
                theirs = {"hf_ids": ids, "hf_decoded": hf.decode(ids, skip_special_tokens=False)}
                encode.append({"text": text, **vocab.tokenize(text), **theirs})
            return {
                "recipe_sha256": syn.tokenizer_digest(spec),
                "tokenizers": tokenizers.__version__,
                "load": vocab.info,
                "tokens": vocab.tokens(),
                "encode": encode,
            }


def write(name: str, data: dict) -> None:
    out = OUT_DIR / name
    out.write_text(json.dumps(data, ensure_ascii=False, separators=(",", ":")) + "\n", encoding="utf-8")
    print(f"{out}: {out.stat().st_size} bytes")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--llama-cpp", type=Path, required=True, help="llama.cpp source tree with build/")
    parser.add_argument(
        "--model",
        action="append",
        default=[],
        metavar="NAME=PATH.gguf",
        help="a model and its file (default: the catalog models via ensure_model)",
    )
    parser.add_argument(
        "--only", choices=("models", "synthetic", "vocabs", "gemma4"), help="write only these references"
    )
    args = parser.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    from make_tokenizer_oracle import Oracle

    oracle = Oracle.build(args.llama_cpp)
    OUT_DIR.mkdir(parents=True, exist_ok=True)
    if args.only in (None, "models"):
        if args.model:
            models = dict(spec.split("=", 1) for spec in args.model)
        else:
            from py_engine.model_cache import ensure_model

            models = {name: ensure_model(name) for name in MODELS}
        for name, path in models.items():
            write(f"{name}.json", reference(Path(path), oracle))
    if args.only in (None, "synthetic"):
        write("synthetic.json", synthetic_reference(oracle))
    if args.only in (None, "vocabs"):
        write("vocabs.json", vocabs_reference(oracle))
    if args.only in (None, "gemma4"):
        write("gemma4.json", gemma4_reference(oracle))
    return 0


if __name__ == "__main__":
    sys.exit(main())
