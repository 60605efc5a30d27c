"""Gemma 4 text (tests/fixtures/gemma4-f32, tools/make_gemma4_fixture.py): a tiny random model with
per-layer embeddings, two layers reading earlier layers' K/V, full layers of their own head_dim with
proportional RoPE, a V norm, layer scalars and a final softcap, against transformers' logits and
greedy tokens; and what the shared-KV layers leave out. test_parity.py runs the fixture on every
path too (f16, f32, WebKit's); here the f32 path in chunks of 5 rows, then one row a token."""

import asyncio
import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest
from gpu_harness import device
from test_graph_shape import build
from test_parity import run

from py_engine.errors import ModelFileError
from py_engine.formats.model_files import read_model, tensor_info
from py_engine.formats.source import open_source
from py_engine.models import graph_generator
from py_engine.models.builder import GraphBuilder
from py_engine.models.config import config_from_hf
from py_engine.models.config_check import check_config
from py_engine.models.graph_options import GraphOptions
from py_engine.models.rope import Rotary
from py_engine.runtime.memory import footprint

FIXTURE = Path(__file__).parent / "fixtures" / "gemma4-f32"
REF = json.loads((FIXTURE / "reference.json").read_text())


def test_logits_and_greedy_tokens_match_transformers():
    logits, tokens = asyncio.run(run(FIXTURE, device(False)[0], 5, REF))
    want = np.array(REF["logits"])
    assert np.abs(logits - want).max() <= 1e-3 * np.abs(want).max()
    assert tokens == REF["greedy"]


def test_shared_layers_own_no_kv():
    """Layers 3 (sliding) and 4 (full) attend over layers 1's and 2's caches (the last earlier
    layer of their type, not layer 0; the sliding ones a ring), rotate only their q heads, and add
    nothing to the KV cache or its footprint."""
    cfg, graph = build("gemma4-f32", kv_capacity=64, ring_slack=16)
    assert [cfg.kv_owner(i) for i in range(cfg.num_layers)] == [0, 1, 2, 1, 2]
    caches = {t.name: t for t in graph.tensors if t.kind == "state"}
    assert sorted(caches) == [f"{kv}_cache.{i}" for kv in "kv" for i in range(3)]
    attention = [op for op in graph.ops if "partials" in op.bind]
    assert [op.bind["k_cache"].name for op in attention] == [
        "k_cache.0",
        "k_cache.1",
        "k_cache.2",
        "k_cache.1",
        "k_cache.2",
    ]
    ring = cfg.sliding_window - 1 + 16
    assert [op.params["capacity"] for op in attention] == [ring, ring, 64, ring, 64]
    heads = cfg.num_heads + 2 * cfg.num_kv_heads
    assert [op.grid(1)[0] for op in graph.ops if op.kernel == "rope_kv"] == [heads] * 3 + [cfg.num_heads] * 2
    kv_bytes = footprint(graph, cfg.vocab_size, 64).kv_cache
    assert kv_bytes == sum(t.nbytes for t in caches.values())
    # the full layer's caches: heads of its own head_dim (24, not 16), a row for every position
    assert caches["k_cache.2"].nbytes * 16 * ring == caches["k_cache.1"].nbytes * 24 * 64


def test_decode_runs_no_rope_kv():
    """A decode token (one row) dispatches no rope_kv: every layer's attention does its work
    (attention.wgsl ROPE_KV), the owners' V norm included and the shared layers appending nothing;
    a prompt's forward keeps the 5 rope_kv ops, one a layer. One dispatch fewer a layer (E2B: 35)."""
    cfg, graph = build("gemma4-f32", kv_capacity=64, ring_slack=16)
    attention = [op for op in graph.ops if "partials" in op.bind]
    assert all(op.decode_defines == {"ROPE_KV": True} for op in attention)
    assert [(op.params["has_v_norm"], op.params["owns_kv"]) for op in attention] == [(1, 1)] * 3 + [(0, 0)] * 2
    kernels = lambda rows: [op.kernel for op in graph.ops if graph.dispatched(op, rows)]  # noqa: E731
    assert "rope_kv" not in kernels(1) and kernels(5).count("rope_kv") == cfg.num_layers
    assert len(kernels(5)) - len(kernels(1)) == cfg.num_layers


def test_proportional_rope_turns_a_share_of_frequencies_over_the_whole_head():
    """transformers' "proportional" RoPE: the first 0.25 x 24 / 2 = 3 frequencies, with exponents
    over 24 (not over the 6 dims that turn), the other 9 still."""
    rotary = Rotary(24, 1e6, {"rope_type": "proportional", "partial_rotary_factor": 0.25})
    whole_head = Rotary(24, 1e6, None).inv_freq  # default RoPE over 24 dims: theta^(-2i / 24)
    assert rotary.inv_freq == whole_head[:3] + [0.0] * 9
    assert whole_head[:3] != Rotary(6, 1e6, None).inv_freq  # not partial rotary's theta^(-2i / 6)


@pytest.mark.parametrize(
    "change, named",
    [({"attention_k_eq_v": True}, "attention_k_eq_v"), ({"enable_moe_block": True}, "enable_moe_block")],
)
def test_what_the_graph_does_not_build_is_refused_by_name(change, named):
    raw = {**json.loads((FIXTURE / "config.json").read_text()), **change}
    with pytest.raises(ModelFileError, match=named):
        config_from_hf(raw, FIXTURE / "config.json")


def test_full_layers_head_dim_from_a_hub_config():
    """Hub configs name the full layers' head_dim global_head_dim; transformers 5 saves it per layer."""
    raw = json.loads((FIXTURE / "config.json").read_text())
    saved = config_from_hf(raw, "config.json")
    del raw["per_layer_config"]
    hub = config_from_hf({**raw, "global_head_dim": 24}, "config.json")
    assert saved.global_head_dim == hub.global_head_dim == 24
    assert [hub.layer_head_dim(i) for i in range(5)] == [16, 16, 24, 16, 24]


@pytest.mark.parametrize("width", [512, 514, 1024])
def test_full_layers_of_512_are_taken_and_wider_refused(width):
    """E2B's full layers (global_head_dim 512): every attention kernel takes heads up to 512
    (attention.wgsl WIDE_HEADS, attention_tiled.wgsl 16 lanes, rope_kv.wgsl); wider ones are
    refused by name, the file and the limit in the message."""
    raw = json.loads((FIXTURE / "config.json").read_text())
    del raw["per_layer_config"]
    cfg = config_from_hf({**raw, "global_head_dim": width}, "config.json")
    if width == 512:
        check_config(cfg, "config.json")
        assert [cfg.layer_head_dim(i) for i in range(5)] == [16, 16, 512, 16, 512]
    else:
        with pytest.raises(
            ModelFileError, match=rf"^config\.json: global_head_dim must be an integer from 2 to 512.*{width}"
        ):
            check_config(cfg, "config.json")


def test_full_layers_of_512_specialise_their_attention():
    """The fixture's graph with E2B's full-layer heads of 512 (its full layers' weights' shapes
    widened; no GPU): their rope_kv and attention take head_dim 512, attention.wgsl WIDE_HEADS and
    attention_tiled.wgsl's 128 vec4s a head; the sliding layers' (16) are as before."""
    source = open_source(FIXTURE)
    cfg, tensors, _ = read_model(source)
    cfg = dataclasses.replace(cfg, global_head_dim=512)
    widen = {"q_proj.weight": (0, cfg.num_heads), "k_proj.weight": (0, cfg.num_kv_heads)}
    widen |= {"v_proj.weight": (0, cfg.num_kv_heads), "o_proj.weight": (1, cfg.num_heads)}

    def info(name):
        t = tensor_info(tensors, name, source.label)
        if not name.startswith(("model.layers.2.self_attn.", "model.layers.4.self_attn.")):
            return t
        shape, kind = list(t.shape), name.split(".")[-2] + ".weight"  # q_proj.weight, ...
        if kind in widen:
            axis, heads = widen[kind]
            shape[axis] = heads * 512
        elif kind in ("q_norm.weight", "k_norm.weight"):
            shape = [512]
        return dataclasses.replace(t, shape=tuple(shape))

    graph = graph_generator(cfg.architecture)(GraphBuilder(cfg, info, GraphOptions(16, 64)))
    attention = [op for op in graph.ops if "partials" in op.bind]
    assert [op.params["head_dim"] for op in attention] == [16, 16, 512, 16, 512]
    assert [op.defines["WIDE_HEADS"] for op in attention] == [False, False, True, False, True]
    assert [op.defines["HEAD_VEC4S"] for op in attention] == [4, 4, 128, 4, 128]
    assert [op.params["head_dim"] for op in graph.ops if op.kernel == "rope_kv"] == [16, 16, 512, 16, 512]
