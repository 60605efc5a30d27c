"""/v1/embeddings in OpenAI's shape, from an embedding.Embedder (desktop and page alike)."""

from __future__ import annotations

import base64
import struct

from .request import EmbeddingRequest, RequestError


async def response(embedder, request: EmbeddingRequest) -> dict:
    """The embeddings object: one L2-normalised vector per input, in order. `dimensions` (OpenAI's)
    may name the model's own size or, for a Matryoshka model (EmbeddingGemma), a smaller one it was
    trained for (cutting a vector that was not would mislead); `prompt_name` (Wisp's own field) one of
    the model's named prompts, put before each input as sentence-transformers' prompt_name does."""
    choices = embedder.dimension_choices
    if request.dimensions is not None and request.dimensions not in choices:
        sizes = " or ".join(map(str, choices))
        raise RequestError(f"this model's vectors may have {sizes} dimensions, not {request.dimensions}", "dimensions")
    if request.prompt_name is not None and request.prompt_name not in embedder.prompts:
        named = ", ".join(embedder.prompts) or "none"
        raise RequestError(
            f"this model has no prompt {request.prompt_name!r:.60} (its prompts: {named})", "prompt_name"
        )
    vectors, tokens = await embedder.embed(
        request.inputs, prompt_name=request.prompt_name, dimensions=request.dimensions
    )
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
