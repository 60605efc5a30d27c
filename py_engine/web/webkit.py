"""How a browser load is configured, WebKit's memory discipline included.

The page decides WebKit from the user agent (static/platform.js) and says so in every load; the
adapter's vendor never decides it (a hardware-keyed gate once made a desktop engine 8x slower).
On WebKit (Safari on the Mac, every browser on iPad and iPhone) the web-content process is killed
without a warning above about 1.5-2 GB, and Metal has miscompiled native f16 code, so there:
  - the context defaults to 512 tokens and never exceeds 2048 (the KV cache grows with it, a sliding
    layer's ring excepted: py_engine/runtime/kv_cache.py);
  - no kernel uses a native f16 type (the device is opened without shader-f16; f16 weights are
    read as packed pairs) and the KV cache is f16 pairs packed in u32 words (pack2x16float);
  - the model's GPU footprint is checked against a budget before any byte is uploaded.
And there submits are grouped: N dispatches per command buffer, one in flight, N calibrated by
the page's submit probe (static/submit_probe.js; py_engine/gpu/submit_strategy.py decides).
Elsewhere nothing changes: no workaround may be active on Dawn or wgpu-native.
"""

from __future__ import annotations

from ..errors import WispError
from ..runtime.linear_plan import PRECISIONS

DESKTOP_CONTEXT = 2048
WEBKIT_CONTEXT = 512
WEBKIT_MAX_CONTEXT = 2048
# The GPU share of an iPad's ~1.5 GB web-content budget: Pyodide's heap (~55 MB with a model
# loaded), the page and the store's transient copies need the rest.
WEBKIT_GPU_BUDGET_MB = 1200


def _positive_int(options: dict, key: str):
    value = options.get(key)
    if value in (None, ""):
        return None
    try:
        number = int(value)
    except (TypeError, ValueError):
        number = 0
    if number < 1:
        raise WispError(f"load option {key!r} must be a positive whole number, not {value!r}")
    return number


def load_policy(platform: dict | None, options: dict) -> dict:
    """{context, allow_f16, packed_kv, gpu_budget (bytes or None), precision, workarounds} of a
    load, from the page's detectPlatform() and the load options {context, f32, gpu_budget_mb,
    precision}. precision (Engine.load's, "fast" by default) is the same on every platform: a
    browser without WGSL's packed integer dot products runs exact (Capabilities.int8_dot)."""
    webkit = bool((platform or {}).get("webkit"))
    context = _positive_int(options, "context")
    budget_mb = _positive_int(options, "gpu_budget_mb")
    precision = options.get("precision") or "fast"
    if precision not in PRECISIONS:
        raise WispError(f"load option 'precision' must be {' or '.join(PRECISIONS)}, not {precision!r}")
    if not webkit:
        return {
            "context": context or DESKTOP_CONTEXT,
            "allow_f16": not options.get("f32", False),
            "packed_kv": False,
            "gpu_budget": budget_mb << 20 if budget_mb else None,
            "precision": precision,
            "workarounds": [],
        }
    workarounds = ["no-native-f16", "packed-f16-kv", "gpu-budget"]
    if context is None or context > WEBKIT_MAX_CONTEXT:
        workarounds.append(f"context-{WEBKIT_MAX_CONTEXT if context else WEBKIT_CONTEXT}")
    return {
        "context": min(context or WEBKIT_CONTEXT, WEBKIT_MAX_CONTEXT),
        "allow_f16": False,
        "packed_kv": True,
        "gpu_budget": (budget_mb or WEBKIT_GPU_BUDGET_MB) << 20,
        "precision": precision,
        "workarounds": workarounds,
    }
