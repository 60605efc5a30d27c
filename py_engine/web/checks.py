"""The worker's device checks: the WebKit submit probe (a dependent chain under one submit group;
static/submit_probe.js keeps the record) and "Check this device" (the self-test suite;
static/diagnostics.js shows it). Both run on the device a load with the same options gets, and
take the worker's busy guard (state.py)."""

from __future__ import annotations

from .state import WorkerState, adapter_reply, device_for


async def probe(state: WorkerState, message: dict) -> None:
    """The `probe` message: the dependent chain batched and one by one under one submit group
    (submit_probe.py), on the device a following load reuses. Answered by a `probe` event; the
    page (static/submit_probe.js) keeps the record."""
    from ..gpu import open_device
    from ..gpu.device import GpuError
    from .submit_probe import adapter_identity, probe_arguments, run_probe

    group, steps = probe_arguments(message)
    with state.busy(message.get("id")):
        if state.device is None:  # the chain needs no f16, and WebKit's loads open their device without
            # it (webkit.py): the load after the probe reuses this one, only its group changes
            state.device = await open_device(allow_f16=False)  # no WebGPU: the error goes to the page
            state.device_key = (False, None)
        device = state.device
        try:
            if state.probe_chain is None:
                from ..selftest.chain import Chain

                state.probe_chain = Chain(device)
            result = await run_probe(device, state.probe_chain, group, steps, state.device_key[1])
        except GpuError as exc:  # this size failed; a device that errored is not reused: the next request reopens
            state.drop_device()
            result = {"ok": False, "detail": f"GPU error: {exc}", "ms": 0, "command_buffers": 0}
        state.emit("probe", message["id"], group=group, steps=steps, **result, adapter=adapter_identity(device))


async def diagnose(state: WorkerState, message: dict) -> None:
    """The `diagnose` message: the "Check this device" suite (py_engine/selftest/suite.py) on the
    device and submit strategy a load with these options gets; no model needed. Emits a
    `diagnostic` event as each test finishes, then `diagnostics`."""
    from ..gpu.device import GpuError
    from ..gpu.submit_strategy import submit_strategy
    from ..selftest.suite import run_suite
    from .webkit import load_policy

    request, options = message.get("id"), message.get("options") or {}
    platform = options.get("platform") or {}
    policy = load_policy(platform, options)  # as load() decides: the device's f16, WebKit's measures
    submit = submit_strategy(platform, options.get("group"), options.get("probe"))
    with state.busy(request):
        device, cached = await device_for(state, policy["allow_f16"], submit["group"], keep_model=True)
        results = await run_suite(device, on_result=lambda r: state.emit("diagnostic", request, result=r))
        try:
            await device.prepare()
        except GpuError:  # lost during the suite: the next request opens a fresh device
            if cached:
                state.drop_device()
        adapter = adapter_reply(device, platform, submit, policy)
        state.emit("diagnostics", request, results=results, adapter=adapter)
