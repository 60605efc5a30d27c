"""Qwen2 / Qwen2.5: q/k/v projections always carry biases (the config has no flag for it);
embeddings are often tied. Sliding window only when the config turns it on."""

from .decoder import build_decoder


def build_qwen2(b):
    return build_decoder(b, qkv_bias=True, window=b.cfg.sliding_window)
