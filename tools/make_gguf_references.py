"""Reference outputs for the real GGUF models, from HF transformers' own GGUF loader.

transformers dequantizes every tensor to float32 and un-permutes llama.cpp's Q/K rows, so this is
an independent implementation of the whole path (reader, dequantization, RoPE layout, model).
For each model and prompt it records the prompt ids (the HF tokenizer built from the GGUF, with
the GGUF's chat template; a base model without one gets the plain text), the last prompt position's logits (the top 100 plus every
`STRIDE`-th vocabulary entry: small enough to commit, wide enough to catch a wrong row) and the
first 16 greedy tokens. Needs torch, transformers>=5 and gguf (see ../shared/PLATFORM-NOTES.md).

    python tools/make_gguf_references.py [--model NAME=PATH.gguf ...]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

OUT_DIR = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "gguf_reference"
PROMPTS = [
    "What is the capital of France?",
    "Write a Python function that reverses a string.",
    "Explain in one sentence why the sky is blue.",
]
NEW_TOKENS = 16
TOP = 100
STRIDE = 397


def reference(path: Path) -> dict:
    tok = AutoTokenizer.from_pretrained(path.parent, gguf_file=path.name)
    model = AutoModelForCausalLM.from_pretrained(path.parent, gguf_file=path.name, dtype=torch.float32)
    model.eval()
    cases = []
    for prompt in PROMPTS:
        if tok.chat_template:
            ids = tok.apply_chat_template(
                [{"role": "user", "content": prompt}], add_generation_prompt=True, tokenize=True, return_dict=False
            )
        else:  # a base model (Gemma-3-270M): the text itself, BOS as the file asks
            ids = tok(prompt)
        if isinstance(ids, dict) or hasattr(ids, "input_ids"):
            ids = ids["input_ids"]
        ids = [int(i) for i in ids]
        with torch.no_grad():
            logits = model(torch.tensor([ids])).logits[0, -1].double()
            out = model.generate(
                torch.tensor([ids]),
                max_new_tokens=NEW_TOKENS,
                do_sample=False,
                temperature=None,
                top_p=None,
                top_k=None,
            )
        greedy = [int(t) for t in out[0, len(ids) :]]
        top = torch.topk(logits, TOP).indices.tolist()
        sample = sorted(set(top) | set(range(0, logits.numel(), STRIDE)))
        cases.append(
            {
                "prompt": prompt,
                "prompt_ids": ids,
                "greedy": greedy,
                "greedy_text": tok.decode(greedy),
                "logit_ids": sample,
                "logits": [round(float(logits[i]), 5) for i in sample],
                "max_abs_logit": float(logits.abs().max()),
            }
        )
        print(f"{path.name}: {prompt!r} → {tok.decode(greedy)!r}")
    return {"model": path.name, "cases": cases}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", action="append", default=[], help="NAME=PATH.gguf (default: the catalog's models)")
    args = parser.parse_args()
    models = dict(m.split("=", 1) for m in args.model)
    if not models:
        from py_engine.catalog import MODELS
        from py_engine.model_cache import ensure_model

        models = {name: ensure_model(name) for name in MODELS}
    OUT_DIR.mkdir(parents=True, exist_ok=True)
    for name, path in models.items():
        data = reference(Path(path))
        (OUT_DIR / f"{name}.json").write_text(json.dumps(data, indent=1) + "\n")


if __name__ == "__main__":
    main()
