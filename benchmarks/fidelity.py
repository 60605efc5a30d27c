"""How far precision "fast" (int8 activations in the quantized GEMV) moves a model's predictions
from "exact". Prints one JSON object.

    python benchmarks/fidelity.py --model PATH --text FILE [--precision fast] [--tokens 2048] [--f32]
        [--prompt N [--int8-matmul-min-k K] [--int8-matmul-levels 1|2]] [--gemv-q8-input-weights W]
        [--prefill-rows R]

The text's tokens are fed teacher-forced to two engines of the model, one per precision, in
forwards of LOGIT_ROWS_MAX (8) rows scoring every row: every position's logits come from the GEMV
(forwards of at most linear_plan.GEMV_MAX_ROWS rows), the path a decode token takes. With
--prompt N the first N tokens go in as a prompt first (forwards of up to engine.PREFILL_ROWS rows:
the prefill matmul, int8 under "fast" where linear_plan.int8_matmul says so), so the positions
after it (its last one's logits and every later one's) also carry the prefill's error through
the KV cache; --int8-matmul-min-k and --int8-matmul-levels override linear_plan's
INT8_MATMUL_MIN_K and INT8_MATMUL_LEVELS, to measure the int8 matmul on models whose rows are
shorter than the bound; --gemv-q8-input-weights overrides GEMV_Q8_INPUT_WEIGHTS (0: every GEMV that
can reads x quantized by a quantize_rows dispatch, gemv.wgsl Q8_INPUT). --prefill-rows R (9 up to
engine.PREFILL_ROWS) feeds the text after the prompt in forwards of R rows that score their last 8:
those rows are computed as a prompt's are (the prefill matmul and attention_tiled.wgsl, whose
F16_MATH "fast" takes on a device with shader-f16), each after the cache's depth of keys; the
positions scored are 8 of every R. For each position: the KL
divergence KL(exact || precision) of the next-token distributions, and whether their argmaxes
agree. JSON: {"model", "precision", "tokens" (positions scored), "mean_kld", "p99_kld",
"max_kld", "top1_agreement"}. The bound (issue 28): mean KLD <= 1e-3 and top-1 agreement >= 99 %
for every catalog model; tests/test_fidelity.py checks it on SmolLM2 over 16 tokens (lavapipe: ~1 s a row).
--tokens caps the positions (default 2048; the model's context caps them too).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from py_engine.catalog import MODELS  # noqa: E402
from py_engine.engine import PREFILL_ROWS, Engine  # noqa: E402
from py_engine.model_cache import ensure_model  # noqa: E402
from py_engine.runtime import linear_plan  # noqa: E402
from py_engine.runtime.linear_plan import LOGIT_ROWS_MAX, PRECISIONS  # noqa: E402
from py_engine.session import read_model_files  # noqa: E402


def log_softmax(logits: np.ndarray) -> np.ndarray:
    z = logits.astype(np.float64)
    z -= z.max(-1, keepdims=True)
    return z - np.log(np.exp(z).sum(-1, keepdims=True))


async def compare(
    path, device, ids: list[int], precision: str = "fast", prompt: int = 0, prefill_rows: int = 0
) -> dict:
    """Feed `ids` through an exact engine and a `precision` one (the first `prompt` as a prompt,
    the rest 8 rows a forward, or prefill_rows a forward scoring their last 8) and compare every
    scored position's next-token distribution: the JSON fields above, model aside."""
    step = prefill_rows or LOGIT_ROWS_MAX
    max_rows = PREFILL_ROWS if prompt or prefill_rows else LOGIT_ROWS_MAX
    engines = [
        await Engine.load(path, device, max_rows=max_rows, context=len(ids), precision=p) for p in ("exact", precision)
    ]
    scored = []  # (exact, other) logits of each scored forward
    if prompt:
        scored.append([np.array([await e.prompt_logits(ids[:prompt])], np.float32) for e in engines])
    for start in range(prompt, len(ids), step):
        chunk = ids[start : start + step]
        rows = min(len(chunk), LOGIT_ROWS_MAX)
        scored.append([np.array(await e.rows_logits(chunk, rows), np.float32) for e in engines])
    klds, agree = [], 0
    for exact, other in scored:
        p, q = log_softmax(exact), log_softmax(other)
        klds += list((np.exp(p) * (p - q)).sum(-1))
        agree += int((exact.argmax(-1) == other.argmax(-1)).sum())
    klds = np.array(klds)
    return {
        "precision": precision,
        "prompt": prompt,
        "prefill_rows": prefill_rows,
        "tokens": len(klds),
        "mean_kld": float(klds.mean()),
        "p99_kld": float(np.percentile(klds, 99)),
        "max_kld": float(klds.max()),
        "top1_agreement": agree / len(klds),
    }


def text_ids(files, text: str, tokens: int) -> list[int]:
    """The text's token ids (the tokenizer's special tokens, BOS, included), at most `tokens`
    and the model's context."""
    return files.tokenizer.encode(text, add_special_tokens=True)[: min(tokens, files.cfg.max_position)]


async def main(args) -> dict:
    from py_engine.gpu.wgpu_host import open_wgpu_device

    model = args.model
    if not model.exists() and str(model) in MODELS:
        model = ensure_model(str(model))
    files = read_model_files(model, with_tokenizer=True)
    ids = text_ids(files, args.text.read_text(encoding="utf-8"), args.tokens)
    device = await open_wgpu_device(allow_f16=not args.f32)
    if args.int8_matmul_min_k is not None:
        linear_plan.INT8_MATMUL_MIN_K = args.int8_matmul_min_k
    if args.int8_matmul_levels is not None:
        linear_plan.INT8_MATMUL_LEVELS = args.int8_matmul_levels
    if args.gemv_q8_input_weights is not None:
        linear_plan.GEMV_Q8_INPUT_WEIGHTS = args.gemv_q8_input_weights
    tier = {
        "int8_matmul_min_k": linear_plan.INT8_MATMUL_MIN_K,
        "int8_matmul_levels": linear_plan.INT8_MATMUL_LEVELS,
        "gemv_q8_input_weights": linear_plan.GEMV_Q8_INPUT_WEIGHTS,
    }
    return {
        "model": str(args.model),
        **tier,
        **await compare(model, device, ids, args.precision, args.prompt, args.prefill_rows),
    }


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", required=True, type=Path, help="a .gguf file, an HF directory or a catalog name")
    parser.add_argument("--text", required=True, type=Path, help="a UTF-8 text file, fed teacher-forced")
    parser.add_argument("--precision", choices=PRECISIONS, default="fast", help="the precision compared to exact")
    parser.add_argument("--tokens", type=int, default=2048, help="positions scored, at most (default 2048)")
    parser.add_argument("--f32", action="store_true", help="open the device without shader-f16")
    parser.add_argument("--prompt", type=int, default=0, help="tokens to feed as a prompt first (default 0)")
    parser.add_argument("--int8-matmul-min-k", type=int, help="override linear_plan.INT8_MATMUL_MIN_K")
    parser.add_argument("--int8-matmul-levels", type=int, choices=(1, 2), help="override INT8_MATMUL_LEVELS")
    parser.add_argument("--gemv-q8-input-weights", type=int, help="override GEMV_Q8_INPUT_WEIGHTS")
    parser.add_argument(
        "--prefill-rows", type=int, default=0, help="forwards of this many rows (9 to 512) scoring their last 8"
    )
    print(json.dumps(asyncio.run(main(parser.parse_args()))))
