"""Llama (incl. SmolLM, Llama-3 RoPE scaling) and Mistral (sliding-window attention)."""

from .decoder import build_decoder


def build_llama(b):
    return build_decoder(b, qkv_bias=b.cfg.attention_bias)


def build_mistral(b):
    return build_decoder(b, qkv_bias=b.cfg.attention_bias, window=b.cfg.sliding_window)
