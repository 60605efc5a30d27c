"""The submit strategy the engine picks at start-up (py_engine/gpu/submit_strategy.py's submit_strategy and
submit_workarounds), as pure rules: a desktop engine gets the single pass, WebKit grouped submits of
64 dispatches, ?group= overrides both, and a submit probe's answer (tests/test_submit_probe.py) sets
WebKit's group. tests/test_browser_submit_strategy.py checks the same choices end to end in Chromium."""

import pytest

from py_engine.gpu.device import GpuError
from py_engine.gpu.submit_strategy import submit_strategy, submit_workarounds

IPAD = {"webkit": True, "reason": "iOS device (iPad)"}


def test_strategy_rules():
    assert submit_strategy({"webkit": False})["strategy"] == "single-pass"
    assert submit_strategy(None)["group"] is None
    webkit = submit_strategy(IPAD)
    assert webkit["strategy"] == "grouped" and webkit["group"] == 64 and "iPad" in webkit["reason"]
    assert submit_strategy({"webkit": False}, "8") == {"strategy": "grouped", "group": 8, "reason": "?group=8 override"}
    assert submit_strategy({"webkit": True}, "all")["strategy"] == "single-pass"
    for bad in ("0", "-1", "x"):
        with pytest.raises(GpuError):
            submit_strategy({}, bad)


def test_probed_strategy_rules():
    probed = submit_strategy(IPAD, None, {"group": 64, "reason": "probed on this device", "ceiling": 64})
    assert probed["strategy"] == "grouped" and probed["group"] == 64 and probed["probed"] is True, probed
    assert submit_workarounds(probed) == ["submit-probe", "grouped-submits"]
    whole = submit_strategy(IPAD, None, {"group": "all", "reason": "probed", "ceiling": "all"})
    assert whole["strategy"] == "grouped" and whole["group"] == "all"
    assert submit_workarounds(whole) == ["submit-probe", "grouped-submits"]
    # ?group= wins over a probe; a desktop engine ignores one; a failed probe leaves WebKit's default
    assert submit_strategy(IPAD, "8", {"group": "all"})["reason"] == "?group=8 override"
    desktop = submit_strategy({"webkit": False}, None, {"group": 8})
    assert desktop["strategy"] == "single-pass" and submit_workarounds(desktop) == []
    failed = submit_strategy(IPAD, None, {"error": "busy"})
    assert failed["group"] == 64 and "could not probe (busy)" in failed["reason"]
    with pytest.raises(GpuError):
        submit_strategy(IPAD, None, {"group": "0"})
