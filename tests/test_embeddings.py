"""Embeddings (py_engine/embedding) on the tiny fixtures against transformers (tools/make_embedding_reference.py):
a BERT shaped like bge-small-en-v1.5 (CLS pooling from its sentence-transformers files, f16
weights) and the tiny Qwen3 as a decoder embedder (last-token pooling), on the f16 and the f32
paths; packing many texts into forwards; Qwen3-Embedding's checkpoint names; malformed encoder
folders as typed errors before any device; the API's inputs."""

import asyncio
import base64
import json
import shutil
import struct
from pathlib import Path

import numpy as np
import pytest
from gpu_harness import device

from py_engine.embedding import load_embedder, read_embedder_files
from py_engine.errors import ModelFileError, WispError

FIXTURES = Path(__file__).parent / "fixtures"
BERT = FIXTURES / "embed_bert_tiny"
QWEN3 = FIXTURES / "qwen3-f32"


def reference(directory: Path) -> dict:
    return json.loads((directory / "embedding_reference.json").read_text())


def vectors(encoded: list[str]) -> np.ndarray:
    return np.array([np.frombuffer(base64.b64decode(v), "<f4") for v in encoded], np.float64)


def embed(model, inputs, f16=False, **options):
    dev = device(f16)[0]
    if f16 and not dev.caps.shader_f16:
        pytest.skip("adapter has no shader-f16")

    async def run():
        embedder = await load_embedder(model, dev, **options)
        return embedder, await embedder.embed(inputs)

    return asyncio.run(run())


def assert_close(got, want, cosine=0.99999, atol=2e-5):
    got = np.array(got, np.float64)
    assert got.shape == want.shape
    np.testing.assert_allclose(np.linalg.norm(got, axis=1), 1.0, atol=1e-5)
    cosines = (got * want).sum(1)
    assert cosines.min() >= cosine, cosines
    np.testing.assert_allclose(got, want, atol=atol)


@pytest.mark.parametrize("f16", [False, True], ids=["f32", "f16"])
def test_bert_cls_pooling_matches_transformers(f16):
    ref = reference(BERT)
    embedder, result = embed(BERT, ref["input_ids"], f16)
    assert (embedder.pooling, embedder.max_tokens, embedder.dimensions) == ("cls", 48, 64)
    assert [len(embedder.tokens(ids)) for ids in ref["input_ids"]] == [1, 2, 7, 20, 48, 48]  # 60 cut to 48
    assert result.prompt_tokens == 1 + 2 + 7 + 20 + 48 + 48
    assert_close(result.vectors, vectors(ref["cls_f32"]))


def test_bert_mean_pooling_and_many_forwards():
    """pooling="mean" overrides the folder's CLS; 5 copies of the texts (630 tokens) take two
    forwards of at most 512 rows, each text packed whole into one."""
    ref = reference(BERT)
    _, result = embed(BERT, ref["input_ids"] * 5, pooling="mean")
    assert_close(result.vectors, np.tile(vectors(ref["mean_f32"]), (5, 1)))


@pytest.mark.parametrize("f16", [False, True], ids=["f32", "f16"])
def test_decoder_last_token_matches_transformers(f16):
    """The tiny Qwen3 as Qwen3-Embedding runs: the final norm's last row, normalised (the 140-token
    input is two prefill forwards)."""
    ref = reference(FIXTURES / "embed_qwen3")
    embedder, result = embed(QWEN3, ref["input_ids"], f16)
    assert (embedder.pooling, embedder.dimensions) == ("lasttoken", 64)
    assert_close(result.vectors, vectors(ref["vectors_f32"]))


def rename_tensors(src: Path, dst: Path, rename) -> None:
    """A copy of a safetensors file with its tensors renamed (the data untouched)."""
    raw = src.read_bytes()
    (size,) = struct.unpack("<Q", raw[:8])
    header = {rename(name): entry for name, entry in json.loads(raw[8 : 8 + size]).items()}
    encoded = json.dumps(header).encode()
    encoded += b" " * (-len(encoded) % 8)
    dst.write_bytes(struct.pack("<Q", len(encoded)) + encoded + raw[8 + size :])


def test_qwen3_embedding_checkpoint_names(tmp_path):
    """Qwen3-Embedding's checkpoints are saved from the bare Qwen3Model ("embed_tokens.weight",
    "layers.N...", "norm.weight"); the 8B's has no LM head though its config unties it."""
    model = tmp_path / "qwen3-embedding"
    model.mkdir()
    config = json.loads((QWEN3 / "config.json").read_text())
    (model / "config.json").write_text(json.dumps({**config, "tie_word_embeddings": False}))
    rename_tensors(
        QWEN3 / "model.safetensors",
        model / "model.safetensors",
        lambda name: "unused.lm_head" if name == "lm_head.weight" else name.removeprefix("model."),
    )
    ref = reference(FIXTURES / "embed_qwen3")
    _, result = embed(model, ref["input_ids"][:3])
    assert_close(result.vectors, vectors(ref["vectors_f32"])[:3])


# ---- malformed folders: typed errors before any device ------------------------------------------


def broken_copy(tmp_path: Path, edit) -> Path:
    model = tmp_path / "bert"
    shutil.copytree(BERT, model)
    edit(model)
    return model


def edit_json(rel: str, change):
    def edit(model: Path):
        path = model / rel
        path.write_text(json.dumps(change(json.loads(path.read_text()))))

    return edit


BROKEN = {
    "hidden_act": (edit_json("config.json", lambda c: {**c, "hidden_act": "relu"}), "config.json: hidden_act must be"),
    "relative positions": (
        edit_json("config.json", lambda c: {**c, "position_embedding_type": "relative_key"}),
        "position_embedding_type must be",
    ),
    "intermediate_size": (
        edit_json("config.json", lambda c: {**c, "intermediate_size": 97}),
        "has shape [96]; ",
    ),
    "missing layer": (
        edit_json("config.json", lambda c: {**c, "num_hidden_layers": 3}),
        "missing tensor 'encoder.layer.2.",
    ),
    "head_dim": (edit_json("config.json", lambda c: {**c, "num_attention_heads": 0}), "num_attention_heads"),
    "dense module missing": (
        edit_json(
            "modules.json", lambda m: [*m, {"idx": 3, "path": "3_Dense", "type": "sentence_transformers.models.Dense"}]
        ),
        "modules.json: the Dense module's '3_Dense/config.json' is missing",
    ),
    "unknown module": (
        edit_json("modules.json", lambda m: [*m, {"idx": 3, "path": "", "type": "sentence_transformers.models.CNN"}]),
        "modules.json: sentence-transformers module 'sentence_transformers.models.CNN' is not supported",
    ),
    "max pooling": (
        edit_json(
            "1_Pooling/config.json", lambda c: {**c, "pooling_mode_cls_token": False, "pooling_mode_max_tokens": True}
        ),
        "1_Pooling/config.json: pooling pooling_mode_max_tokens",
    ),
    "pooling outside": (
        edit_json("modules.json", lambda m: [{**m[1], "path": "../1_Pooling"}]),
        "outside the model folder",
    ),
    "modules not JSON": (lambda model: (model / "modules.json").write_text("[{"), "modules.json: malformed JSON"),
    "max_seq_length": (
        edit_json("sentence_bert_config.json", lambda c: {**c, "max_seq_length": "long"}),
        "max_seq_length should be a positive integer",
    ),
}


@pytest.mark.parametrize("case", BROKEN)
def test_malformed_encoder_folder_is_a_typed_error(tmp_path, case):
    edit, message = BROKEN[case]
    with pytest.raises(ModelFileError) as caught:
        read_embedder_files(broken_copy(tmp_path, edit))
    assert message in str(caught.value)


def test_the_registry_and_the_config_agree():
    from py_engine.models import ENCODERS
    from py_engine.models.config import ENCODER_ARCHITECTURES

    assert set(ENCODERS) == set(ENCODER_ARCHITECTURES)
    files = read_embedder_files(BERT)
    assert files.encoder and files.cfg.rms_norm_eps == 1e-12 and files.cfg.hidden_act == "gelu"


# ---- the API's inputs ----------------------------------------------------------------------------


def test_inputs():
    ref = reference(BERT)
    ids = ref["input_ids"][2]

    async def run():
        embedder = await load_embedder(BERT, device(False)[0], model_id="tiny-bge")
        assert embedder.model_id == "tiny-bge"
        one = await embedder.embed(ids)  # one list of ids is one input
        assert len(one.vectors) == 1 and one.prompt_tokens == len(ids)
        problems = {
            "no tokenizer": (["some text"], "has no tokenizer"),
            "empty": ([], "not empty"),
            "empty ids": ([[]], "empty"),
            "vocabulary": ([[1, 256]], "token id 256 is outside the model's vocabulary"),
            "type": ([1.5], "a string or a list of token ids"),
        }
        for inputs, message in problems.values():
            with pytest.raises(WispError, match=message):
                await embedder.embed(inputs)
        with pytest.raises(WispError, match="an input of 60 tokens exceeds 48"):
            await embedder.embed([ref["input_ids"][-1]], truncate=False)
        return one

    one = asyncio.run(run())
    assert_close(one.vectors, vectors(ref["cls_f32"])[2:3])


def test_an_encoder_does_not_generate():
    from py_engine.errors import UnsupportedArchitectureError
    from py_engine.session import read_model_files

    with pytest.raises(UnsupportedArchitectureError, match="BertModel is an embedding model"):
        read_model_files(BERT, with_tokenizer=False)


def test_settings_overrides():
    files = read_embedder_files(BERT, pooling="mean", max_tokens=20)
    assert (files.settings.pooling, files.settings.max_tokens) == ("mean", 20)
    again = read_embedder_files(files, pooling="lasttoken")
    assert (again.settings.pooling, again.settings.max_tokens) == ("lasttoken", 48)
    with pytest.raises(WispError, match="max_tokens must be an integer from 1 to 64"):
        read_embedder_files(BERT, max_tokens=65)
    with pytest.raises(WispError, match="pooling 'max' is not one of cls, mean, lasttoken"):
        read_embedder_files(BERT, pooling="max")
    with pytest.raises(WispError, match="mean pooling of a decoder is not supported"):
        read_embedder_files(QWEN3, pooling="mean")
    assert read_embedder_files(QWEN3).settings.max_tokens == 256  # max_position_embeddings
