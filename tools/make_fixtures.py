"""Generate tiny random Hugging Face models plus float32 reference outputs for Wisp's tests.

    python tools/make_fixtures.py [--out tests/fixtures]

For every architecture x weight dtype it writes `<arch>-<dtype>/` holding config.json,
safetensors weights and reference.json (prompt ids, last-position logits, 16 greedy ids).
Weights are stored in the directory's dtype; the reference is always computed in float32
from exactly the stored values (loaded back and upcast), as the engine computes in f32.
Fixed seeds make the output deterministic; a seed is skipped if it gives degenerate or
near-tied greedy steps, so an engine with tiny numeric differences cannot flip a token.
"""

import argparse
import copy
import json
import shutil
from pathlib import Path

import torch
import transformers
from transformers import AutoConfig, AutoModelForCausalLM, GenerationConfig

PROMPT_LEN = 12
NEW_TOKENS = 16
MIN_REL_MARGIN = 1e-3  # (top1 - top2) / max|logit| at every greedy step
MIN_DISTINCT_GREEDY = 4
ATTN = "eager"  # plain matmul + softmax with an explicit mask: the easiest reference to trust

DTYPES = {"f32": torch.float32, "bf16": torch.bfloat16, "f16": torch.float16}
SHARDED = ("qwen2", "bf16")  # saved as >= 2 shards + model.safetensors.index.json
LEGACY_CONFIG = ("llama", "f16")  # config.json rewritten in the pre-transformers-5 spelling

# Shapes deliberately avoid powers of two / multiples of 64 where the engine tiles.
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

ARCHS = {
    "llama": dict(
        model_type="llama",
        rms_norm_eps=1e-5,
        rope_parameters=LLAMA3_ROPE,
        tie_word_embeddings=False,
    ),
    "mistral": dict(
        model_type="mistral",
        rms_norm_eps=1e-6,
        sliding_window=8,  # < prompt length, so the window cuts attention from the prompt on
        tie_word_embeddings=False,
    ),
    "qwen2": dict(
        model_type="qwen2",
        rms_norm_eps=1e-6,
        tie_word_embeddings=True,
    ),
    "qwen3": dict(
        model_type="qwen3",
        rms_norm_eps=1e-6,
        head_dim=24,  # != hidden_size / num_attention_heads (16)
        rope_parameters=dict(rope_type="default", rope_theta=1000000.0),
        tie_word_embeddings=False,
    ),
}

NOTES = {
    "llama": "llama3 RoPE scaling (factor 8, low 1, high 4, original_max 32), theta 1e4, untied lm_head, eps 1e-5",
    "mistral": "sliding_window 8: position q attends to keys q-7..q; prompt 12 + 16 new tokens, so the window cuts",
    "qwen2": "random non-zero q/k/v biases, tied embeddings (no lm_head.weight stored)",
    "qwen3": "random q_norm/k_norm, head_dim 24 != hidden/heads, theta 1e6",
}


def make_config(arch):
    spec = dict(ARCHS[arch])
    return AutoConfig.for_model(spec.pop("model_type"), **COMMON, **spec)


def build_model(arch, seed):
    """Random f32 model; norms and biases are randomised too (HF inits them to 1 and 0),
    so an engine that skips a norm, its weight or a bias gets different logits."""
    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(make_config(arch), dtype=torch.float32)
    std = model.config.initializer_range
    with torch.no_grad():
        for name, param in model.named_parameters():
            if name.endswith("norm.weight"):
                param.copy_(1 + 0.1 * torch.randn_like(param))
            elif name.endswith(".bias"):
                param.normal_(0.0, std)
    return model


def load_f32(path, **config_overrides):
    """Load a saved fixture back as float32 (bf16/f16 weights are upcast exactly)."""
    cfg = AutoConfig.from_pretrained(path)
    for key, value in config_overrides.items():
        setattr(cfg, key, value)
    model = AutoModelForCausalLM.from_pretrained(path, config=cfg, dtype=torch.float32, attn_implementation=ATTN)
    return model.eval()


@torch.no_grad()
def last_logits(model, prompt):
    return model(prompt).logits[0, -1]


@torch.no_grad()
def greedy(model, prompt):
    """Greedy ids plus per-step logits, cross-checked against a cache-free recompute so the
    reference does not depend on how HF's KV cache (e.g. its sliding-window layer) works."""
    gen_cfg = GenerationConfig(
        max_new_tokens=NEW_TOKENS,
        min_new_tokens=NEW_TOKENS,
        do_sample=False,
        return_dict_in_generate=True,
        output_logits=True,
    )
    out = model.generate(prompt, generation_config=gen_cfg)
    ids = out.sequences[0, prompt.shape[1] :].tolist()
    assert len(ids) == NEW_TOKENS, f"generated {len(ids)} tokens"
    full = model(out.sequences[:, :-1], use_cache=False).logits[0, prompt.shape[1] - 1 :]
    assert full.argmax(-1).tolist() == ids, "cached generate disagrees with full recompute"
    return ids, torch.stack(out.logits)[:, 0]


def min_margins(step_logits):
    """Smallest absolute and relative gap between the top two logits over all steps."""
    top2 = step_logits.topk(2, dim=-1).values
    gaps = top2[:, 0] - top2[:, 1]
    rel = gaps / step_logits.abs().max(dim=-1).values
    return gaps.min().item(), rel.min().item()


def write_legacy_llama_config(path):
    """Rewrite config.json the way older hub checkpoints (e.g. Llama 3.1) spell it."""
    cfg_path = path / "config.json"
    cfg = json.loads(cfg_path.read_text())
    rope = cfg.pop("rope_parameters")
    cfg["rope_theta"] = rope.pop("rope_theta")
    cfg["rope_scaling"] = rope
    cfg["torch_dtype"] = cfg.pop("dtype")
    cfg_path.write_text(json.dumps(cfg, indent=2, sort_keys=True) + "\n")


def save(model, arch, dtype_name, path):
    shutil.rmtree(path, ignore_errors=True)
    cast = copy.deepcopy(model).to(DTYPES[dtype_name])  # keep the f32 master for the other dtypes
    sharded = (arch, dtype_name) == SHARDED
    cast.save_pretrained(path, max_shard_size="100KB" if sharded else "50MB")
    if sharded:
        assert len(list(path.glob("model-*-of-*.safetensors"))) >= 2, "qwen2-bf16 must be sharded"
        assert (path / "model.safetensors.index.json").exists()


def check_features(arch, path, prompt, logits):
    """Each arch-specific feature must change the output, or the fixture tests nothing."""
    if arch == "mistral":
        windowless = last_logits(load_f32(path, sliding_window=None), prompt)
        assert not torch.allclose(windowless, logits, atol=1e-4), "sliding window had no effect"
    if arch == "llama":
        plain = dict(rope_type="default", rope_theta=LLAMA3_ROPE["rope_theta"])
        unscaled = last_logits(load_f32(path, rope_parameters=plain), prompt)
        assert not torch.allclose(unscaled, logits, atol=1e-4), "llama3 rope scaling had no effect"
    sdpa = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32, attn_implementation="sdpa")
    assert torch.allclose(last_logits(sdpa.eval(), prompt), logits, atol=1e-4), "eager and sdpa disagree"


def reference(arch, dtype_name, path, prompt):
    """Compute reference.json from the saved dir, or None if this seed is unusable."""
    model = load_f32(path)
    logits = last_logits(model, prompt)
    ids, step_logits = greedy(model, prompt)
    abs_margin, rel_margin = min_margins(step_logits)
    if len(set(ids)) < MIN_DISTINCT_GREEDY or rel_margin < MIN_REL_MARGIN:
        return None
    check_features(arch, path, prompt, logits)
    if (arch, dtype_name) == LEGACY_CONFIG:
        write_legacy_llama_config(path)
        legacy = load_f32(path)
        assert legacy.config.rope_parameters == model.config.rope_parameters, "legacy rope keys misread"
        assert torch.equal(last_logits(legacy, prompt), logits), "legacy config changes the logits"
        assert greedy(legacy, prompt)[0] == ids
    return {
        "prompt_ids": prompt[0].tolist(),
        "logits": [float(f"{x:.7g}") for x in logits.tolist()],
        "greedy": ids,
        "min_top2_margin": float(f"{abs_margin:.4g}"),
        "min_top2_margin_rel": float(f"{rel_margin:.4g}"),
        "transformers": transformers.__version__,
        "torch": torch.__version__,
        "dtype": dtype_name,
        "attn_implementation": ATTN,
        "notes": NOTES[arch] + f"; weights stored as {dtype_name}, reference computed in float32",
    }


def make_arch(arch, out, first_seed, max_tries=50):
    """Find the first seed whose model passes the checks in every dtype, and write it.
    All dtypes of one arch share the same f32 master weights (rounded when saved)."""
    for seed in range(first_seed, first_seed + max_tries):
        model = build_model(arch, seed)
        gen = torch.Generator().manual_seed(seed)
        prompt = torch.randint(0, COMMON["vocab_size"], (1, PROMPT_LEN), generator=gen)
        refs = {}
        for dtype_name in DTYPES:
            path = out / f"{arch}-{dtype_name}"
            save(model, arch, dtype_name, path)
            refs[dtype_name] = reference(arch, dtype_name, path, prompt)
            if refs[dtype_name] is None:
                break
        else:
            for dtype_name, ref in refs.items():
                ref_path = out / f"{arch}-{dtype_name}" / "reference.json"
                ref_path.write_text(json.dumps(dict(ref, seed=seed)) + "\n")
            return seed
        print(f"{arch}: seed {seed} degenerate or near-tied, trying the next one")
    raise RuntimeError(f"{arch}: no usable seed in {max_tries} tries")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=Path("tests/fixtures"))
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    torch.use_deterministic_algorithms(True)
    for i, arch in enumerate(ARCHS):
        seed = make_arch(arch, args.out, first_seed=1000 * (i + 1))
        print(f"{arch}: wrote {', '.join(f'{arch}-{d}' for d in DTYPES)} (seed {seed})")


if __name__ == "__main__":
    main()
