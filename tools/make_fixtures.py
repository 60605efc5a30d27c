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
from fixture_archs import ARCHS, COMMON, FEATURES, NOTES
from transformers import AutoConfig, AutoModelForCausalLM, GenerationConfig

PROMPT_LEN = 12
NEW_TOKENS = 16
MIN_REL_MARGIN = 1e-3  # (top1 - top2) / max|logit| at every greedy step
MIN_DISTINCT_GREEDY = 4
ATTN = "eager"  # plain matmul + softmax with an explicit mask: the easiest reference to trust

DTYPES = {"f32": torch.float32, "bf16": torch.bfloat16, "f16": torch.float16}
SHARDED = ("qwen2", "bf16")  # saved as >= 2 shards + model.safetensors.index.json
LEGACY_CONFIG = ("llama", "f16")  # config.json rewritten in the pre-transformers-5 spelling

GEMMA_FAMILY = ("gemma", "gemma2", "gemma3")
ZERO_CENTRED = GEMMA_FAMILY + ("qwen3_5",)  # RMSNorms that multiply by (1 + w)
GATED_NORM = "linear_attn.norm.weight"  # Qwen3.5's gated RMSNorm multiplies by w itself
HYBRIDS = ("qwen3_5", "lfm2")  # recurrent state: their reference also holds a LONG_PROMPT's last logits
LONG_PROMPT = 300


def make_config(arch):
    spec = {**COMMON, **ARCHS[arch]}
    return AutoConfig.for_model(spec.pop("model_type"), **spec)


def build_model(arch, seed):
    """Random f32 model; norms and biases are randomised too (HF inits them to 1 and 0),
    so an engine that skips a norm, its weight or a bias gets different logits."""
    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(make_config(arch), dtype=torch.float32)
    std = model.config.initializer_range
    with torch.no_grad():
        for name, param in model.named_parameters():
            if name.endswith("norm.weight"):  # Gemma's and Qwen3.5's norms multiply by (1 + w)
                one = arch not in ZERO_CENTRED or name.endswith(GATED_NORM)
                param.copy_(one + 0.1 * torch.randn_like(param))
            elif name.endswith(".bias") or name.endswith("dt_bias"):
                param.normal_(0.0, std if name.endswith(".bias") else 1.0)
    return model


def load_f32(path, dtype_name="f32", attn=ATTN, **config_overrides):
    """Load a saved fixture back as float32 (bf16/f16 weights are upcast exactly). Gemma's
    embedding scale is rounded to the stored dtype, as transformers computes it in that dtype."""
    cfg = AutoConfig.from_pretrained(path)
    for key, value in config_overrides.items():
        setattr(cfg, key, value)
    model = AutoModelForCausalLM.from_pretrained(path, config=cfg, dtype=torch.float32, attn_implementation=attn)
    embed = model.model.embed_tokens
    if hasattr(embed, "embed_scale"):
        embed.embed_scale.copy_(torch.tensor(embed.scalar_embed_scale).to(DTYPES[dtype_name]).float())
    return model.eval()


@torch.no_grad()
def last_logits(model, prompt):
    return model(prompt).logits[0, -1]


@torch.no_grad()
def greedy(model, prompt, recompute=True):
    """Greedy ids plus per-step logits, cross-checked against a cache-free recompute so the
    reference does not depend on how HF's KV cache (e.g. its sliding-window layer) works.
    recompute False: LongRoPE picks its factors per forward by the longest position, so a
    recompute of the whole sequence rotates differently from the cached decode (which the engine
    follows, forward by forward)."""
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
    if recompute:
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


def check_features(arch, dtype_name, path, prompt, logits, ids):
    """Each arch-specific feature must change the output, or the fixture tests nothing."""
    for what, overrides, changes in FEATURES.get(arch, ()):
        model = load_f32(path, dtype_name, **overrides)
        if changes == "logits":
            assert not torch.allclose(last_logits(model, prompt), logits, atol=1e-4), f"{what} had no effect"
        else:
            assert greedy(model, prompt, recompute=False)[0] != ids, f"{what} had no effect on the greedy ids"
    if arch in GEMMA_FAMILY and dtype_name != "f32":
        unrounded = load_f32(path)  # the f32 embedding scale
        assert not torch.equal(last_logits(unrounded, prompt), logits), "the embedding scale's rounding had no effect"
    if arch == "gemma2":  # sdpa has no attention softcapping
        return
    sdpa = load_f32(path, dtype_name, attn="sdpa")
    assert torch.allclose(last_logits(sdpa, prompt), logits, atol=1e-4), "eager and sdpa disagree"


def reference(arch, dtype_name, path, prompt):
    """Compute reference.json from the saved dir, or None if this seed is unusable."""
    model = load_f32(path, dtype_name)
    logits = last_logits(model, prompt)
    ids, step_logits = greedy(model, prompt, recompute=arch != "phi3")
    notes = NOTES[arch] + f"; weights stored as {dtype_name}, reference computed in float32"
    fields = reference_fields(prompt, logits, ids, step_logits, dtype_name, notes)
    if fields is None:
        return None
    check_features(arch, dtype_name, path, prompt, logits, ids)
    long = {}
    if arch in HYBRIDS:  # the state after many tokens: one prefill, last logits
        gen = torch.Generator().manual_seed(len(ids))
        long_prompt = torch.randint(0, COMMON["vocab_size"], (1, LONG_PROMPT), generator=gen)
        long_logits = last_logits(model, long_prompt)
        long = {
            "long_prompt_ids": long_prompt[0].tolist(),
            "long_logits": [float(f"{x:.7g}") for x in long_logits.tolist()],
        }
    if (arch, dtype_name) == LEGACY_CONFIG:
        write_legacy_llama_config(path)
        legacy = load_f32(path)
        assert legacy.config.rope_parameters == model.config.rope_parameters, "legacy rope keys misread"
        assert torch.equal(last_logits(legacy, prompt), logits), "legacy config changes the logits"
        assert greedy(legacy, prompt)[0] == ids
    return {**fields, **long}


def reference_fields(prompt, logits, ids, step_logits, dtype_name: str, notes: str) -> dict | None:
    """A causal fixture's reference.json fields (the prompt, its last logits, the greedy tokens and
    their margins, the versions), or None where the greedy steps are near-tied or too few."""
    abs_margin, rel_margin = min_margins(step_logits)
    if len(set(ids)) < MIN_DISTINCT_GREEDY or rel_margin < MIN_REL_MARGIN:
        return None
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
        "notes": notes,
    }


def save_pattern(arch, seed, prompt, path):
    """A second f32 model of a hybrid with another layer pattern (FEATURES': attention first) and
    its prompt's last logits: <arch>-f32/pattern/ (outside the parity tests' fixture list)."""
    pattern = FEATURES[arch][0][1]["layer_types"]
    spec = {**COMMON, **ARCHS[arch], "layer_types": pattern}
    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(AutoConfig.for_model(spec.pop("model_type"), **spec), dtype=torch.float32)
    with torch.no_grad():
        for name, param in model.named_parameters():  # as build_model
            if name.endswith("norm.weight"):
                param.copy_((arch not in ZERO_CENTRED or name.endswith(GATED_NORM)) + 0.1 * torch.randn_like(param))
            elif name.endswith("dt_bias"):
                param.normal_(0.0, 1.0)
    save(model, arch, "f32", path)
    logits = last_logits(load_f32(path), prompt)
    ref = {
        "prompt_ids": prompt[0].tolist(),
        "layer_types": pattern,
        "logits": [float(f"{x:.7g}") for x in logits.tolist()],
    }
    (path / "reference.json").write_text(json.dumps(ref) + "\n")


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
            if arch in HYBRIDS:
                save_pattern(arch, seed, prompt, out / f"{arch}-f32" / "pattern")
            return seed
        print(f"{arch}: seed {seed} degenerate or near-tied, trying the next one")
    raise RuntimeError(f"{arch}: no usable seed in {max_tries} tries")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=Path("tests/fixtures"))
    parser.add_argument("--only", nargs="*", choices=list(ARCHS), help="these architectures (default: all)")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    torch.use_deterministic_algorithms(True)
    for i, arch in enumerate(ARCHS):
        if args.only and arch not in args.only:
            continue
        seed = make_arch(arch, args.out, first_seed=1000 * (i + 1))
        print(f"{arch}: wrote {', '.join(f'{arch}-{d}' for d in DTYPES)} (seed {seed})")


if __name__ == "__main__":
    main()
