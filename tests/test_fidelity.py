"""Precision "fast" (int8 activations in the quantized GEMV, gemv.wgsl Q8_ACT) against "exact" on
a real model: benchmarks/fidelity.py's measure of SmolLM2 (Q4_1, its embedding and head Q8_0)
over the start of the README, within issue 28's bound (mean KL divergence <= 1e-3, top-1
agreement >= 99 %). benchmarks/fidelity.py takes 2,000 tokens of every catalog model where a row
costs less than lavapipe's second (a GPU machine)."""

import asyncio
import sys
from pathlib import Path

import pytest
from gpu_harness import device

from py_engine.model_cache import ensure_model
from py_engine.session import read_model_files

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))

from fidelity import compare, text_ids  # noqa: E402

pytestmark = pytest.mark.slow  # a real model on lavapipe

TOKENS = 16  # 2 forwards of 8 rows per precision: a row costs ~1 s on lavapipe (about 60 s in all)


def test_smollm2_fast_is_within_the_kld_bound():
    path = ensure_model("smollm2-135m-instruct")
    ids = text_ids(read_model_files(path), (ROOT / "README.md").read_text(encoding="utf-8"), TOKENS)
    got = asyncio.run(compare(path, device(True)[0], ids))
    assert got["tokens"] == TOKENS
    assert got["mean_kld"] <= 1e-3 and got["top1_agreement"] >= 0.99, got
    assert got["mean_kld"] > 0, "fast gave exact's logits: the int8 GEMV did not run"


def test_smollm2_fast_prompt_rows_within_the_kld_bound():
    """Rows computed as a prompt's (forwards of 20 rows, more than linear_plan.GEMV_MAX_ROWS,
    scoring their last 8: the prefill matmul and attention_tiled.wgsl, F16_MATH under fast where
    the device has shader-f16), from an empty cache and after 20 keys: within the same bound."""
    path = ensure_model("smollm2-135m-instruct")
    ids = text_ids(read_model_files(path), (ROOT / "README.md").read_text(encoding="utf-8"), 40)
    got = asyncio.run(compare(path, device(True)[0], ids, prefill_rows=20))
    assert got["tokens"] == TOKENS and got["prefill_rows"] == 20
    assert got["mean_kld"] <= 1e-3 and got["top1_agreement"] >= 0.99, got
