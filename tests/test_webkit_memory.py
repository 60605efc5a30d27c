"""WebKit's memory discipline, on the desktop engine (lavapipe): WebKit kills the web-content
process without a warning above about 1.5-2 GB, and Metal has miscompiled native f16 code.

The browser worker configures a load with py_engine/web/webkit.py's load_policy: on WebKit the
context defaults to 512 and never exceeds 2048, no kernel uses a native f16 type, the KV cache is
packed f16, and the model's GPU footprint is checked against a budget before anything is uploaded.
The same engine options run here; tests/test_browser_webkit.py runs them in Chromium as an iPad."""

import asyncio
import json
import re
from pathlib import Path

import numpy as np
import pytest
from gpu_harness import device

from py_engine.decode.token_choice import SamplingParams
from py_engine.engine import Engine
from py_engine.errors import WispError
from py_engine.model_cache import ensure_model
from py_engine.runtime.memory import ModelTooLargeError
from py_engine.web.webkit import load_policy

FIXTURES = Path(__file__).parent / "fixtures"
WEBKIT = {"webkit": True, "reason": "iOS device (iPad)"}


def test_policy_desktop_changes_nothing():
    policy = load_policy({"webkit": False}, {})
    assert policy == {
        "context": 2048,
        "allow_f16": True,
        "packed_kv": False,
        "gpu_budget": None,
        "precision": "fast",
        "workarounds": [],
    }
    assert load_policy(None, {"f32": True, "context": 4096})["allow_f16"] is False
    assert load_policy(None, {"context": 4096})["context"] == 4096  # only WebKit is clamped


def test_policy_webkit_context_f16_kv_and_budget():
    policy = load_policy(WEBKIT, {})
    assert policy["context"] == 512 and "context-512" in policy["workarounds"]
    assert policy["allow_f16"] is False and policy["packed_kv"] is True
    assert {"no-native-f16", "packed-f16-kv", "gpu-budget"} <= set(policy["workarounds"])
    assert policy["gpu_budget"] == 1200 << 20
    assert load_policy(WEBKIT, {"context": 1024})["context"] == 1024
    clamped = load_policy(WEBKIT, {"context": 8192})
    assert clamped["context"] == 2048 and "context-2048" in clamped["workarounds"]
    assert load_policy(WEBKIT, {"gpu_budget_mb": 300})["gpu_budget"] == 300 << 20
    for bad in ({"context": 0}, {"context": "many"}, {"gpu_budget_mb": -5}):
        with pytest.raises(WispError, match="positive whole number"):
            load_policy(WEBKIT, bad)


def test_policy_precision_is_the_load_options_everywhere():
    """The worker's load option `precision` reaches Engine.load as is, on WebKit too."""
    for platform in (None, WEBKIT):
        assert load_policy(platform, {"precision": "exact"})["precision"] == "exact"
        assert load_policy(platform, {"precision": None})["precision"] == "fast"
    with pytest.raises(WispError, match="precision"):
        load_policy(None, {"precision": "f16"})


class RecordingDevice:
    """The lavapipe device, recording every kernel source and buffer it is asked for."""

    def __init__(self, dev):
        self._dev, self.sources, self.buffers = dev, [], []

    def __getattr__(self, name):
        return getattr(self._dev, name)

    def create_kernel(self, label, source, bindings, entry="main"):
        self.sources.append((label, source))
        return self._dev.create_kernel(label, source, bindings, entry)

    def create_buffer(self, size, kind="storage", label=""):
        self.buffers.append((label, size))
        return self._dev.create_buffer(size, kind, label)


def strip_comments(wgsl: str) -> str:
    return re.sub(r"//[^\n]*", "", wgsl)


@pytest.mark.parametrize("name", ["qwen3-f16", "llama-bf16"])
def test_webkit_variants_have_no_native_f16_and_match(name):
    """f16 and bf16 checkpoints as WebKit runs them: every kernel free of f16 types (weights read
    as packed pairs, KV packed), greedy tokens equal to transformers'."""
    ref = json.loads((FIXTURES / name / "reference.json").read_text())
    dev = RecordingDevice(device(False)[0])

    async def run():
        engine = await Engine.load(FIXTURES / name, dev, max_rows=64, context=64, packed_kv=True, precision="exact")
        return engine, [t async for t in engine.generate(ref["prompt_ids"], 16, SamplingParams())]

    engine, tokens = asyncio.run(run())
    assert tokens == ref["greedy"]
    assert engine.kv_formats == ("f16_packed", "f16_packed")
    native = [label for label, src in dev.sources if "enable f16" in src or re.search(r"\bf16\b", strip_comments(src))]
    assert dev.sources and not native, f"kernels with native f16 on the WebKit path: {native}"


def test_packed_kv_halves_the_cache_and_footprint_matches_allocations():
    async def load(packed):
        dev = RecordingDevice(device(False)[0])
        engine = await Engine.load(FIXTURES / "qwen2-f32", dev, max_rows=16, context=128, packed_kv=packed)
        return engine, dev

    plain, plain_dev = asyncio.run(load(False))
    packed, packed_dev = asyncio.run(load(True))
    assert packed.footprint.kv_cache * 2 == plain.footprint.kv_cache  # K and V: f32 → packed f16
    for engine, dev in ((plain, plain_dev), (packed, packed_dev)):
        allocated = {label: size for label, size in dev.buffers}
        caches = sum(size for label, size in dev.buffers if label.startswith(("k_cache", "v_cache")))
        assert caches == engine.footprint.kv_cache == engine.executor.kv_bytes
        pooled = sum(size for label, size in dev.buffers if label == "activation")
        assert pooled == engine.footprint.activations == engine.executor.activation_bytes
        assert engine.footprint.weights == engine.weight_bytes  # the tied LM head counted once
        assert allocated  # the footprint is the plan the executor then allocates


def test_budget_refuses_before_any_upload():
    dev = RecordingDevice(device(False)[0])
    with pytest.raises(ModelTooLargeError) as info:
        asyncio.run(Engine.load(FIXTURES / "llama-f32", dev, context=256, gpu_budget=64 << 10))
    message = str(info.value)
    assert "llama-f32" in message and "context of 256 tokens" in message and "budget of 64 KB" in message
    assert "weights" in message and "KV cache" in message
    assert dev.buffers == [], "buffers were created before the refusal"


def test_budget_suggests_a_context_that_fits():
    dev = device(False)[0]

    async def need(context):
        engine = await Engine.load(FIXTURES / "llama-f32", dev, context=context, packed_kv=True)
        return engine.footprint

    small, large = asyncio.run(need(64)), asyncio.run(need(256))
    budget = (small.total + large.total) // 2
    with pytest.raises(ModelTooLargeError, match=r"a context of at most (\d+) tokens would fit") as info:
        asyncio.run(Engine.load(FIXTURES / "llama-f32", dev, context=256, packed_kv=True, gpu_budget=budget))
    suggested = int(re.search(r"at most (\d+) tokens", str(info.value)).group(1))
    assert 64 <= suggested < 256
    asyncio.run(
        Engine.load(FIXTURES / "llama-f32", dev, context=suggested, packed_kv=True, gpu_budget=budget)
    )  # the suggestion really fits


@pytest.mark.slow  # the real SmolLM2
def test_smollm2_as_webkit_runs_it_matches_transformers():
    """The default model on the WebKit path (f32 kernels, packed-f16 KV cache) against the
    transformers GGUF reference, as test_real_models checks the desktop f16 path (its first chat
    prompt only: the f32 path on lavapipe takes about a minute per prompt)."""
    from test_real_models import REFERENCES

    ref = json.loads((REFERENCES / "smollm2-135m-instruct.json").read_text())
    path = ensure_model("smollm2-135m-instruct")
    dev = device(False)[0]

    async def run():
        engine = await Engine.load(path, dev, max_rows=64, context=512, packed_kv=True, precision="exact")
        out = []
        for case in ref["cases"][:1]:
            engine.reset()
            logits = np.array(await engine.prompt_logits(case["prompt_ids"]))[case["logit_ids"]]
            engine.reset()
            tokens = [t async for t in engine.generate(case["prompt_ids"], len(case["greedy"]), SamplingParams())]
            out.append(
                (np.abs(logits - np.array(case["logits"])).max() / case["max_abs_logit"], tokens, case["greedy"])
            )
        return out

    for rel, tokens, greedy in asyncio.run(run()):
        assert rel <= 1e-2 and tokens == greedy, (rel, tokens, greedy)
