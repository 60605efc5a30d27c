"""A sliding layer's K and V caches are a ring of window - 1 + slack rows (py_engine/runtime/kv_cache.py),
not a row for every position: its keys must still be found after the ring wraps, after the decode
loop rolls back forwards it submitted past a stop, after drafts are rejected, and when the prompt
cache goes on from a prefix (or must start again from position 0). The tiny Gemma 3 fixture has a
sliding window of 8: with max_rows 8 its sliding layer keeps 8 - 1 + 15 = 22 rows, which its 16
greedy tokens after the 12-token prompt (transformers' reference) wrap already. Answers cut short,
verified in drafts or continued from the prompt cache must be the uninterrupted ones, and a longer
one that of the model built without rings; the footprint counts the rows the rings keep."""

import asyncio
import json
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from gpu_harness import collect, device

from py_engine.decode import prompt_lookup
from py_engine.decode.prompt_cache import PromptCache
from py_engine.decode.token_choice import SamplingParams
from py_engine.engine import Engine
from py_engine.models import attention_grid, attention_ops, graph_generator
from py_engine.models.builder import GraphBuilder
from py_engine.models.config import config_from_hf
from py_engine.models.graph_options import GraphOptions
from py_engine.runtime.kv_cache import ring_slack
from py_engine.runtime.memory import ModelTooLargeError, footprint

FIXTURE = Path(__file__).parent / "fixtures" / "gemma3-f32"
REF = json.loads((FIXTURE / "reference.json").read_text())
PROMPT = REF["prompt_ids"]
GREEDY = SamplingParams()
RING = 8 - 1 + 15  # the fixture's window - 1 + ring_slack(8): the decode loop's rollback of 15


def load(rings: bool = True, **options) -> Engine:
    options = {"max_rows": 8, "context": 64, **options}
    return asyncio.run(Engine.load(FIXTURE, device(False)[0], kv_rings=rings, **options))


@pytest.fixture(scope="module")
def ringed():
    return load()


@pytest.fixture(scope="module")
def answer(ringed):
    """36 greedy tokens, uninterrupted: the first 16 are transformers'."""
    ringed.reset()
    tokens = asyncio.run(collect(ringed.generate(PROMPT, 36, GREEDY)))
    assert tokens[:16] == REF["greedy"] and ringed.pos == len(PROMPT) + 35 > 2 * RING
    return tokens


def cache_rows(engine) -> list[int]:
    cfg = engine.cfg
    per_row = cfg.num_kv_heads * cfg.head_dim * 4  # f32 K
    return [t.nbytes // per_row for t in engine.executor.graph.tensors if t.name.startswith("k_cache")]


def test_only_sliding_layers_keep_a_ring(ringed, answer):
    assert cache_rows(ringed) == [RING, 64]  # the sliding layer, the full one
    assert cache_rows(load(rings=False)) == [64, 64]


def test_a_stop_mid_group_rolls_back_within_the_ring(ringed, answer):
    """Two submits of up to 8 forwards in flight past the stop: the positions they wrote must not
    have overwritten the window before it, so the rest of the answer still follows."""
    k = next(i for i in range(RING, 30) if answer[i] not in answer[:i])  # a first occurrence, past a lap
    ringed.reset()
    ringed.tokens_per_submit = 8  # the most (kv_cache.TOKENS_PER_SUBMIT)
    got = asyncio.run(collect(ringed.generate(PROMPT, 50, GREEDY, stop_ids={answer[k]})))
    ringed.tokens_per_submit = None
    assert got == answer[: k + 1] and ringed.pos == len(PROMPT) + k
    assert ringed.kv_writes.end >= ringed.pos + 8  # forwards past the stop were written and discarded
    assert asyncio.run(collect(ringed.generate([answer[k]], 35 - k, GREEDY))) == answer[k + 1 :]


def test_drafts_verified_over_a_wrapped_ring(ringed, answer):
    """picks_after's rows (as prompt lookup verifies drafts) past a lap, a rejected draft rolled
    back and its positions written again."""
    tokens = answer

    async def run():
        ringed.reset()
        ringed.device.submit(ringed.prefill_commands(PROMPT + tokens[:23]))
        accepted = await ringed.picks_after([tokens[23]] + tokens[24:31])
        wrong = await ringed.picks_after([tokens[31], 7, 7, 7])
        ringed.roll_back(ringed.pos - 3)  # the rejected drafts: rewritten by the next forward
        return accepted, wrong, await ringed.picks_after([tokens[32]] + tokens[33:35])

    accepted, wrong, again = asyncio.run(run())
    assert accepted == tokens[24:32] and wrong[0] == tokens[32] and again == tokens[33:36]


def test_a_chat_reuses_the_rings_or_computes_again(ringed, answer):
    """A turn stopped with forwards in flight, then one that reuses all of it (the rings hold the
    window before it), then one that shares only the prompt with what was written far past it:
    computed again from position 0. Each answered as a fresh engine answers it."""
    k = next(i for i in range(16, 30) if answer[i] not in answer[:i])
    cache = PromptCache(ringed)
    cache.reset()
    first = asyncio.run(collect(cache.generate(PROMPT, 36, GREEDY, {answer[k]})))
    assert first == answer[: k + 1]
    got = {}
    for ids, reused in [(PROMPT + first + [5, 6, 7], len(PROMPT) + k), (PROMPT + [5, 6, 7], 0)]:
        got[len(ids)] = asyncio.run(collect(cache.generate(ids, 6, GREEDY, ())))
        assert (cache.reused, cache.prefilled) == (reused, len(ids) - reused)
    for ids in (PROMPT + first + [5, 6, 7], PROMPT + [5, 6, 7]):
        ringed.reset()
        assert got[len(ids)] == asyncio.run(collect(ringed.generate(ids, 6, GREEDY)))


def test_packed_rings_fit_a_budget_full_caches_exceed():
    """WebKit's packed-f16 KV in rings: the budget check counts the rings' rows, so a budget the
    full caches exceed still loads, and its greedy tokens are transformers'."""
    rings = load(packed_kv=True, context=256)
    assert rings.footprint.kv_cache == rings.executor.kv_bytes == (RING + 256) * 2 * (2 * 24 * 2)  # K, V
    budget = rings.footprint.total + (256 - RING) * 2 * 24 * 2  # half what the full sliding layer adds
    with pytest.raises(ModelTooLargeError):
        load(rings=False, packed_kv=True, context=256, gpu_budget=budget)
    assert rings.footprint.total <= budget  # Engine.load's check, passed
    assert asyncio.run(collect(rings.generate(PROMPT, 16, GREEDY))) == REF["greedy"]


@pytest.mark.slow  # two engines, 60 tokens each, and again with prompt lookup
def test_a_long_answer_in_rings_is_the_full_caches_one(monkeypatch):
    """60 tokens: the ring wrapped three times, against the model without rings. With one split
    merged in the O projection at most, the full layer (two splits of 64 keys at context 128) stops
    folding past 64 keys while the ring (one split) folds on: tokens on both sides of that take
    plans where only some layers fold. The model without rings folds nowhere. Prompt lookup,
    verifying at every token it can, hands over and rolls back throughout: the same tokens. The
    GPU's splits on a CPU adapter too (lavapipe's plan would hold each layer's keys in one)."""
    last_logits = lambda e: np.frombuffer(asyncio.run(e.device.read_buffer(e.logits_buffer, 0, 384 * 4)), np.float32)  # noqa: E731
    monkeypatch.setattr(attention_grid, "CPU_SPLITS", attention_grid.FEW_ROWS_SPLITS)
    monkeypatch.setattr(attention_ops, "MERGE_WORK", 1)
    ringed = load(context=128)
    graph = ringed.executor.graph
    assert graph.fold_levels == [64, 128] and graph.folds(1, 65) == 128
    got = asyncio.run(collect(ringed.generate(PROMPT, 60, GREEDY)))
    ringed_logits = last_logits(ringed)
    monkeypatch.setattr(prompt_lookup, "STREAK", 0)
    ringed.reset()
    assert asyncio.run(collect(ringed.generate(PROMPT, 60, SamplingParams(lookup=True)))) == got
    assert ringed.drafter.drafted > 0 and ringed.pos == len(PROMPT) + 59  # drafts verified, rejected ones rolled back
    monkeypatch.setattr(attention_ops, "MERGE_WORK", 0)
    plain = load(rings=False, context=128)
    assert plain.executor.graph.fold_levels == []
    assert asyncio.run(collect(plain.generate(PROMPT, 60, GREEDY))) == got
    want = last_logits(plain)
    np.testing.assert_allclose(ringed_logits, want, rtol=0, atol=1e-5 * np.abs(want).max())


# Gemma-3-270M's shape: 18 layers, every sixth full, window 512, one KV head of 256.
GEMMA3_270M = {
    "architectures": ["Gemma3ForCausalLM"],
    "vocab_size": 262144,
    "hidden_size": 640,
    "intermediate_size": 2048,
    "num_hidden_layers": 18,
    "num_attention_heads": 4,
    "num_key_value_heads": 1,
    "head_dim": 256,
    "sliding_window": 512,
    "max_position_embeddings": 32768,
    "tie_word_embeddings": True,
    "query_pre_attn_scalar": 256,
}


def shaped_like(cfg):
    """tensor_info for a checkpoint of cfg's shape (bf16), without a file."""
    q, kv = cfg.num_heads * cfg.head_dim, cfg.num_kv_heads * cfg.head_dim
    shapes = {
        "embed_tokens": (cfg.vocab_size, cfg.hidden_size),
        "q_proj": (q, cfg.hidden_size),
        "k_proj": (kv, cfg.hidden_size),
        "v_proj": (kv, cfg.hidden_size),
        "o_proj": (cfg.hidden_size, q),
        "gate_proj": (cfg.intermediate_size, cfg.hidden_size),
        "up_proj": (cfg.intermediate_size, cfg.hidden_size),
        "down_proj": (cfg.hidden_size, cfg.intermediate_size),
        "q_norm": (cfg.head_dim,),
        "k_norm": (cfg.head_dim,),
    }

    def info(name):
        shape = next((s for key, s in shapes.items() if f".{key}." in name), (cfg.hidden_size,))
        return SimpleNamespace(name=name, dtype="BF16", shape=shape, path="gemma-3-270m-shaped")

    return info


@pytest.mark.parametrize("kv_formats,bytes_per_row", [(("f32", "f16"), 1024 + 512), (("f16_packed",) * 2, 512 + 512)])
@pytest.mark.parametrize("context", [2048, 32768])
def test_gemma3_270m_footprint_counts_the_rings(context, kv_formats, bytes_per_row):
    """15 sliding layers keep 512 - 1 + 128 rows (max_rows 128), the 3 full ones the context: the
    footprint that gpu_budget (and WebKit's) checks is theirs."""
    cfg = config_from_hf(GEMMA3_270M, "gemma-3-270m")

    def kv_bytes(slack):
        options = GraphOptions(128, context, True, kv_formats, 128 << 20, slack)
        b = GraphBuilder(cfg, shaped_like(cfg), options)
        graph = graph_generator(cfg.architecture)(b)
        return footprint(graph, cfg.vocab_size, context).kv_cache

    assert kv_bytes(0) == 18 * context * bytes_per_row
    assert kv_bytes(ring_slack(128)) == (15 * (512 - 1 + 128) + 3 * context) * bytes_per_row
