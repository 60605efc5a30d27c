"""Hybrids' recurrent state (py_engine/runtime/recurrent_state.py): a conv window or DeltaNet state holds
one position only, so every way the engine goes back — the decode loop's forwards past a stop,
rejected drafts, a chat's next turn from the prefix it shares, a cancel — restores a snapshot and
recomputes from there. Each answer must be the one an uninterrupted run gives; a 300-token
prompt's last logits must still be transformers' (the state does not drift), and so must those
of another layer pattern; the footprint counts the states and their snapshots. Both families'
tiny fixtures (tools/make_fixtures.py)."""

import asyncio
import json
from pathlib import Path

import numpy as np
import pytest
from gpu_harness import collect, device

from py_engine.decode import prompt_lookup
from py_engine.decode.prompt_cache import PromptCache
from py_engine.decode.token_choice import SamplingParams
from py_engine.engine import Engine
from py_engine.runtime.recurrent_state import SLOTS

FIXTURES = Path(__file__).parent / "fixtures"
HYBRIDS = ["qwen3_5-f32", "lfm2-f32"]
GREEDY = SamplingParams()


def reference(name: str) -> dict:
    return json.loads((FIXTURES / name / "reference.json").read_text())


def load(name: str, **options) -> Engine:
    options = {"max_rows": 8, "context": 96, "precision": "exact", **options}
    return asyncio.run(Engine.load(FIXTURES / name, device(False)[0], **options))


@pytest.fixture(scope="module", params=HYBRIDS)
def hybrid(request):
    """(engine, reference, 40 greedy tokens uninterrupted: the first 16 are transformers')."""
    engine, ref = load(request.param), reference(request.param)
    tokens = asyncio.run(collect(engine.generate(ref["prompt_ids"], 40, GREEDY)))
    assert tokens[:16] == ref["greedy"]
    return engine, ref, tokens


@pytest.mark.parametrize("name", HYBRIDS)
def test_a_300_token_prompt_keeps_its_state(name):
    """One prefill of 300 tokens in forwards of 64 rows: the last logits are transformers'."""
    ref = reference(name)
    engine = load(name, max_rows=64, context=320)
    got = np.array(asyncio.run(engine.prompt_logits(ref["long_prompt_ids"])))
    want = np.array(ref["long_logits"])
    assert np.abs(got - want).max() / np.abs(want).max() <= 1e-3


@pytest.mark.parametrize("name", HYBRIDS)
def test_another_layer_pattern(name):
    """A second model of each family with attention first (fixtures' <name>/pattern/)."""
    ref = json.loads((FIXTURES / name / "pattern" / "reference.json").read_text())
    engine = asyncio.run(
        Engine.load(FIXTURES / name / "pattern", device(False)[0], max_rows=16, context=32, precision="exact")
    )
    assert engine.cfg.layer_types == ref["layer_types"]
    got = np.array(asyncio.run(engine.prompt_logits(ref["prompt_ids"])))
    want = np.array(ref["logits"])
    assert np.abs(got - want).max() / np.abs(want).max() <= 1e-3


def test_a_stop_mid_group_goes_back_to_its_snapshot(hybrid):
    """Forwards past the stop were submitted (the state absorbed them); the next forward
    restores the group's snapshot and recomputes at most a group's tokens."""
    engine, ref, answer = hybrid
    prompt = ref["prompt_ids"]
    k = next(i for i in range(12, 30) if answer[i] not in answer[:i])
    engine.reset()
    engine.tokens_per_submit = 8
    got = asyncio.run(collect(engine.generate(prompt, 50, GREEDY, stop_ids={answer[k]})))
    engine.tokens_per_submit = None
    assert got == answer[: k + 1] and engine.pos == len(prompt) + k
    assert engine.recurrent.pos > engine.pos  # it went past the stop
    before = engine.recomputed
    assert asyncio.run(collect(engine.generate([answer[k]], 39 - k, GREEDY))) == answer[k + 1 :]
    assert 0 < engine.recomputed - before <= 8


def test_drafts_rejected_roll_the_state_back(hybrid, monkeypatch):
    """Prompt lookup verifying at every chance: rejected drafts are undone (the snapshot before
    the verifying forward, then the accepted rows again); greedy tokens unchanged."""
    engine, ref, answer = hybrid
    monkeypatch.setattr(prompt_lookup, "STREAK", 0)
    engine.reset()
    got = asyncio.run(collect(engine.generate(ref["prompt_ids"], 40, SamplingParams(lookup=True))))
    assert got == answer and engine.drafter.drafted > engine.drafter.accepted


def test_a_chat_turn_goes_on_from_the_shared_prefix(hybrid):
    """Turn 1 stops mid-group; turn 2 (turn 1 + its answer + more) resumes from the snapshot at
    or before the shared prefix; turn 3 drops turn 2's answer (as Qwen3.5's template drops a
    turn's reasoning) and resumes from turn 2's prompt end. Each is what a fresh engine answers
    for the whole conversation."""
    engine, ref, answer = hybrid
    prompt = ref["prompt_ids"]
    k = next(i for i in range(12, 30) if answer[i] not in answer[:i])
    cache = PromptCache(engine)
    cache.reset()
    first = asyncio.run(collect(cache.generate(prompt, 40, GREEDY, {answer[k]})))
    assert first == answer[: k + 1]
    turns = [prompt + first + [5, 6, 7], prompt + first + [5, 6, 7, 9, 8, 7, 6]]
    got, recomputed = [], []
    for ids in turns:
        before = engine.recomputed
        got.append(asyncio.run(collect(cache.generate(ids, 8, GREEDY, ()))))
        recomputed.append(engine.recomputed - before)
    assert recomputed[0] <= 8 and recomputed[1] == 0 and cache.reused == len(turns[0])
    fresh = load(HYBRIDS[0] if engine.cfg.architecture.startswith("Qwen") else HYBRIDS[1])
    for ids, tokens in zip(turns, got):
        fresh.reset()
        assert tokens == asyncio.run(collect(fresh.generate(ids, 8, GREEDY)))


def test_a_cancel_leaves_the_state_recomputable(hybrid):
    """A generation closed early (the page's stop button) then continued from its last token."""
    engine, ref, answer = hybrid
    engine.reset()
    first = asyncio.run(collect(engine.generate(ref["prompt_ids"], 40, GREEDY), limit=10))
    assert first == answer[:10]
    assert asyncio.run(collect(engine.generate([answer[9]], 30, GREEDY))) == answer[10:]


def test_the_footprint_counts_states_and_snapshots(hybrid):
    engine = hybrid[0]
    graph = engine.executor.graph
    state = sum(t.nbytes for t in graph.recurrent)
    assert state and engine.footprint.recurrent == (1 + SLOTS) * state
    assert engine.footprint.kv_cache == engine.executor.kv_bytes - state
