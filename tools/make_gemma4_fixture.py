"""A tiny random Gemma 4 text model (Gemma4ForCausalLM) and its transformers reference, for Wisp's tests.

    cd tools && /work/refenv/bin/python make_gemma4_fixture.py [--out ../tests/fixtures]

Writes gemma4-f32/ and gemma4-bf16/ (E2B's dtype; the same master weights, rounded): config.json,
model.safetensors and reference.json (prompt ids, last-position logits, 16 greedy ids, computed in
float32 from the stored values), as tools/make_fixtures.py does for the other families (its
helpers). The
model has what Gemma 4 E2B's text model adds to Gemma 3: per-layer embeddings (PLE), the last
layers reading an earlier layer's K/V (KV sharing: five layers, sliding sliding full | sliding
full, the last two shared, so the shared sliding layer reads layer 1, not 0), full layers with a
head_dim of their own and proportional RoPE, a V norm, attention scaled by 1, per-layer output
scalars and the final logit softcap. Norm weights multiply by w itself (no 1 + w in Gemma 4).
"""

import argparse
import json
from pathlib import Path

import torch
from make_fixtures import DTYPES, NEW_TOKENS, PROMPT_LEN, greedy, last_logits, load_f32, reference_fields, save
from transformers import AutoConfig, AutoModelForCausalLM

FIXTURE_DTYPES = ("f32", "bf16")
CONFIG = dict(
    vocab_size=320,
    vocab_size_per_layer_input=320,
    hidden_size=48,  # sqrt(48) is no round number: the embedding scale must be the reference's
    hidden_size_per_layer_input=8,
    intermediate_size=40,
    num_hidden_layers=5,
    layer_types=["sliding_attention", "sliding_attention", "full_attention", "sliding_attention", "full_attention"],
    num_kv_shared_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    head_dim=16,
    global_head_dim=24,  # the full layers' (E2B: 256 and 512)
    sliding_window=8,  # < the prompt, so the window cuts attention from the prompt on
    rope_parameters={
        "sliding_attention": dict(rope_type="default", rope_theta=10000.0),
        # 0.25 x 24: 3 of the 12 frequencies turn, over a denominator of 24 (not 6)
        "full_attention": dict(rope_type="proportional", partial_rotary_factor=0.25, rope_theta=1000000.0),
    },
    final_logit_softcapping=10.0,  # small enough to bend these logits (E2B: 30)
    rms_norm_eps=1e-6,
    max_position_embeddings=256,
    initializer_range=0.2,  # 0.02 gives near-tied logits
    tie_word_embeddings=True,
    # No eos: generation (HF's and the engine's) must never stop before NEW_TOKENS.
    bos_token_id=None,
    eos_token_id=None,
    pad_token_id=None,
)
MIN_REL_MARGIN = 1e-3
MIN_DISTINCT_GREEDY = 4


def build_model(seed):
    """Random f32 model; norms and layer scalars randomised too (HF inits them to 1), so an engine
    that skips a norm weight or a layer's scalar gets different logits."""
    torch.manual_seed(seed)
    config = AutoConfig.for_model("gemma4_text", **CONFIG)
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    with torch.no_grad():
        for name, param in model.named_parameters():
            if name.endswith("norm.weight"):
                param.copy_(1 + 0.1 * torch.randn_like(param))
        for layer in model.model.layers:
            layer.layer_scalar.copy_(0.5 + torch.rand(1))
    return model


def reference(path, dtype_name, prompt, seed):
    """reference.json's fields, or None where this seed's greedy steps are near-tied or too few."""
    model = load_f32(path, dtype_name)
    # As load_f32 does for the token embedding: transformers rounds the per-layer table's scale too.
    per_layer = model.model.embed_tokens_per_layer
    per_layer.embed_scale.copy_(torch.tensor(per_layer.scalar_embed_scale).to(DTYPES[dtype_name]).float())
    assert model.model.layers[3].self_attn.is_kv_shared_layer and not model.model.layers[2].self_attn.is_kv_shared_layer
    logits = last_logits(model, prompt)
    ids, step_logits = greedy(model, prompt)
    notes = (
        "Gemma 4 text: PLE, KV sharing (layers 3, 4 read 1, 2), full layers head_dim 24 with "
        f"proportional RoPE 0.25, V norm, layer scalars, final softcap 10; weights stored as {dtype_name}, "
        "reference computed in float32"
    )
    fields = reference_fields(prompt, logits, ids, step_logits, dtype_name, notes)
    return None if fields is None else {**fields, "seed": seed}


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=Path("../tests/fixtures"))
    args = parser.parse_args()
    torch.use_deterministic_algorithms(True)
    for seed in range(31000, 31050):
        model = build_model(seed)
        gen = torch.Generator().manual_seed(seed)
        prompt = torch.randint(0, CONFIG["vocab_size"], (1, PROMPT_LEN), generator=gen)
        refs = {}
        for dtype_name in FIXTURE_DTYPES:
            path = args.out / f"gemma4-{dtype_name}"
            save(model, "gemma4", dtype_name, path)
            refs[path] = reference(path, dtype_name, prompt, seed)
        if all(refs.values()):
            for path, ref in refs.items():
                assert len(ref["greedy"]) == NEW_TOKENS
                (path / "reference.json").write_text(json.dumps(ref) + "\n")
                print(f"wrote {path} (seed {seed})")
            return
        print(f"seed {seed} degenerate or near-tied, trying the next one")
    raise RuntimeError("no usable seed")


if __name__ == "__main__":
    main()
