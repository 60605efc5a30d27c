r"""llama.cpp's pre-tokenizer tables and splits, for tests/fixtures/gguf_tokenizer/splits.json.

Reads src/llama-vocab.cpp of a llama.cpp source tree: for every `tokenizer.ggml.pre` name llama.cpp
accepts, the regexes its type splits with, whether pieces are spelled as GPT-2 bytes, and the flags
the name sets. Then asks llama.cpp's own unicode_regex_split (through tools/make_tokenizer_oracle.py)
how each distinct regex list cuts the test texts. tests/test_tokenizer_llama_split.py checks
py_engine/tokenizer/llama/pre.py against the table and llama/split.py against the cuts.

    python tools/make_tokenizer_split_refs.py --llama-cpp /tmp/llamacpp
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "tests"), str(ROOT / "tools")]
OUT = ROOT / "tests" / "fixtures" / "gguf_tokenizer" / "splits.json"

_LITERAL = re.compile(r'"((?:[^"\\]|\\.)*)"')
_ESCAPES = {"n": "\n", "r": "\r", "t": "\t", "\\": "\\", '"': '"', "'": "'"}
# What each `name = value;` in a pre-tokenizer branch of llama_vocab::impl::load means to us.
_FLAGS = {
    ("ignore_merges", "true"): "ignore_merges",
    ("add_bos", "true"): "add_bos",
    ("clean_spaces", "false"): "keep_spaces",
    ("escape_whitespaces", "true"): "escape_whitespaces",
    ("special_bos_id", "LLAMA_TOKEN_NULL"): "no_bos_token",
    ("add_sep", "true"): None,  # only for embeddings, not tokenization
    ("normalizer_opts.lowercase", "false"): None,  # the default
}


def _c_string(text: str) -> str:
    return re.sub(r"\\(.)", lambda m: _ESCAPES[m.group(1)], text)


def llama_cpp_tables(source: str) -> dict:
    """{"types": {TYPE: [regexes, byte_encode]}, "names": {name: [TYPE, sorted flags]}}."""
    start = source.index("struct llm_tokenizer_bpe : llm_tokenizer {")
    body = source[start : source.index("std::vector<std::string> regex_exprs;", start)]
    types = {}
    for block in re.split(r"\n\s*break;", body):
        cases = re.findall(r"case LLAMA_VOCAB_PRE_TYPE_(\w+):", block) or (["DEFAULT"] if "default:" in block else [])
        found = re.search(r"regex_exprs = \{(.*?)\};", block, re.S)
        if found and cases:
            code = re.sub(r"//[^\n]*", "", found.group(1))
            regexes = [_c_string(literal) for literal in _LITERAL.findall(code)]
            for case in cases:
                types[case] = [regexes, "byte_encode = false" not in block]
    load = source[source.index('tokenizer_pre == "default"') - 200 : source.index("unknown pre-tokenizer type")]
    names = {}
    for branch in re.finditer(r"if \(((?:\s*tokenizer_pre == \"[^\"]+\"\s*\|*)+)\)\s*\{(.*?)\n\s*\}", load, re.S):
        statements = branch.group(2)
        pre_type = re.search(r"pre_type = LLAMA_VOCAB_PRE_TYPE_(\w+);", statements).group(1)
        settings = re.findall(r"(\w+(?:\.\w+)?) = (true|false|LLAMA_TOKEN_NULL);", statements)
        flags = sorted(flag for setting in settings if (flag := _FLAGS[setting]))
        for name in re.findall(r'"([^"]+)"', branch.group(1)):
            names[name] = [pre_type, flags]
    return {"types": types, "names": names}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--llama-cpp", type=Path, required=True, help="llama.cpp source tree with build/")
    args = parser.parse_args(argv)
    from gguf_synthetic import GGUF_TEXTS, spm_tokenizer, write_gguf
    from make_tokenizer_oracle import Oracle

    tables = llama_cpp_tables((args.llama_cpp / "src" / "llama-vocab.cpp").read_text(encoding="utf-8"))
    oracle = Oracle.build(args.llama_cpp)
    distinct = {json.dumps(regexes): regexes for regexes, _ in tables["types"].values()}
    cuts = {}
    vocab = write_gguf(Path("/tmp/wisp-split-vocab.gguf"), tokenizer=spm_tokenizer())
    with oracle.open(vocab) as session:
        for key, regexes in distinct.items():
            # llama.cpp reports empty pieces where a regex matches nothing; they make no tokens.
            # (llama.cpp never splits empty text: Kimi-K2's splitter would fail on it.)
            cuts[key] = [[n for n in session.split(text, regexes) if n] if text else [] for text in GGUF_TEXTS]
    data = {**tables, "texts": GGUF_TEXTS, "cuts": cuts}
    OUT.write_text(json.dumps(data, ensure_ascii=False, separators=(",", ":")) + "\n", encoding="utf-8")
    print(f"{OUT}: {len(tables['names'])} names, {len(tables['types'])} types, {len(distinct)} regex lists")
    return 0


if __name__ == "__main__":
    sys.exit(main())
