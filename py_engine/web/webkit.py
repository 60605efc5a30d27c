"""How a browser load is configured, WebKit's memory discipline included.

The page decides WebKit from the user agent (static/platform.js) and says so in every load; the
adapter's vendor never decides it (a hardware-keyed gate once made a desktop engine 8x slower).
On WebKit (Safari on the Mac, every browser on iPad and iPhone) the web-content process is killed
without a warning above about 1.5-2 GB, and Metal has miscompiled native f16 code, so there:
  - the context defaults to 512 tokens and never exceeds 2048 (the KV cache grows with it, a sliding
    layer's ring excepted: py_engine/kv_cache.py);
  - no kernel uses a native f16 type (the device is opened without shader-f16; f16 weights are
    read as packed pairs) and the KV cache is f16 pairs packed in u32 words (pack2x16float);
  - the model's GPU footprint is checked against a budget before any byte is uploaded.
And there submits are grouped: N dispatches per command buffer, one in flight, N calibrated by
the page's submit probe (static/submit_probe.js). Elsewhere nothing changes: no workaround may be
active on Dawn or wgpu-native.
"""

from __future__ import annotations

from ..errors import WispError
from ..gpu.device import GpuError
from ..linear_plan import PRECISIONS

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


# WebKit's group when the page cannot probe (no localStorage: a crash would leave no memory, so a
# probe could crash the page on every reload): batched submits have hard-crashed the GPU process
# on some iPhones. Otherwise the page's submit probe (static/submit_probe.js) calibrates per device.
WEBKIT_GROUP = 64


def _parse_group(group, what: str) -> int | None:
    """'all' -> None (one submit per forward); a positive number of dispatches -> int."""
    g = str(group).strip().lower()
    if g == "all":
        return None
    if not g.isdigit() or int(g) < 1:
        raise GpuError(f"{what} must be a positive number of dispatches or 'all', not {group!r}")
    return int(g)


def submit_strategy(platform: dict | None = None, group=None, probed: dict | None = None) -> dict:
    """The submit strategy, chosen once at start-up from the page's detectPlatform() (static/
    platform.js; never from the adapter's vendor), the page URL's ?group=N / ?group=all, and on
    WebKit the page's submit probe: probed = {group: "all" | N, reason, ceiling} or {error}.
    Dawn / wgpu-native: one encoder, one pass, one submit per forward. WebKit: what the probe
    found safe on this device, else grouped submits of WEBKIT_GROUP."""
    if group is not None and str(group).strip() != "":
        g = _parse_group(group, "?group=")
        if g is None:
            return {"strategy": "single-pass", "group": None, "reason": "?group=all: one submit per forward"}
        return {"strategy": "grouped", "group": g, "reason": f"?group={g} override"}
    if not (platform or {}).get("webkit"):  # a desktop engine never gets a WebKit measure, probed or not
        return {"strategy": "single-pass", "group": None, "reason": "Dawn / wgpu-native: one submit per forward"}
    where = f"WebKit ({platform.get('reason', 'user agent')})"
    if probed and probed.get("group") is not None:
        g = _parse_group(probed["group"], "the probed group")
        reason = probed.get("reason") or "probed on this device"
        return {
            "strategy": "grouped",
            "group": "all" if g is None else g,
            "probed": True,
            "ceiling": probed.get("ceiling"),
            "reason": f"{where}: {reason}",
        }
    unprobed = f"could not probe ({probed['error']}); " if probed and probed.get("error") else ""
    return {
        "strategy": "grouped",
        "group": WEBKIT_GROUP,
        "reason": f"{where}: {unprobed}{WEBKIT_GROUP} dispatches per command buffer, one in flight",
    }


def submit_workarounds(submit: dict) -> list[str]:
    """The WebKit measures in force, for the `loaded` event: a desktop engine must show none (a
    hardware-keyed gate once made one 8x slower)."""
    return (["submit-probe"] if submit.get("probed") else []) + (
        ["grouped-submits"] if submit["strategy"] == "grouped" else []
    )
