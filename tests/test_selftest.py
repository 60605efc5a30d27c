"""The "Check this device" suite (py_engine/selftest/) on the desktop GPU (lavapipe here): every
test passes, each can fail on its own without stopping the others, and the CLI prints the report."""

import asyncio
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from gguf import GGMLQuantizationType
from gguf.quants import dequantize
from gpu_harness import device

from py_engine.gpu import Limits
from py_engine.selftest import compute_checks, kernel_checks, memory_checks
from py_engine.selftest.runner import CheckFailed
from py_engine.selftest.suite import TESTS, device_report, format_report, run_suite

ROOT = Path(__file__).parent.parent


def suite(dev=None, **kwargs):
    return asyncio.run(run_suite(dev or device()[0], **kwargs))


def by_name(results):
    return {r["name"]: r for r in results}


def test_every_test_passes_and_reports_live():
    seen = []
    results = suite(on_result=seen.append)
    assert [r["name"] for r in results] == [name for name, _ in TESTS] and len(results) == 10
    assert seen == results  # on_result saw each as it finished, in order
    failed = [r for r in results if not r["ok"]]
    assert not failed, failed
    for r in results:
        assert set(r) == {"name", "ok", "detail", "ms"} and r["detail"] and r["ms"] >= 0


def test_a_wrong_reference_fails_only_its_test(monkeypatch):
    real = kernel_checks.rmsnorm_reference
    monkeypatch.setattr(kernel_checks, "rmsnorm_reference", lambda *args: [v * 1.01 for v in real(*args)])
    results = by_name(suite())
    assert not results["RMSNorm kernel"]["ok"]
    assert "expected" in results["RMSNorm kernel"]["detail"]
    assert all(r["ok"] for name, r in results.items() if name != "RMSNorm kernel"), results


def test_a_wrong_chain_reference_fails_both_chain_tests(monkeypatch):
    real = memory_checks.reference
    monkeypatch.setattr(memory_checks, "reference", lambda steps: real(steps + 1))
    results = by_name(suite())
    assert not results["Dependent dispatch chain"]["ok"] and not results["300 dispatches in one pass"]["ok"]
    assert "word " in results["300 dispatches in one pass"]["detail"]
    assert results["GEMV kernel (q4_0)"]["ok"]


def test_an_exception_becomes_a_failure_and_the_suite_goes_on():
    async def raises(device, kernels):
        raise RuntimeError("the kernel exploded")

    async def wrong(device, kernels):
        raise CheckFailed("word 3 differs")

    tests = [("raises", raises), ("wrong", wrong), ("Basic compute", compute_checks.check_basic_compute)]
    results = suite(tests=tests)
    assert [(r["name"], r["ok"]) for r in results] == [("raises", False), ("wrong", False), ("Basic compute", True)]
    assert results[0]["detail"] == "RuntimeError: the kernel exploded"
    assert results[1]["detail"] == "word 3 differs"


def test_async_on_result():
    seen = []

    async def record(result):
        await asyncio.sleep(0)
        seen.append(result["name"])

    suite(on_result=record, tests=TESTS[:2])
    assert seen == [TESTS[0][0], TESTS[1][0]]


class CorruptReads:
    """The real device, but every read-back has an exponent bit of its 4th byte flipped (a GPU that
    garbles data on its way back): every test must notice."""

    def __init__(self, dev):
        self._dev = dev

    def __getattr__(self, name):
        return getattr(self._dev, name)

    async def read_buffer(self, buffer, offset, size):
        data = bytearray(await self._dev.read_buffer(buffer, offset, size))
        data[3] ^= 0x40
        return bytes(data)


def test_a_garbling_device_fails_every_test():
    results = suite(CorruptReads(device()[0]))
    assert len(results) == len(TESTS)
    assert [r["name"] for r in results if r["ok"]] == []


def test_q4_0_reference_matches_gguf():
    N, K = 7, 128
    raw = kernel_checks.q4_0_matrix(N, K, seed=3)
    ours = np.array(kernel_checks.q4_0_dequant(raw, N, K), np.float32).reshape(N, K)
    theirs = dequantize(np.frombuffer(raw, np.uint8).reshape(N, -1), GGMLQuantizationType.Q4_0)
    np.testing.assert_array_equal(ours, theirs)
    assert len(set(ours[0, :32])) == 1 and len(set(ours[0, 32:64])) == 1  # blocks 0 and 1: all -8 d, all 7 d


def test_references():
    assert compute_checks.half_neighbours(1 / 3) == {0x3555, 0x3556}  # 0.33325 and 0.33350
    assert compute_checks.half_neighbours(-0.1) == {0xAE66, 0xAE67}  # -0.09998 and -0.10004
    assert compute_checks.safe_exp_reference(-1000) == 0.0 and compute_checks.safe_exp_reference(1000) == np.exp(80.0)
    assert memory_checks.big_buffer_bytes(Limits()) == 64 << 20
    small = memory_checks.big_buffer_bytes(Limits(max_storage_binding=(40 << 20) + 100))
    assert small == 40 << 20 and small % (4 * memory_checks.GROUP_WORDS) == 0
    # the fill pattern differs at every word of a 64 MiB buffer's neighbourhood checked here
    assert len({memory_checks.pattern(i) for i in range(1 << 16)}) == 1 << 16


def test_report_text():
    results = [
        {"name": "A", "ok": True, "detail": "fine", "ms": 1.5},
        {"name": "B", "ok": False, "detail": "bad", "ms": 2},
    ]
    report = device_report(device()[0], results, submit={"strategy": "single-pass", "group": None, "reason": "desktop"})
    assert report["passed"] == 1 and report["failed"] == 1 and report["limits"]["max_storage_binding"] == 128 << 20
    text = format_report(report)
    assert "1 of 2 passed" in text and "PASS A" in text and "FAIL B (2 ms): bad" in text
    assert "max_storage_binding = 134217728" in text and "submit: single-pass - desktop" in text


def cli(*args):
    return subprocess.run(
        [sys.executable, "-m", "py_engine", "check", *args], cwd=ROOT, capture_output=True, text=True, timeout=300
    )


@pytest.mark.slow  # the device check's CLI, twice
def test_cli_check():
    result = cli()
    assert result.returncode == 0, result.stdout + result.stderr
    assert "10 of 10 passed" in result.stdout and "submit: single-pass" in result.stdout
    assert result.stdout.count("PASS ") == 10
    report = json.loads(cli("--json", "--f32").stdout)
    assert report["failed"] == 0 and "shader-f16" not in report["features"]
    assert [r["name"] for r in report["results"]] == [name for name, _ in TESTS]


# The worker's "diagnose" message (py_engine/web/worker.py), driven on the desktop: the same
# Python as in the browser, with the events collected instead of posted to the page.
@pytest.fixture
def worker():
    from py_engine.web.state import WorkerState
    from py_engine.web.worker import handle

    events = []
    state = WorkerState(post=events.append)
    return (lambda message: asyncio.run(handle(message, state))), state, events


def test_worker_diagnose_streams_results_then_the_report(worker):
    handle, state, events = worker
    platform = {"webkit": False, "reason": "not WebKit (Dawn or another engine)"}
    handle({"type": "diagnose", "id": "d1", "options": {"platform": platform}})
    *live, final = events
    assert [e["type"] for e in live] == ["diagnostic"] * 10 and all(e["id"] == "d1" for e in events)
    assert final["type"] == "diagnostics" and final["results"] == [e["result"] for e in live]
    assert all(r["ok"] for r in final["results"]), final["results"]
    adapter = final["adapter"]
    assert set(adapter) == {
        "name",
        "features",
        "limits",
        "subgroup_min_size",
        "webkit",
        "platform_reason",
        "submit",
        "workarounds",
    }
    assert adapter["submit"]["strategy"] == "single-pass" and adapter["workarounds"] == [] and not adapter["webkit"]
    assert adapter["limits"]["max_storage_binding"] == 128 << 20
    assert state.serving is None and state.device is not None  # kept for the next load


def test_worker_diagnose_is_refused_while_busy(worker):
    handle, state, events = worker
    state.serving = "load-1"
    handle({"type": "diagnose", "id": "d2", "options": {}})
    assert events == [
        {
            "type": "error",
            "id": "d2",
            "kind": "diagnose",
            "message": "busy with request 'load-1'; wait for it or cancel it",
        }
    ]
    assert state.serving == "load-1"


def test_worker_diagnose_keeps_a_loaded_model(worker):
    """A check with another submit group than the loaded engine's runs on a device of its own."""
    handle, state, events = worker
    engine_device = device()[0]
    state.device, state.device_key, state.model = engine_device, (True, None), "the model"
    handle({"type": "diagnose", "id": "d3", "options": {"group": "8"}})
    assert events[-1]["type"] == "diagnostics", events[-1]
    assert events[-1]["adapter"]["submit"]["group"] == 8 and events[-1]["adapter"]["workarounds"] == ["grouped-submits"]
    assert (state.device, state.device_key, state.model) == (engine_device, (True, None), "the model")


def test_worker_diagnose_on_webkit_uses_the_webkit_device(worker):
    """An iPad's check runs on the device its load would open: grouped submits, no native f16."""
    handle, state, events = worker
    ipad = {"webkit": True, "reason": "iOS device (iPad)"}
    handle({"type": "diagnose", "id": "d4", "options": {"platform": ipad}})
    adapter = events[-1]["adapter"]
    assert all(r["ok"] for r in events[-1]["results"]), events[-1]["results"]
    assert adapter["webkit"] and adapter["platform_reason"] == "iOS device (iPad)"
    assert adapter["submit"]["strategy"] == "grouped" and "shader-f16" not in adapter["features"]
    assert adapter["workarounds"][0] == "grouped-submits" and "no-native-f16" in adapter["workarounds"]
    assert state.device_key == (False, adapter["submit"]["group"])  # what the load will reuse
