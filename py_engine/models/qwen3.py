"""Qwen3: per-head RMSNorm on q and k before RoPE; head_dim is its own config key (≠ hidden/heads)."""

from .decoder import build_decoder


def build_qwen3(b):
    return build_decoder(b, qkv_bias=b.cfg.attention_bias, qk_norm=True, window=b.cfg.sliding_window)
