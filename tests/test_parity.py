"""Tiny random HF models vs transformers: last-position logits and 16 greedy tokens.

Each fixture runs on the f16 path (where the adapter has shader-f16) and with the f32 path
forced, and as WebKit runs it (the f32 path with the KV cache in packed f16: no native f16
type in any kernel); max_rows 5 splits the 12-token prompt into chunks, max_rows 64 runs it in one forward.
A 12-row forward still takes the GEMV; test_long_prefill_through_matmul covers the tiled matmul."""

import asyncio
import json
from pathlib import Path

import numpy as np
import pytest
from gpu_harness import device

from py_engine.decode.token_choice import SamplingParams
from py_engine.engine import Engine

FIXTURES = Path(__file__).parent / "fixtures"
# The text fixtures (a vision fixture's reference has its own keys: test_vision_smolvlm_model.py).
NAMES = sorted(p.parent.name for p in FIXTURES.glob("*/reference.json") if "prompt_ids" in json.loads(p.read_text()))
PATHS = [("f16", 64), ("f32", 64), ("f32", 5), ("webkit", 64)]


async def run(model_dir: Path, dev, max_rows: int, ref: dict, packed_kv: bool = False):
    engine = await Engine.load(model_dir, dev, max_rows=max_rows, context=64, packed_kv=packed_kv, precision="exact")
    logits = np.array(await engine.prompt_logits(ref["prompt_ids"]))
    engine.reset()
    tokens = [t async for t in engine.generate(ref["prompt_ids"], 16, SamplingParams())]
    return logits, tokens


@pytest.mark.parametrize("path,max_rows", PATHS, ids=[f"{p}-rows{r}" for p, r in PATHS])
@pytest.mark.parametrize("name", NAMES)
def test_matches_transformers(name, path, max_rows):
    f16 = path == "f16"
    if f16 and not device(True)[0].caps.shader_f16:
        pytest.skip("adapter has no shader-f16")
    ref = json.loads((FIXTURES / name / "reference.json").read_text())
    logits, tokens = asyncio.run(run(FIXTURES / name, device(f16)[0], max_rows, ref, packed_kv=path == "webkit"))
    want = np.array(ref["logits"], dtype=np.float64)
    rel = np.abs(logits - want).max() / np.abs(want).max()
    assert rel <= (3e-3 if path == "webkit" else 1e-3), f"max|Δlogit|/max|ref| = {rel:.2e}"  # webkit: K in f16 too
    assert tokens == ref["greedy"]


def test_every_architecture_has_fixtures():
    from py_engine.models import ARCHITECTURES

    archs = {json.loads((FIXTURES / n / "config.json").read_text())["architectures"][0] for n in NAMES}
    assert archs == set(ARCHITECTURES)


@pytest.mark.parametrize("name", ["llama-f32", "qwen2-bf16", "qwen3-f16"])
def test_weights_split_over_many_bindings(name):
    """With a 4 KiB binding limit every matrix (embedding, tied LM head, biased QKV) is split
    into shards: the logits must not change."""
    ref = json.loads((FIXTURES / name / "reference.json").read_text())

    async def logits(dev):
        engine = await Engine.load(FIXTURES / name, dev, max_rows=16, context=32, max_binding=4096, precision="exact")
        ops = engine.executor.graph.ops
        assert sum(op.kernel == "embedding" for op in ops) > 1
        assert sum(op.kernel == "linear" and op.fixed_rows == 1 for op in ops) > 1  # the LM head
        return np.array(await engine.prompt_logits(ref["prompt_ids"]))

    want = np.array(ref["logits"])
    got = asyncio.run(logits(device(False)[0]))
    assert np.abs(got - want).max() / np.abs(want).max() <= 1e-5


@pytest.mark.parametrize("f16", [True, False], ids=["f16", "f32"])
@pytest.mark.parametrize("name", NAMES)
def test_long_prefill_through_matmul(name, f16):
    """Prompt + the first 15 greedy tokens in one forward (27 rows: the tiled matmul, not the
    GEMV): the last position must predict the 16th greedy token."""
    if f16 and not device(True)[0].caps.shader_f16:
        pytest.skip("adapter has no shader-f16")
    from py_engine.runtime.linear_plan import choose_linear

    ref = json.loads((FIXTURES / name / "reference.json").read_text())
    ids = ref["prompt_ids"] + ref["greedy"][:-1]
    assert choose_linear(len(ids)) == "matmul"

    async def logits(dev):
        engine = await Engine.load(FIXTURES / name, dev, max_rows=64, context=64, precision="exact")
        return np.array(await engine.prompt_logits(ids))

    assert int(np.argmax(asyncio.run(logits(device(f16)[0])))) == ref["greedy"][-1]


def test_longrope_keys_follow_the_sequence_length():
    """Phi-3's LongRoPE rotates a whole sequence with the long factors once it is longer than the
    original context (16 in the fixture): a generation that crosses it, a cached turn after it and
    a new short conversation after that give what a fresh engine gives on the same ids."""
    from py_engine.decode.prompt_cache import PromptCache

    ref = json.loads((FIXTURES / "phi3-f32" / "reference.json").read_text())
    prompt = ref["prompt_ids"]

    async def fresh(dev, ids, n):
        engine = await Engine.load(FIXTURES / "phi3-f32", dev, max_rows=8, context=64, precision="exact")
        return [t async for t in engine.generate(ids, n, SamplingParams())], await last_logits(engine)

    async def last_logits(engine):  # of the last forward's LM head
        return np.frombuffer(await engine.device.read_buffer(engine.logits_buffer, 0, 384 * 4), np.float32)

    async def turns(dev):
        engine = await Engine.load(FIXTURES / "phi3-f32", dev, max_rows=8, context=64, precision="exact")
        cache, out = PromptCache(engine), []
        for turn, n in ((1, 8), (2, 6), (3, 1)):
            # 2: turn 1 + its answer + 3 ids; 3: its first 16 ids (short again: cached keys are long)
            first = out[0][1] if out else []
            ids = {1: prompt, 2: prompt + first + [5, 6, 7], 3: prompt + first[:4]}[turn]
            answer = [t async for t in cache.generate(ids, n, SamplingParams(), ())]
            out.append((ids, answer, engine.rope_long, await last_logits(engine), *await fresh(dev, ids, n)))
        return out

    out = asyncio.run(turns(device(False)[0]))
    assert out[0][1] == ref["greedy"][:8]
    assert [o[2] for o in out] == [True, True, False]
    for ids, answer, _, logits, fresh_answer, fresh_logits in out:
        assert answer == fresh_answer, len(ids)
        np.testing.assert_allclose(logits, fresh_logits, rtol=0, atol=1e-4 * np.abs(fresh_logits).max())


@pytest.mark.parametrize("gemma", ["gemma3", "gemma4"])
def test_gemma_text_tower_of_a_multimodal_checkpoint(tmp_path, gemma):
    """A Gemma3/4ForConditionalGeneration checkpoint: its text_config and its text tower's weights
    (model.language_model.*, beside a vision tower's) give the causal LM's logits."""
    from safetensors.numpy import load_file, save_file

    fixture = FIXTURES / f"{gemma}-f32"
    text = json.loads((fixture / "config.json").read_text())
    family = gemma.capitalize()
    config = {"architectures": [f"{family}ForConditionalGeneration"], "text_config": text, "dtype": "float32"}
    (tmp_path / "config.json").write_text(json.dumps(config))
    weights = {
        ("lm_head.weight" if name == "lm_head.weight" else "model.language_model." + name[len("model.") :]): w
        for name, w in load_file(fixture / "model.safetensors").items()
    }
    weights["model.vision_tower.patch_embedding.weight"] = np.ones((4, 4), np.float32)
    save_file(weights, tmp_path / "model.safetensors")
    ref = json.loads((fixture / "reference.json").read_text())

    dev = device(False)[0]

    async def logits(path):
        engine = await Engine.load(path, dev, max_rows=16, context=32, precision="exact")
        return engine.cfg.architecture, np.array(await engine.prompt_logits(ref["prompt_ids"]))

    arch, got = asyncio.run(logits(tmp_path))
    assert arch == f"{family}ForCausalLM"
    np.testing.assert_array_equal(got, asyncio.run(logits(fixture))[1])
