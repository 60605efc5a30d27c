"""EmbeddingGemma (a Gemma3TextModel run bidirectionally, then sentence-transformers' mean pooling, two
Dense projections and normalisation) on a tiny random model of its shape, tests/fixtures/embed_gemma
(tools/make_embedding_gemma_fixture.py), against sentence-transformers' own vectors: plain, with the
model's named prompts, cut to Matryoshka sizes; its sliding layers see 4 rows either side, so texts of
11-64 tokens tell a window from none. Malformed sentence-transformers files are typed errors naming the
file; the API's dimensions and prompt_name."""

import asyncio
import base64
import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from gpu_harness import device

from py_engine.api import embeddings
from py_engine.api.request import RequestError, parse_embeddings
from py_engine.embedding import load_embedder, read_embedder_files
from py_engine.errors import ModelFileError, WispError

MODEL = Path(__file__).parent / "fixtures" / "embed_gemma"
REFERENCE = json.loads((MODEL / "embedding_reference.json").read_text())


@pytest.fixture(scope="module")
def embedder():
    dev = device(False)[0]
    return asyncio.run(load_embedder(MODEL, dev))


def vectors(encoded: list[str]) -> np.ndarray:
    return np.array([np.frombuffer(base64.b64decode(v), "<f4") for v in encoded], np.float64)


@pytest.mark.parametrize("run", REFERENCE["runs"])
def test_vectors_match_sentence_transformers(embedder, run):
    """Each run: the texts (with a prompt or none) at a size (768 whole, 256 and 128 cut and
    normalised again): sentence-transformers' token ids, and its vectors within 1e-5."""
    ref = REFERENCE["runs"][run]
    texts, prompt = REFERENCE["texts"], ref["prompt_name"]
    assert [embedder.tokens(t, prompt=embedder.prompts[prompt] if prompt else "") for t in texts] == ref["input_ids"]
    got, tokens = asyncio.run(embedder.embed(texts, prompt_name=prompt, dimensions=ref["dimensions"]))
    got, want = np.array(got, np.float64), vectors(ref["vectors_f32"])
    assert got.shape == want.shape and tokens == sum(map(len, ref["input_ids"]))
    np.testing.assert_allclose(np.linalg.norm(got, axis=1), 1.0, atol=1e-6)
    assert (got * want).sum(1).min() >= 0.99999
    np.testing.assert_allclose(got, want, atol=1e-5)


def test_a_short_text_alone(embedder):
    """11 tokens: a forward of at most 16 rows takes encoder_attention.wgsl (row by row) rather than
    the tiled kernel, its sliding layers' window (4 rows either side) still narrower than the text."""
    ref = REFERENCE["runs"]["none/256"]
    assert 9 < len(ref["input_ids"][4]) <= 16
    (got,), _ = asyncio.run(embedder.embed(REFERENCE["texts"][4], dimensions=256))
    np.testing.assert_allclose(got, vectors(ref["vectors_f32"])[4], atol=1e-5)


def test_what_the_files_say(embedder):
    assert (embedder.pooling, embedder.max_tokens, embedder.dimensions) == ("mean", 64, 768)
    assert embedder.dimension_choices == (768, 512, 256, 128)
    assert embedder.prompts["query"] == "task: search result | query: " and len(embedder.prompts) == 14
    with pytest.raises(WispError, match="no prompt named 'search'"):
        asyncio.run(embedder.embed("x", prompt_name="search"))
    with pytest.raises(WispError, match="768, 512, 256, 128 dimensions, not 300"):
        asyncio.run(embedder.embed("x", dimensions=300))
    with pytest.raises(WispError, match="a prompt goes before text"):
        asyncio.run(embedder.embed([2, 40, 1], prompt_name="query"))


def test_the_api_takes_dimensions_and_a_prompt_name(embedder):
    ref = REFERENCE["runs"]["query/128"]
    body = {"model": "embed_gemma", "input": REFERENCE["texts"][:2], "dimensions": 128, "prompt_name": "query"}
    answer = asyncio.run(embeddings.response(embedder, parse_embeddings(body)))
    got = np.array([item["embedding"] for item in answer["data"]])
    np.testing.assert_allclose(got, vectors(ref["vectors_f32"][:2]), atol=1e-5)
    assert answer["usage"]["prompt_tokens"] == sum(map(len, ref["input_ids"][:2]))
    for field, value, message in (
        ("dimensions", 100, "may have 768 or 512 or 256 or 128 dimensions, not 100"),
        ("prompt_name", "Search", "no prompt 'Search'"),
    ):
        with pytest.raises(RequestError, match=message) as caught:
            asyncio.run(embeddings.response(embedder, parse_embeddings({**body, field: value})))
        assert caught.value.param == field
    with pytest.raises(RequestError, match="'prompt_name' must be a string"):
        parse_embeddings({**body, "prompt_name": 3})


def edit_json(rel: str, change):
    def edit(model: Path):
        path = model / rel
        path.write_text(json.dumps(change(json.loads(path.read_text()))))

    return edit


BROKEN = {
    "tanh activation": (
        edit_json("2_Dense/config.json", lambda c: {**c, "activation_function": "torch.nn.modules.activation.Tanh"}),
        "2_Dense/config.json: activation_function 'torch.nn.modules.activation.Tanh' is not supported",
    ),
    "sizes that do not chain": (
        edit_json("3_Dense/config.json", lambda c: {**c, "in_features": 95}),
        "3_Dense/config.json: in_features is 95, but the module before gives 96",
    ),
    "a first size that is not the model's": (
        edit_json("2_Dense/config.json", lambda c: {**c, "in_features": 64}),
        "2_Dense/config.json: in_features is 64, but the module before gives 48",
    ),
    "a size that is not one": (
        edit_json("2_Dense/config.json", lambda c: {**c, "out_features": "96"}),
        "2_Dense/config.json: in_features and out_features should be sizes",
    ),
    "a bias it lacks": (
        edit_json("2_Dense/config.json", lambda c: {**c, "bias": True}),
        "tensor '2_Dense/linear.bias' should be of shape (96,), got missing",
    ),
    "weights missing": (lambda model: (model / "3_Dense" / "model.safetensors").unlink(), "weights '3_Dense/model"),
    "residual": (edit_json("3_Dense/config.json", lambda c: {**c, "use_residual": True}), "use_residual true is not"),
    "prompts not texts": (
        edit_json("config_sentence_transformers.json", lambda c: {**c, "prompts": {"query": 1}}),
        "config_sentence_transformers.json: prompts should be an object of texts by name",
    ),
    "default prompt unknown": (
        edit_json("config_sentence_transformers.json", lambda c: {**c, "default_prompt_name": "Query"}),
        "default_prompt_name 'Query' is not one of its prompts",
    ),
    "prompt left out of the pooling": (
        edit_json("1_Pooling/config.json", lambda c: {**c, "include_prompt": False}),
        "1_Pooling/config.json: include_prompt false is not supported",
    ),
    "causal": (
        edit_json("config.json", lambda c: {**c, "use_bidirectional_attention": False}),
        "config.json: use_bidirectional_attention",
    ),
}


@pytest.mark.parametrize("case", BROKEN)
def test_malformed_files_are_a_typed_error_naming_the_file(tmp_path, case):
    edit, message = BROKEN[case]
    model = tmp_path / "model"
    shutil.copytree(MODEL, model)
    edit(model)
    with pytest.raises(ModelFileError) as caught:
        read_embedder_files(model)
    assert message in str(caught.value)
