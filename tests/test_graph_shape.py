"""The decoder graph's dispatch count per layer: a decode token pays for every dispatch, so a fused
kernel that comes apart shows here first (at most 5 a layer for Llama, Qwen2/3 and Mistral). Built
from each family's tiny fixture, no GPU needed."""

from pathlib import Path

import pytest

from py_engine.formats.model_files import read_model, tensor_info
from py_engine.formats.source import open_source
from py_engine.models import graph_generator
from py_engine.models.builder import GraphBuilder

FIXTURES = Path(__file__).parent / "fixtures"


def build(name: str, max_binding: int = 128 << 20):
    source = open_source(FIXTURES / name)
    cfg, tensors, _ = read_model(source)
    builder = GraphBuilder(
        cfg, lambda n: tensor_info(tensors, n, source.label), 16, 64, False, ("f32", "f32"), max_binding
    )
    return cfg, graph_generator(cfg.architecture)(builder)


@pytest.mark.parametrize("name", ["llama-f32", "mistral-f32", "qwen2-f32", "qwen3-f32"])
def test_ops_per_layer(name):
    """A decode token: norm + QKV, (QK-norm) RoPE + KV append + attention, the splits' merge + O +
    residual, norm + gate|up + act, down + residual. With more keys than fold_until the merge is a
    dispatch of its own; a prefill forward keeps it and RoPE + KV append apart too."""
    cfg, graph = build(name)
    assert graph.fold_until == 64 * 48  # attention_splits: 64 keys a split; builder.MERGE_WORK, 1 x block a thread
    assert graph.folds(1, graph.fold_until) and not graph.folds(1, graph.fold_until + 1) and not graph.folds(2, 2)
    assert graph.ops_per_layer(cfg.num_layers, fold=True) == 5
    assert graph.ops_per_layer(cfg.num_layers) == 6
    assert graph.ops_per_layer(cfg.num_layers, rows=16) == 7
    assert not any(op.kernel in ("rmsnorm", "gated_mul") for op in graph.ops[1:-2])


def test_gate_up_over_one_binding_keeps_its_own_activation():
    """gate | up split over two bindings: the projection shards, then gated_mul (8 a layer)."""
    cfg, graph = build("llama-f32", max_binding=4096)
    assert "gated_mul" in [op.kernel for op in graph.ops]
