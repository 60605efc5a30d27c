"""Moonshine's generation rules: how many tokens a window of audio may produce.

Moonshine has no length token or timestamps: greedy decoding runs from decoder_start_token_id until an
eos id or a limit. transformers' generate has no limit of its own for it (its config's max_length
default, 20, would cut a long window); the model card's usage sets max_length to 6.5 tokens a second
of audio (`token_limit_factor = 6.5 / sampling_rate`), which also stops a hallucinating loop early.
The engine's limit a window: int(samples x 6.5 / 16000) new tokens, at least one."""

from __future__ import annotations

RATE = 16000  # Moonshine's sample rate: raw PCM in, no feature extractor beyond it
TOKENS_PER_SECOND = 6.5


def max_new_tokens(samples: int) -> int:
    """The most tokens a window of `samples` may produce (the module docstring's rule)."""
    return max(1, int(samples * TOKENS_PER_SECOND / RATE))
