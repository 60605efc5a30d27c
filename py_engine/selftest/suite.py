"""The "Check this device" suite: ten GPU self-tests run through the device seam, on any host.

    results = await run_suite(device, on_result=print)     # [{name, ok, detail, ms}, ...]
    report = device_report(device, results, submit=...)   # adapter, features, limits, results
    print(format_report(report))

Every test compares the GPU's answer with a pure-Python one (no numpy: the suite runs in Pyodide
as well). A test that fails, or raises, becomes ok=False with the reason, and the suite goes on:
on a device with no console (an iPad) the report must say *which* parts work.
"""

from __future__ import annotations

import inspect
import time

from ..runtime.kernels import KernelCache
from . import compute_checks, kernel_checks, memory_checks
from .runner import CheckFailed

# (name, check): a check is `async (device, kernels) -> detail` and raises CheckFailed when the
# GPU's answer is wrong. The cheap, fundamental ones first: when they fail, the rest explain less.
TESTS = [
    ("Basic compute", compute_checks.check_basic_compute),
    ("Shared-memory reduction", compute_checks.check_reduction),
    ("Packed f16 round trip", compute_checks.check_f16_packing),
    ("q4_0 dequantization", kernel_checks.check_q4_0_dequant),
    ("Dependent dispatch chain", memory_checks.check_dependent_chain),
    ("300 dispatches in one pass", memory_checks.check_long_pass),
    ("exp clamping", compute_checks.check_exp_clamp),
    ("Large-buffer integrity", memory_checks.check_large_buffer),
    ("RMSNorm kernel", kernel_checks.check_rmsnorm),
    ("GEMV kernel (q4_0)", kernel_checks.check_gemv),
]


async def run_test(device, kernels: KernelCache, name: str, check) -> dict:
    """One test as {name, ok, detail, ms}; never raises (but lets cancellation through)."""
    start = time.perf_counter()
    try:
        detail = await check(device, kernels)
        await device.prepare()  # a GPU error this test caused is reported by it, not by the next
        ok = True
    except CheckFailed as exc:
        ok, detail = False, str(exc)
    except Exception as exc:  # a GpuError, a lost device, a bug: the other tests still run
        ok, detail = False, f"{type(exc).__name__}: {exc}"
    return {"name": name, "ok": ok, "detail": detail, "ms": round(1000 * (time.perf_counter() - start), 1)}


async def run_suite(device, on_result=None, tests=None) -> list[dict]:
    """Run every test (or `tests`: (name, check) pairs) in order. on_result(result) is called as
    each finishes (it may be async), so a page can fill in its table live."""
    kernels = KernelCache(device)
    results = []
    for name, check in TESTS if tests is None else tests:
        result = await run_test(device, kernels, name, check)
        results.append(result)
        if on_result is not None:
            reply = on_result(result)
            if inspect.isawaitable(reply):
                await reply
    return results


def adapter_summary(device) -> dict:
    """{name, features, limits, subgroup_min_size} of the device, as the worker's `loaded` event
    reports them (subgroup_min_size: Capabilities', which picks a decode token's attention kernel)."""
    caps = device.caps
    features = [name for name, on in (("shader-f16", caps.shader_f16), ("subgroups", caps.subgroups)) if on]
    return {
        "name": caps.adapter,
        "features": features,
        "limits": dict(vars(caps.limits)),
        "subgroup_min_size": caps.subgroup_min_size,
    }


def device_report(device, results: list[dict], **extra) -> dict:
    """The whole report: adapter, features, limits, anything in `extra` (e.g. submit), results."""
    summary = adapter_summary(device)
    return {
        "adapter": summary["name"],
        "features": summary["features"],
        "limits": summary["limits"],
        **extra,
        "passed": sum(1 for r in results if r["ok"]),
        "failed": sum(1 for r in results if not r["ok"]),
        "results": results,
    }


def format_report(report: dict) -> str:
    """The report as plain text, for a terminal or a bug report."""
    results = report["results"]
    lines = [
        f"Wisp device check: {report['passed']} of {len(results)} passed",
        f"adapter: {report['adapter']}",
        f"features: {', '.join(report['features']) or 'none'}",
    ]
    submit = report.get("submit")
    if submit:
        lines.append(
            f"submit: {submit['strategy']}"
            + (f" (group {submit['group']})" if submit.get("group") else "")
            + (f" - {submit['reason']}" if submit.get("reason") else "")
        )
    lines.append("limits:")
    lines += [f"  {key} = {value}" for key, value in sorted(report["limits"].items())]
    lines.append("results:")
    lines += [f"  {'PASS' if r['ok'] else 'FAIL'} {r['name']} ({r['ms']:.0f} ms): {r['detail']}" for r in results]
    return "\n".join(lines)
