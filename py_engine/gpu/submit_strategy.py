"""How the engine submits its work, chosen once at start-up: one encoder, one pass and one submit
per forward on Dawn and wgpu-native; on WebKit (Safari, every browser on iPad and iPhone) grouped
submits, N dispatches per command buffer and one in flight, N calibrated by the page's submit
probe (static/submit_probe.js). The worker applies it (web/worker.py, web/checks.py); the CLI's
device check reports the desktop's (`python -m py_engine check`)."""

from __future__ import annotations

from .device import GpuError

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
