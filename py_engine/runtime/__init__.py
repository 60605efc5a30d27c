"""What runs a graph on the device, with no model or host of its own: the graph IR a model's
builder emits (graph.py), every model's load (loader.py: plan() with no device, then upload()), the
WGSL kernels (kernels.py) and which linear kernel runs (linear_plan.py), the weight formats
(quant.py) and their upload (weights.py), GPU memory's pooling and budget (memory.py), the KV caches
(kv_cache.py) and hybrids' recurrent state (recurrent_state.py), and the Executor that runs a
forward (executor.py). The device itself is reached through py_engine/gpu."""
