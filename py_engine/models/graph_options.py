"""GraphOptions: how a graph is planned, the one argument besides the config and the tensors that a
GraphBuilder takes (loader.plan makes every builder)."""

from __future__ import annotations

from dataclasses import dataclass

# WebGPU's default largest storage binding: a plan with no device splits weights as a browser would.
DEFAULT_MAX_BINDING = 1 << 27


@dataclass(frozen=True)
class GraphOptions:
    max_rows: int  # the most rows one forward takes: every activation is sized for it
    kv_capacity: int  # the KV cache's rows (the context); an encoder's: its rows
    half: bool = False  # the device has shader-f16: half-precision weights stay half
    kv_formats: tuple[str, str] = ("f32", "f32")  # K and V caches' storage (kernels.KV_WORDS)
    max_binding: int = DEFAULT_MAX_BINDING  # weights are split into shards of at most this many bytes
    # A sliding layer's K and V caches are a ring of window - 1 + ring_slack rows where that is
    # fewer than kv_capacity (kv_cache.py; at least max_rows); 0: the context's.
    ring_slack: int = 0
    # "fast" (the GEMV of a block format on int8 activations where linear_plan.int8_activations
    # says so) or "exact" (f32 arithmetic throughout).
    precision: str = "fast"
    # An embedding graph (models/bert.py's EmbeddingBuilder): how it pools a text's rows ("cls",
    # "mean" or "lasttoken"), and whether it L2-normalises the vectors; None: a generating graph.
    pooling: str | None = None
    normalize: bool = True
    # Its sentence-transformers Dense projections after pooling (embedding/settings.DenseLayer), in order.
    dense: tuple = ()
    cpu: bool = False  # the adapter runs on the CPU (Capabilities.cpu): the GEMV's CPU layout
    # The narrowest subgroups the device may run (Capabilities.subgroup_min_size; 0: none, or not
    # known): a decode token's attention kernel (attention_grid.few_rows_kernel).
    subgroup_min_size: int = 0
    # A vision-language model's text graph: the most image embedding rows a context holds (the
    # splice after the token embedding: GraphBuilder.embedding); 0: text only.
    image_rows: int = 0
    # Its picture tokens attend to every token of their own picture in a prompt's forward, later
    # ones too (Gemma 3; transformers' token_type_ids mask): the input picture_ends, each position's
    # picture's end (attention_tiled.wgsl PICTURE_SPANS). False: causal everywhere (SmolVLM).
    picture_spans: bool = False


def device_options(device, *, half: bool | None = None, max_binding: int = 0) -> dict:
    """What a device decides of a graph's GraphOptions (as keyword arguments): half-precision weights
    where it has shader-f16 (or `half`), the CPU's GEMV layout, its narrowest subgroups, its largest
    storage binding (or a smaller `max_binding`)."""
    caps = device.caps
    return {
        "half": caps.shader_f16 if half is None else half,
        "cpu": caps.cpu,
        "subgroup_min_size": caps.subgroup_min_size,
        "max_binding": max_binding or caps.limits.max_storage_binding,
    }
