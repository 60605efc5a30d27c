"""The tiny random architectures tools/make_fixtures.py writes: their configs, what each exercises
(NOTES, copied into reference.json) and the config changes that must change the reference
(FEATURES: a fixture whose feature changes nothing tests nothing).

Shapes deliberately avoid powers of two / multiples of 64 where the engine tiles."""

COMMON = dict(
    vocab_size=384,
    hidden_size=64,
    intermediate_size=112,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    max_position_embeddings=256,
    initializer_range=0.2,  # 0.02 gives near-tied logits
    # No eos: generation (HF's and the engine's) must never stop before NEW_TOKENS.
    bos_token_id=None,
    eos_token_id=None,
    pad_token_id=None,
)

LLAMA3_ROPE = dict(
    rope_type="llama3",
    rope_theta=10000.0,
    factor=8.0,
    low_freq_factor=1.0,
    high_freq_factor=4.0,
    # Small so that with head_dim 16 the low-, mid- and high-frequency bands all occur.
    original_max_position_embeddings=32,
)

# Gemma: hidden 72, so sqrt(hidden) = 8.485… rounds differently in bf16 (8.5) and f16 (8.484375).
GEMMA = dict(hidden_size=72, head_dim=24, hidden_activation="gelu_pytorch_tanh")
TWO_LAYER_TYPES = ["sliding_attention", "full_attention"]
GEMMA3_ROPE = {
    "sliding_attention": dict(rope_type="default", rope_theta=10000.0),
    "full_attention": dict(rope_type="linear", factor=8.0, rope_theta=1000000.0),
}
PHI3_ROPE = dict(
    rope_type="longrope",
    rope_theta=10000.0,
    partial_rotary_factor=0.5,  # head_dim 16: 8 dims turn, 4 frequencies
    short_factor=[1.0, 1.3, 2.1, 3.5],
    long_factor=[1.0, 4.0, 9.0, 20.0],
    original_max_position_embeddings=16,  # the 12-token prompt is short; decode passes 16
)

# Hybrids: a layer pattern with the recurrent kind on both sides of an attention layer; a context
# long enough for tools/make_fixtures.py's LONG_PROMPT (the state must not drift over it).
HYBRID = dict(num_hidden_layers=3, max_position_embeddings=512)
QWEN3_5_LINEAR = dict(  # odd head counts: 2 key heads serve 6 value heads; dk != dv
    linear_num_key_heads=2,
    linear_num_value_heads=6,
    linear_key_head_dim=24,
    linear_value_head_dim=20,
    linear_conv_kernel_dim=4,
)

ARCHS = {
    "llama": dict(model_type="llama", rms_norm_eps=1e-5, rope_parameters=LLAMA3_ROPE, tie_word_embeddings=False),
    "mistral": dict(
        model_type="mistral",
        rms_norm_eps=1e-6,
        sliding_window=8,  # < prompt length, so the window cuts attention from the prompt on
        tie_word_embeddings=False,
    ),
    "qwen2": dict(model_type="qwen2", rms_norm_eps=1e-6, tie_word_embeddings=True),
    "qwen3": dict(
        model_type="qwen3",
        rms_norm_eps=1e-6,
        head_dim=24,  # != hidden_size / num_attention_heads (16)
        rope_parameters=dict(rope_type="default", rope_theta=1000000.0),
        tie_word_embeddings=False,
    ),
    "gemma": dict(model_type="gemma", **GEMMA, num_key_value_heads=1, rms_norm_eps=1e-6, tie_word_embeddings=False),
    "gemma2": dict(
        model_type="gemma2",
        **GEMMA,
        rms_norm_eps=1e-6,
        query_pre_attn_scalar=40,  # != head_dim
        attn_logit_softcapping=4.0,  # small enough to bite on random weights
        final_logit_softcapping=6.0,
        sliding_window=8,
        layer_types=TWO_LAYER_TYPES,
        tie_word_embeddings=False,
    ),
    "gemma3": dict(
        model_type="gemma3_text",
        **GEMMA,
        rms_norm_eps=1e-6,
        query_pre_attn_scalar=40,
        sliding_window=8,
        layer_types=TWO_LAYER_TYPES,
        rope_parameters=GEMMA3_ROPE,
        tie_word_embeddings=False,  # tied, a random Gemma repeats one token (the real model ties)
    ),
    "phi3": dict(
        model_type="phi3",
        rms_norm_eps=1e-5,
        rope_parameters=PHI3_ROPE,
        max_position_embeddings=256,  # factor 16 over the original 16: attention factor sqrt(2)
        original_max_position_embeddings=16,
        tie_word_embeddings=False,
    ),
    "qwen3_5": dict(
        model_type="qwen3_5_text",
        **HYBRID,
        **QWEN3_5_LINEAR,
        num_attention_heads=3,
        num_key_value_heads=1,
        head_dim=32,  # partial rotary 0.25: 8 dims turn
        rms_norm_eps=1e-6,
        layer_types=["linear_attention", "full_attention", "linear_attention"],
        full_attention_interval=2,  # what llama.cpp's converter writes for this pattern
        tie_word_embeddings=False,
    ),
    "lfm2": dict(
        model_type="lfm2",
        **HYBRID,
        norm_eps=1e-5,
        block_multiple_of=8,  # auto-adjusted feed-forward: int(2 * 112 / 3) = 74 -> 80, not the config's 112
        layer_types=["conv", "full_attention", "conv"],
        tie_word_embeddings=True,
    ),
}

NOTES = {
    "llama": "llama3 RoPE scaling (factor 8, low 1, high 4, original_max 32), theta 1e4, untied lm_head, eps 1e-5",
    "mistral": "sliding_window 8: position q attends to keys q-7..q; prompt 12 + 16 new tokens, so the window cuts",
    "qwen2": "random non-zero q/k/v biases, tied embeddings (no lm_head.weight stored)",
    "qwen3": "random q_norm/k_norm, head_dim 24 != hidden/heads, theta 1e6",
    "gemma": "(1 + w) norms, GELU-tanh, embeddings x sqrt(72) rounded to the dtype, head_dim 24, one KV head",
    "gemma2": "four norms per layer, query_pre_attn_scalar 40, attention softcap 4, final softcap 6, "
    "layer 0 sliding (window 8), layer 1 full",
    "gemma3": "q/k norms (1 + w), sliding layer RoPE theta 1e4, full layer theta 1e6 with linear scaling 8, "
    "window 8, query_pre_attn_scalar 40",
    "qwen3_5": "Gated DeltaNet layers 0 and 2 (2 key heads, 6 value heads, dk 24, dv 20, conv 4), full attention "
    "layer 1 (3 heads, 1 KV head, head_dim 32, q|gate interleaved per head, sigmoid output gate, partial rotary "
    "0.25); (1 + w) norms, plain-w gated norm",
    "lfm2": "short-conv layers 0 and 2 (L_cache 3, B*x gated in, C* out), attention layer 1 with q/k layernorms; "
    "feed-forward auto-adjusted to 80; final embedding_norm; tied embeddings",
    "phi3": "fused qkv_proj and gate_up_proj, partial rotary 0.5, longrope (original 16: the prompt uses the "
    "short factors, decode from position 16 the long ones; attention factor sqrt(2))",
}

ALL_FULL = ["full_attention", "full_attention"]
# arch -> (what, config changes, "logits" (the prompt's last logits) or "greedy" (the 16 ids) must differ)
FEATURES = {
    "llama": [("llama3 rope scaling", dict(rope_parameters=dict(rope_type="default", rope_theta=10000.0)), "logits")],
    "mistral": [("sliding window", dict(sliding_window=None), "logits")],
    "gemma2": [
        ("attention softcap", dict(attn_logit_softcapping=None), "logits"),
        ("final softcap", dict(final_logit_softcapping=None), "logits"),
        ("sliding window", dict(layer_types=ALL_FULL), "logits"),
        ("query_pre_attn_scalar", dict(query_pre_attn_scalar=24), "logits"),
    ],
    "gemma3": [
        ("sliding window", dict(layer_types=ALL_FULL), "logits"),
        (
            "local rope theta",
            dict(rope_parameters={**GEMMA3_ROPE, "sliding_attention": GEMMA3_ROPE["full_attention"]}),
            "logits",
        ),
        (
            "linear scaling",
            dict(rope_parameters={**GEMMA3_ROPE, "full_attention": dict(rope_type="default", rope_theta=1e6)}),
            "logits",
        ),
    ],
    "qwen3_5": [
        ("layer pattern", dict(layer_types=["full_attention", "linear_attention", "linear_attention"]), "logits")
    ],
    "lfm2": [("layer pattern", dict(layer_types=["full_attention", "conv", "conv"]), "logits")],
    "phi3": [
        ("short factors", dict(rope_parameters={**PHI3_ROPE, "short_factor": [1.0] * 4}), "logits"),
        ("long factors", dict(rope_parameters={**PHI3_ROPE, "long_factor": PHI3_ROPE["short_factor"]}), "greedy"),
    ],
}
