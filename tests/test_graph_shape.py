"""The decoder graph's dispatch count per layer: a decode token pays for every dispatch, so a fused
kernel that comes apart shows here first (at most 5 a layer for Llama, Qwen2/3 and Mistral, its
sliding layers' KV rings included). Built from each family's tiny fixture, no GPU needed."""

from dataclasses import replace
from pathlib import Path

import pytest

from py_engine.formats.model_files import read_model, tensor_info
from py_engine.formats.source import open_source
from py_engine.models import attention_ops, graph_generator
from py_engine.models.builder import GraphBuilder
from py_engine.models.graph_options import GraphOptions
from py_engine.runtime.linear_plan import arithmetic

FIXTURES = Path(__file__).parent / "fixtures"


def build(
    name: str, max_binding: int = 128 << 20, kv_capacity: int = 64, ring_slack: int = 0, info=None, precision="fast"
):
    """info: rewrites each tensor's TensorInfo (a dtype the fixture does not have)."""
    source = open_source(FIXTURES / name)
    cfg, tensors, _ = read_model(source)
    b = GraphBuilder(
        cfg,
        lambda n: (info or (lambda t: t))(tensor_info(tensors, n, source.label)),
        GraphOptions(16, kv_capacity, max_binding=max_binding, ring_slack=ring_slack, precision=precision),
    )
    return cfg, graph_generator(cfg.architecture)(b)


@pytest.mark.parametrize("precision", ["fast", "exact"])
def test_precision_reaches_the_gemv_of_block_formats(precision):
    """precision "fast" specialises every linear op over a block format for int8 activations
    (gemv.wgsl Q8_ACT); "exact", and float weights under either, keep f32 arithmetic."""
    as_q8 = lambda t: replace(t, dtype="Q8_0") if len(t.shape) == 2 and t.shape[1] % 32 == 0 else t  # noqa: E731
    _, graph = build("llama-f32", info=as_q8, precision=precision)
    linear = [op.defines for op in graph.ops if op.kernel == "linear"]
    assert {d["WEIGHTS"] for d in linear} == {"q8_0", "f32"}  # the fixture's down_proj: K = 112
    assert all(d["Q8_ACT"] == (precision == "fast" and d["WEIGHTS"] == "q8_0") for d in linear)
    _, graph = build("llama-f32", precision=precision)
    assert not any(op.defines["Q8_ACT"] for op in graph.ops if op.kernel == "linear")


def test_fast_runs_exact_where_int8_dot_products_are_missing_or_emulated():
    """linear_plan.arithmetic, which Engine.load asks with the device's capabilities: a browser
    without packed integer dot products, or whose adapter emulates them (SwiftShader, the CPU
    fallback, where int8 activations measured slower), runs "fast" as "exact"; lavapipe keeps it."""
    assert arithmetic("fast", int8_dot=True, int8_emulated=False) == "fast"
    assert arithmetic("fast", int8_dot=False, int8_emulated=False) == "exact"
    assert arithmetic("fast", int8_dot=True, int8_emulated=True) == "exact"
    assert arithmetic("exact", int8_dot=True, int8_emulated=False) == "exact"
    with pytest.raises(ValueError, match="precision"):
        arithmetic("fastest", int8_dot=False, int8_emulated=False)


@pytest.mark.parametrize("name", ["llama-f32", "mistral-f32", "qwen2-f32", "qwen3-f32"])
def test_ops_per_layer(name):
    """A decode token: norm + QKV, (QK-norm) RoPE + KV append + attention, the splits' merge + O +
    residual, norm + gate|up + act, down + residual. With more keys than fold_until the merge is a
    dispatch of its own; a prefill forward keeps it and RoPE + KV append apart too. Mistral's
    sliding layers keep a ring (window 8 + slack 16 - 1 rows) and the same dispatches."""
    cfg, graph = build(name, ring_slack=16)
    assert (graph.ring_slack is not None) == (name == "mistral-f32")
    # attention_splits: 64 keys a split; attention_ops.MERGE_WORK, 1 x block a thread
    assert graph.fold_until == 64 * attention_ops.MERGE_WORK
    assert graph.folds(1, graph.fold_until) and not graph.folds(1, graph.fold_until + 1) and not graph.folds(2, 2)
    assert graph.ops_per_layer(cfg.num_layers, fold=True) == 5
    assert graph.ops_per_layer(cfg.num_layers) == 6
    assert graph.ops_per_layer(cfg.num_layers, rows=16) == 7
    assert not any(op.kernel in ("rmsnorm", "gated_mul") for op in graph.ops[1:-2])


def test_gate_up_over_one_binding_keeps_its_own_activation():
    """gate | up split over two bindings: the projection shards, then gated_mul (8 a layer)."""
    cfg, graph = build("llama-f32", max_binding=4096)
    assert "gated_mul" in [op.kernel for op in graph.ops]


def test_a_ring_folds_its_merge_by_its_own_splits(monkeypatch):
    """A decode token merges each layer's attention splits in its O projection while that layer's
    keys fill few splits. With at most one (MERGE_WORK 1), Gemma 3's full layer (two splits of 64
    keys at context 128) stops folding past 64 keys while its sliding layer's ring (8 + 16 - 1
    rows, one split) folds on: its merge stays in the O projection, the full layer's is dispatched."""
    monkeypatch.setattr(attention_ops, "MERGE_WORK", 1)
    cfg, graph = build("gemma3-f32", kv_capacity=128, ring_slack=16)
    combines = [op for op in graph.ops if op.kernel == "attention_combine"]
    assert [op.fold_until for op in combines] == [128, 64] and graph.fold_levels == [64, 128]
    assert [graph.folds(1, kv_len) for kv_len in (1, 64, 65, 128)] == [64, 64, 128, 128] and not graph.folds(2, 2)
    merges = {kv_len: [graph.dispatched(op, 1, graph.folds(1, kv_len)) for op in combines] for kv_len in (64, 65)}
    assert merges == {64: [False, False], 65: [False, True]}
    folded = [op.folded(graph.folds(1, 65)) for op in graph.ops if op.fold_defines]  # the O projections
    assert folded == [True, False]
