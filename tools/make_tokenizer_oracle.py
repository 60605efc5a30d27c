"""llama.cpp as a tokenizer oracle for the GGUF tokenizer references (tools/make_gguf_tokenizer_refs.py).

Builds a small C++ program against a llama.cpp build tree and talks to it over a pipe, so that one
process answers thousands of questions about a vocabulary: llama_tokenize (with and without the
special tokens the vocabulary adds; special tokens in the text are parsed, as in chat), llama_detokenize
(with and without rendering special tokens), every token's attributes and end-of-generation flag,
and the pieces `unicode_regex_split` cuts a text into for a list of regexes (the pre-tokenizer splits).

    oracle = Oracle.build(Path("/tmp/llamacpp"))   # source tree with build/ made by cmake
    with oracle.open(Path("vocab.gguf")) as vocab:
        vocab.tokenize("Hello")                     # {"ids": [...], "ids_special": [...], ...}

The llama.cpp tree: extract its source, then
    cmake -B build -DGGML_NATIVE=OFF -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF \\
        -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_APP=OFF && cmake --build build --target llama -j2
"""

from __future__ import annotations

import json
import subprocess
from dataclasses import dataclass
from pathlib import Path

# Questions are one line each, every string "x" and its UTF-8 in hex (so any text, empty or with
# newlines, is one word); answers are one JSON line each, strings again as hex (detokenized bytes need
# not be valid UTF-8).
ORACLE_SOURCE = r"""
#include "llama.h"
#include "unicode.h"
#include <cstdio>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

static std::string unhex(const std::string & h) {  // "x" then hex digits
    std::string out;
    for (size_t i = 1; i + 1 < h.size(); i += 2) out.push_back((char) std::stoi(h.substr(i, 2), nullptr, 16));
    return out;
}
static std::string hex(const std::string & s) {
    static const char * d = "0123456789abcdef";
    std::string out;
    for (unsigned char c : s) { out.push_back(d[c >> 4]); out.push_back(d[c & 15]); }
    return out;
}
static std::vector<llama_token> tokenize(const llama_vocab * v, const std::string & text, bool add_special) {
    std::vector<llama_token> ids(text.size() + 8);
    int n = llama_tokenize(v, text.data(), text.size(), ids.data(), ids.size(), add_special, true);
    if (n < 0) { ids.resize(-n); n = llama_tokenize(v, text.data(), text.size(), ids.data(), ids.size(), add_special, true); }
    ids.resize(n);
    return ids;
}
static std::string detokenize(const llama_vocab * v, const std::vector<llama_token> & ids, bool unparse) {
    std::string out(ids.size() * 16 + 16, '\0');
    int n = llama_detokenize(v, ids.data(), ids.size(), &out[0], out.size(), false, unparse);
    if (n < 0) { out.resize(-n); n = llama_detokenize(v, ids.data(), ids.size(), &out[0], out.size(), false, unparse); }
    out.resize(n);
    return out;
}
static std::string ids_json(const std::vector<llama_token> & ids) {
    std::string s = "[";
    for (size_t i = 0; i < ids.size(); i++) s += (i ? "," : "") + std::to_string(ids[i]);
    return s + "]";
}

int main(int argc, char ** argv) {
    llama_log_set([](ggml_log_level, const char *, void *) {}, nullptr);
    llama_backend_init();
    llama_model * model = nullptr;
    const llama_vocab * v = nullptr;
    std::string line;
    while (std::getline(std::cin, line)) {
        std::istringstream in(line);
        std::string cmd;
        in >> cmd;
        if (cmd == "load") {
            std::string path; in >> path;
            if (model) llama_model_free(model);
            auto params = llama_model_default_params();
            params.vocab_only = true;
            model = llama_model_load_from_file(unhex(path).c_str(), params);
            if (!model) { printf("{\"error\": \"load failed\"}\n"); fflush(stdout); continue; }
            v = llama_model_get_vocab(model);
            printf("{\"n_tokens\": %d, \"bos\": %d, \"eos\": %d, \"sep\": %d, \"add_bos\": %s, \"add_eos\": %s, \"add_sep\": %s}\n",
                llama_vocab_n_tokens(v), llama_vocab_bos(v), llama_vocab_eos(v), llama_vocab_sep(v),
                llama_vocab_get_add_bos(v) ? "true" : "false", llama_vocab_get_add_eos(v) ? "true" : "false",
                llama_vocab_get_add_sep(v) ? "true" : "false");
        } else if (cmd == "tokens") {
            std::string attrs = "[", eog = "[";
            for (int i = 0; i < llama_vocab_n_tokens(v); i++) {
                attrs += (i ? "," : "") + std::to_string((int) llama_vocab_get_attr(v, i));
                if (llama_vocab_is_eog(v, i)) eog += (eog.size() > 1 ? "," : "") + std::to_string(i);
            }
            printf("{\"attrs\": %s], \"eog\": %s]}\n", attrs.c_str(), eog.c_str());
        } else if (cmd == "tokenize") {
            std::string h; in >> h;
            const std::string text = unhex(h);
            auto ids = tokenize(v, text, false), ids_special = tokenize(v, text, true);
            printf("{\"ids\": %s, \"ids_special\": %s, \"decoded\": \"%s\", \"decoded_skip\": \"%s\", \"decoded_special\": \"%s\", \"decoded_special_skip\": \"%s\"}\n",
                ids_json(ids).c_str(), ids_json(ids_special).c_str(),
                hex(detokenize(v, ids, true)).c_str(), hex(detokenize(v, ids, false)).c_str(),
                hex(detokenize(v, ids_special, true)).c_str(), hex(detokenize(v, ids_special, false)).c_str());
        } else if (cmd == "detokenize") {
            std::vector<llama_token> ids;
            int id;
            while (in >> id) ids.push_back(id);
            printf("{\"decoded\": \"%s\", \"decoded_skip\": \"%s\"}\n", hex(detokenize(v, ids, true)).c_str(), hex(detokenize(v, ids, false)).c_str());
        } else if (cmd == "split") {
            std::string h; in >> h;
            const std::string text = unhex(h);
            std::vector<std::string> regexes;
            while (in >> h) regexes.push_back(unhex(h));
            std::string s = "[";
            for (const auto & piece : unicode_regex_split(text, regexes, false)) {
                s += (s.size() > 1 ? "," : "") + std::to_string(unicode_cpts_from_utf8(piece).size());
            }
            printf("{\"lengths\": %s]}\n", s.c_str());
        }
        fflush(stdout);
    }
    return 0;
}
"""


@dataclass
class Oracle:
    binary: Path

    @classmethod
    def build(cls, llama_cpp: Path, out_dir: Path = Path("/tmp/wisp-tokenizer-oracle")) -> Oracle:
        """Compile the oracle against `llama_cpp` (a source tree whose build/ holds libllama)."""
        out_dir.mkdir(parents=True, exist_ok=True)
        source, binary = out_dir / "oracle.cpp", out_dir / "oracle"
        source.write_text(ORACLE_SOURCE, encoding="utf-8")
        (library,) = {path.parent for path in (llama_cpp / "build").rglob("libllama.so")}
        ggml_libraries = {path.parent for path in (llama_cpp / "build").rglob("libggml*.so")}
        subprocess.run(
            [
                "g++",
                "-std=c++17",
                "-O1",
                str(source),
                f"-I{llama_cpp / 'include'}",
                f"-I{llama_cpp / 'src'}",
                f"-I{llama_cpp / 'ggml' / 'include'}",
                f"-L{library}",
                *(f"-L{path}" for path in ggml_libraries),
                "-lllama",
                "-lggml",
                "-lggml-base",
                *(f"-Wl,-rpath,{path}" for path in {library, *ggml_libraries}),
                "-o",
                str(binary),
            ],
            check=True,
        )
        return cls(binary)

    def open(self, vocab: Path) -> OracleSession:
        return OracleSession(self.binary, vocab)


class OracleSession:
    """One running oracle with one vocabulary loaded."""

    def __init__(self, binary: Path, vocab: Path):
        self._process = subprocess.Popen(
            [str(binary)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, encoding="ascii"
        )
        self.info = self._ask(f"load {_hex(str(vocab))}")
        if "error" in self.info:
            raise RuntimeError(f"llama.cpp cannot load {vocab}")

    def __enter__(self) -> OracleSession:
        return self

    def __exit__(self, *exc) -> None:
        self._process.stdin.close()
        self._process.wait()

    def _ask(self, line: str) -> dict:
        self._process.stdin.write(line + "\n")
        self._process.stdin.flush()
        answer = self._process.stdout.readline()
        if not answer:
            raise RuntimeError(f"the oracle died on {line[:80]!r}")
        return json.loads(answer)

    def tokenize(self, text: str) -> dict:
        """ids without / with the special tokens the vocabulary adds, and each decoded with and
        without special tokens rendered (llama_detokenize's unparse_special)."""
        answer = self._ask(f"tokenize {_hex(text)}")
        return {key: _unhex(value) if key.startswith("decoded") else value for key, value in answer.items()}

    def detokenize(self, ids: list[int]) -> dict:
        answer = self._ask("detokenize " + " ".join(map(str, ids)))
        return {key: _unhex(value) for key, value in answer.items()}

    def tokens(self) -> dict:
        """{"attrs": llama_token_attr bits per token, "eog": the end-of-generation ids}."""
        return self._ask("tokens")

    def split(self, text: str, regexes: list[str]) -> list[int]:
        """The code point lengths of the pieces unicode_regex_split cuts `text` into."""
        return self._ask(" ".join(["split", _hex(text), *map(_hex, regexes)]))["lengths"]


def _hex(text: str) -> str:
    return "x" + text.encode("utf-8").hex()


def _unhex(text: str) -> str:
    # Invalid UTF-8 (a lone byte token) comes back with U+FFFD, as Python's decoder shows it.
    return bytes.fromhex(text).decode("utf-8", errors="replace")
