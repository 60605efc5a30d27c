"""/v1/embeddings in OpenAI's shape, from an embedding.Embedder (desktop and page alike)."""

from __future__ import annotations

import base64
import struct

from .request import EmbeddingRequest, RequestError


async def response(embedder, request: EmbeddingRequest) -> dict:
    """The embeddings object: one L2-normalised vector per input, in order; `dimensions` may only
    name the model's own (truncating a vector that was not trained for it would mislead)."""
    if request.dimensions is not None and request.dimensions != embedder.dimensions:
        raise RequestError(f"this model's vectors have {embedder.dimensions} dimensions", "dimensions")
    vectors, tokens = await embedder.embed(request.inputs)
    data = [
        {"object": "embedding", "index": i, "embedding": _encoded(vector, request.encoding_format)}
        for i, vector in enumerate(vectors)
    ]
    usage = {"prompt_tokens": tokens, "total_tokens": tokens}
    return {"object": "list", "data": data, "model": request.model, "usage": usage}


def _encoded(vector: list[float], fmt: str):
    if fmt == "base64":  # what the openai client asks for by default: little-endian float32
        return base64.b64encode(struct.pack(f"<{len(vector)}f", *vector)).decode()
    return vector
