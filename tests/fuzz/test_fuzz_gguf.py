"""Fuzzing GGUF files past their header: mutated small GGUF models through everything loading
does without a GPU (formats/model_files.read_model: the header, the config, the LongRoPE factors,
the tensors under HF names; then the tokenizer and a first encode / decode, as session.load_model
and the chat loop do). Seeds: one small file per architecture and tokenizer model (a few KB each,
written here with gguf-py), so that mutations land in the metadata and tensor infos that matter."""

import json
from pathlib import Path

import pytest
from gguf_mutate import mutate_model
from harness import fuzz, mutate_bytes

from py_engine.formats.gguf_tokenizer import tokenizer_from_gguf
from py_engine.formats.model_files import read_model
from py_engine.formats.source import ModelSource

gguf = pytest.importorskip("gguf")
np = pytest.importorskip("numpy")
from gguf_convert import write_metadata as write_dense_metadata  # noqa: E402
from gguf_convert_hybrids import write_metadata as write_hybrid_metadata  # noqa: E402
from gguf_synthetic import add_tokenizer, byte_level_tokenizer, spm_tokenizer  # noqa: E402
from tokenizer_vocab import gguf_metadata  # noqa: E402

FIXTURES = Path(__file__).parent.parent / "fixtures"
TEXT = "Hello world! <s> 12 345 héllo\n\t<|end|> 日本"


class BytesSource(ModelSource):
    """A GGUF model held in memory (what the browser's source does with range requests)."""

    kind = "gguf"
    label = "fuzz.gguf"

    def __init__(self, data: bytes):
        self.data = data

    def files(self):
        return ["fuzz.gguf"]

    def size(self, rel):
        return len(self.data)

    def read(self, rel, start, length):
        return self.data[start : start + length]

    def locate(self, rel):
        return "fuzz.gguf"


def load(data: bytes) -> None:
    """What loading a GGUF model does before the GPU: the model files, then the tokenizer, used once."""
    _cfg, _tensors, parsed = read_model(BytesSource(data))
    tokenizer = tokenizer_from_gguf(parsed)
    ids = tokenizer.encode(TEXT, add_special_tokens=True)
    tokenizer.decode(ids)
    tokenizer.decode(list(range(min(tokenizer.vocab_size, 40))), skip_special_tokens=True)
    stream = tokenizer.stream_decoder()
    for token in ids[:8]:
        stream.push(token)
    stream.flush()


# ---- seeds ----


def _write(path: Path, arch: str, metadata, tokenizer: dict, tensors: dict) -> bytes:
    writer = gguf.GGUFWriter(str(path), arch)
    metadata(writer)
    add_tokenizer(writer, tokenizer)
    for name, shape in tensors.items():
        writer.add_tensor(name, np.ones(shape, np.float32))  # RoPE factors must be positive
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path.read_bytes()


def _fixture_config(name: str) -> dict:
    return json.loads((FIXTURES / f"{name}-f32" / "config.json").read_text())


def _bert_vocab() -> dict:
    words = ["\u2581hello", "\u2581world", "\u2581a", "b", "c", "\u2581!", "\u25811", "2"]
    tokens = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *words]
    return {
        "tokenizer.ggml.model": "bert",
        "tokenizer.ggml.tokens": tokens,
        "tokenizer.ggml.token_type": [3, 2, 3, 3, 3] + [1] * len(words),
        "tokenizer.ggml.unknown_token_id": 1,
        "tokenizer.ggml.bos_token_id": 2,
        "tokenizer.ggml.seperator_token_id": 3,
        "tokenizer.ggml.padding_token_id": 0,
        "tokenizer.ggml.mask_token_id": 4,
        "tokenizer.ggml.normalizer.lowercase": True,
    }


def _unigram_vocab(pieces: int) -> dict:
    """The Unigram fixture as a GGUF `t5` vocabulary (with its charsmap), cut to its first pieces."""
    metadata = gguf_metadata("unigram")
    for key in ("tokenizer.ggml.tokens", "tokenizer.ggml.scores", "tokenizer.ggml.token_type"):
        metadata[key] = metadata[key][:pieces]
    return metadata


def _sizes(cfg: dict) -> dict:
    """Tensor sizes a config implies: hidden, head_dim, half the rotary dims."""
    head_dim = cfg.get("head_dim") or cfg["hidden_size"] // cfg["num_attention_heads"]
    rope = cfg.get("rope_parameters") or {}
    rotary = int(head_dim * rope.get("partial_rotary_factor", 1.0))
    return {"hidden": (cfg["hidden_size"],), "head": (head_dim,), "half_rotary": (rotary // 2,)}


def gguf_seeds(directory: Path) -> list[bytes]:
    """One small file per architecture family and tokenizer model (vectors only: matrices would
    make the files large and the mutations land in their zeros)."""
    seeds = []
    for arch, tokenizer, tensors in (
        ("llama", spm_tokenizer(), {"rope_freqs.weight": "half_rotary", "blk.0.attn_norm.weight": "hidden"}),
        ("qwen2", byte_level_tokenizer("qwen2"), {"blk.0.attn_q.bias": "hidden", "output_norm.weight": "hidden"}),
        ("gemma2", byte_level_tokenizer(), {"blk.1.post_ffw_norm.weight": "hidden"}),
        ("gemma3", byte_level_tokenizer("llama-bpe"), {"blk.0.attn_q_norm.weight": "head"}),
        ("phi3", byte_level_tokenizer("default"), {"rope_factors_long.weight": "half_rotary"}),
    ):
        cfg = _fixture_config(arch)
        if arch == "phi3":
            tensors["rope_factors_short.weight"] = "half_rotary"
        meta = lambda writer, arch=arch, cfg=cfg: write_dense_metadata(writer, arch, cfg)  # noqa: E731
        shapes = {name: _sizes(cfg)[size] for name, size in tensors.items()}
        seeds.append(_write(directory / f"{arch}.gguf", arch, meta, tokenizer, shapes))
    for arch, fixture in (("qwen35", "qwen3_5"), ("lfm2", "lfm2")):
        cfg = _fixture_config(fixture)
        meta = lambda writer, arch=arch, cfg=cfg: write_hybrid_metadata(writer, arch, cfg)  # noqa: E731
        shapes = {"blk.0.attn_norm.weight": _sizes(cfg)["hidden"], "blk.1.attn_q_norm.weight": _sizes(cfg)["head"]}
        seeds.append(_write(directory / f"{arch}.gguf", arch, meta, byte_level_tokenizer(arch), shapes))
    llama = lambda writer: write_dense_metadata(writer, "llama", _fixture_config("llama"))  # noqa: E731
    seeds.append(_write(directory / "bert.gguf", "llama", llama, _bert_vocab(), {}))
    seeds.append(_write(directory / "t5.gguf", "llama", llama, _unigram_vocab(200), {}))
    return seeds


@pytest.fixture(scope="module")
def seeds(tmp_path_factory):
    return gguf_seeds(tmp_path_factory.mktemp("gguf_seeds"))


def test_seeds_load(seeds):
    for data in seeds:
        load(data)
    assert max(map(len, seeds)) < 32 << 10


def mutate(seed: bytes, rng, seeds) -> bytes:
    """Mostly structural edits (past the header's framing), some byte-level ones."""
    if rng.random() < 0.7:
        return mutate_model(seed, rng)
    return mutate_bytes(seed, rng, seeds)


def test_fuzz_gguf(seeds):
    counts = fuzz("gguf", seeds, lambda seed, rng: mutate(seed, rng, seeds), load)
    assert counts["accepted"] > 0 and counts["typed_errors"] > 0
