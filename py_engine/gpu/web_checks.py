"""The worker's device checks, beside the protocol handler (web_worker.py) whose state they share:
the WebKit submit probe (a dependent chain under one submit group; static/submit_probe.js keeps
the record) and "Check this device" (the self-test suite; static/diagnostics.js shows it).
Both run on the device a load with the same options gets, and take the _busy guard."""
from __future__ import annotations

from . import web_worker as worker


async def probe(message: dict) -> None:
    """{type:"probe", id, group (0: all), steps}: the dependent chain batched and one by one under
    one submit group (py_engine/gpu/submit_probe.py), on the device a following load reuses. Answers
    {type:"probe", id, group, steps, ok, detail, ms, command_buffers, adapter:{name, vendor,
    architecture, description}}; the page (static/submit_probe.js) keeps the record."""
    from . import open_device
    from .device import GpuError
    from .submit_probe import adapter_identity, probe_arguments, run_probe

    group, steps = probe_arguments(message)
    with worker.busy(message.get("id")):
        if "device" not in worker._state:  # the chain needs no f16, and WebKit's loads open their device without
            # it (py_engine/gpu/webkit.py): the load after the probe reuses this one, only its group changes
            worker._state["device"] = await open_device(allow_f16=False)  # no WebGPU: the error goes to the page
            worker._state["device_key"] = (False, None)
        device = worker._state["device"]
        try:
            if "probe_chain" not in worker._state:
                from ..selftest.chain import Chain

                worker._state["probe_chain"] = Chain(device)
            result = await run_probe(device, worker._state["probe_chain"], group, steps, worker._state["device_key"][1])
        except GpuError as exc:  # this size failed; a device that errored is not reused: the next request reopens
            worker._state.clear()
            result = {"ok": False, "detail": f"GPU error: {exc}", "ms": 0, "command_buffers": 0}
        worker.emit({"type": "probe", "id": message.get("id"), "group": group, "steps": steps, **result,
                     "adapter": adapter_identity(device)})


async def diagnose(message: dict) -> None:
    """{type:"diagnose", id, options:{platform, group, f32}}: the "Check this device" suite
    (py_engine/selftest/suite.py) on the device and submit strategy a load with these options
    gets; no model needed. Emits {type:"diagnostic", id, result:{name, ok, detail, ms}} as each
    test finishes, then {type:"diagnostics", id, adapter:{name, features, limits, webkit,
    platform_reason, submit, workarounds}, results}."""
    from ..selftest.suite import adapter_summary, run_suite
    from .webkit import submit_strategy, submit_workarounds
    from .device import GpuError
    from .webkit import load_policy

    request, options = message.get("id"), message.get("options") or {}
    platform = options.get("platform") or {}
    policy = load_policy(platform, options)  # as load() decides: the device's f16, WebKit's measures
    submit = submit_strategy(platform, options.get("group"), options.get("probe"))
    with worker.busy(request):
        device, cached = await worker.device_for(policy["allow_f16"], submit["group"], keep_model=True)
        results = await run_suite(device, on_result=lambda r: worker.emit({"type": "diagnostic", "id": request,
                                                                            "result": r}))
        try:
            await device.prepare()
        except GpuError:  # lost during the suite: the next request opens a fresh device
            if cached:
                worker._state.clear()
        workarounds = submit_workarounds(submit) + policy["workarounds"]
        worker.emit({"type": "diagnostics", "id": request, "results": results,
                     "adapter": {**adapter_summary(device), "webkit": bool(platform.get("webkit")),
                                 "platform_reason": platform.get("reason", ""), "submit": submit,
                                 "workarounds": workarounds}})
