"""The worker's half of WebKit's submit probe (py_engine/web/submit_probe.py), on a fake device and
chain: a probe message's arguments are checked, and run_probe compares the batched run with the
one-by-one run and with the CPU reference, and sets the device's submit group back whatever happens.
The page's half (the ladder, the crash breadcrumb) runs in Chromium: tests/test_browser_submit_probe.py."""

import asyncio

import pytest

from py_engine.selftest.chain import reference
from py_engine.web.submit_probe import ProbeRequestError, probe_arguments, run_probe


def test_probe_arguments_are_checked():
    """Their ranges; protocol.py's table checks their types (tests/test_worker_protocol.py)."""
    assert probe_arguments({"group": 0, "steps": 256}) == (0, 256)
    for bad in ({"group": -1}, {"group": 1, "steps": 0}, {"group": 1, "steps": 10**6}):
        with pytest.raises(ProbeRequestError):
            probe_arguments(bad)


class FakeDevice:
    def __init__(self):
        self.groups, self.buffers = [], 0

    def set_submit_group(self, group):
        self.groups.append(group)

    def command_buffers(self):
        return self.buffers


class FakeChain:
    """Gives the reference, except where told: the batched or every run's bytes."""

    def __init__(self, batched=None, both=None):
        self.batched, self.both = batched, both

    async def run(self, steps, one_by_one=False):
        return self.both or (self.batched if self.batched and not one_by_one else reference(steps))


def test_run_probe_compares_and_restores_the_group():
    device = FakeDevice()
    good = asyncio.run(run_probe(device, FakeChain(), 0, 16, restore_group=64))
    assert good["ok"] and good["detail"] == "" and device.groups == ["all", 64]  # all: grouped, whole submits
    broken = bytearray(reference(16))
    broken[8] ^= 1
    split = asyncio.run(run_probe(device, FakeChain(batched=bytes(broken)), 8, 16, restore_group=None))
    assert not split["ok"] and "batched differs from one-by-one at word 2" in split["detail"], split
    both = asyncio.run(run_probe(device, FakeChain(both=bytes(broken)), 1, 16, restore_group=None))
    assert not both["ok"] and "CPU reference at word 2" in both["detail"], both
    assert device.groups[-2:] == [1, None]
