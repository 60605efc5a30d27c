"""A lost GPU device in the browser worker (py_engine/web/recovery.py), under CPython: the load and
the generation are stand-ins and the device only says whether it is lost, so each path runs in
milliseconds — a loss while idle, mid-answer, while loading, and again and again (given up after
MAX_RELOADS losses in a row, never a loop). Every event fits protocol.py's table.
tests/test_browser_engine.py loses a real device in Chromium."""

import asyncio

import pytest

from py_engine.errors import WispError
from py_engine.gpu.device import GpuError
from py_engine.web import openai_messages, recovery, worker
from py_engine.web.protocol import check_event
from py_engine.web.state import WorkerState

MODEL = {"id": "tiny", "kind": "gguf", "base": "/models/tiny/", "files": {"tiny.gguf": 1234}}
LOAD = {"type": "load", "id": "load-1", "model": MODEL, "options": {"context": 64}}
BODY = {"model": "tiny", "messages": [{"role": "user", "content": "Hi"}]}
GENERATE = {"type": "openai", "id": "gen-2", "endpoint": "chat.completions", "body": BODY}


class Device:
    """What recovery asks of the browser device: is it lost?"""

    def __init__(self):
        self.lost = None

    async def lost_info(self, wait_ms=0):
        return self.lost

    def lose(self):
        self.lost = {"reason": "destroyed", "message": "Device was destroyed."}


class Engine:
    """The load and the answer, on `state.device`; `losses` devices are lost while loading."""

    def __init__(self, state, losses_while_loading=0, answer_lost=False):
        self.state, self.loads, self.losses, self.answer_lost = state, [], losses_while_loading, answer_lost

    async def load(self, state, message):
        if state.device is None:  # as device_for: the open device, or a new one
            state.device = Device()
        self.loads.append(message)
        await asyncio.sleep(0)
        if self.losses:
            self.losses -= 1
            state.device.lose()
            raise GpuError("loadWeights: GPU device lost (destroyed)")
        state.model = "the model"
        state.emit("loaded", message["id"], model=message["model"]["id"])  # its other fields: not checked here

    async def answer(self, state, message):
        if state.model is None:
            raise WispError("no model loaded")
        await asyncio.sleep(0)
        if self.answer_lost:
            self.answer_lost = False
            state.device.lose()
            raise GpuError("fetchRead: AbortError: the device was lost")
        state.losses = 0
        state.emit("response", message["id"], body={}, stats={"stop": "eos"})  # its other fields: not checked here


def run(engine_args, steps):
    """Run `steps(state, engine, events)` in one event loop with the stand-ins patched in."""
    events = []
    state = WorkerState(post=events.append)
    engine = Engine(state, **engine_args)

    async def main():
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(worker, "load", engine.load)
            patch.setattr(openai_messages, "answer", engine.answer)
            patch.setattr(recovery, "LOST_WAIT_MS", 0)
            await steps(state, engine, events)
            await recovery.settled(state)

    asyncio.run(main())
    for event in events:
        if event["type"] in ("device_lost", "error"):
            check_event(event)
    return state, engine, events


def story(events):
    return [
        (e["type"], e.get("status") or e.get("kind") or e.get("stats", {}).get("stop") or e.get("model"))
        for e in events
    ]


def test_lost_mid_answer_then_the_next_message_is_answered():
    async def steps(state, engine, events):
        await worker.handle(LOAD, state)
        await worker.handle(GENERATE, state)  # the device is lost mid-answer
        await worker.handle({**GENERATE, "id": "gen-3"}, state)  # waits for the reload, then answers

    state, engine, events = run({"answer_lost": True}, steps)
    assert story(events) == [
        ("loaded", "tiny"),
        ("error", "device-lost"),
        ("device_lost", "reloading"),
        ("loaded", "tiny"),
        ("device_lost", "reloaded"),
        ("response", "eos"),
    ]
    assert events[1]["id"] == "gen-2" and "reset" in events[1]["message"]
    assert events[2]["id"] == "load-1" and events[2]["reason"] == "destroyed" and events[2]["attempt"] == 1
    assert engine.loads == [LOAD, LOAD]  # the same model, the same options
    assert events[-1]["id"] == "gen-3" and state.losses == 0 and state.device.lost is None


def test_lost_while_idle_reloads_once_though_noticed_twice():
    async def steps(state, engine, events):
        await worker.handle(LOAD, state)
        state.device.lose()
        recovery.on_device_lost(state, worker.load)  # the browser's report
        recovery.on_device_lost(state, worker.load)  # and again: one recovery
        await recovery.settled(state)

    _, engine, events = run({}, steps)
    assert story(events) == [
        ("loaded", "tiny"),
        ("device_lost", "reloading"),
        ("loaded", "tiny"),
        ("device_lost", "reloaded"),
    ]
    assert len(engine.loads) == 2


def test_lost_while_loading_loads_again():
    async def steps(state, engine, events):
        await worker.handle(LOAD, state)

    state, engine, events = run({"losses_while_loading": 2}, steps)
    assert story(events) == [
        ("device_lost", "reloading"),
        ("device_lost", "reloading"),
        ("loaded", "tiny"),
        ("device_lost", "reloaded"),
    ]
    assert [e["attempt"] for e in events if e["type"] == "device_lost"] == [1, 2, 2]
    assert state.reload == LOAD and len(engine.loads) == 3


def test_a_device_lost_again_and_again_is_given_up():
    async def steps(state, engine, events):
        await worker.handle(LOAD, state)
        engine.losses = 99  # every reload loses its device too
        state.device.lose()
        recovery.on_device_lost(state, worker.load)
        await recovery.settled(state)
        await worker.handle({**GENERATE, "id": "gen-3"}, state)

    state, engine, events = run({}, steps)
    statuses = [e["status"] for e in events if e["type"] == "device_lost"]
    assert statuses == ["reloading"] * recovery.MAX_RELOADS + ["failed"]
    assert f"{recovery.MAX_RELOADS + 1} times in a row" in events[-2]["message"]
    assert len(engine.loads) == 1 + recovery.MAX_RELOADS  # no more attempts after giving up
    assert state.reload is None and state.model is None
    assert (events[-1]["type"], events[-1]["kind"], events[-1]["message"]) == ("error", "generate", "no model loaded")


def test_a_page_load_lost_too_often_is_a_device_lost_error():
    async def steps(state, engine, events):
        await worker.handle(LOAD, state)

    state, _, events = run({"losses_while_loading": 99}, steps)
    assert story(events)[-1] == ("error", "device-lost") and events[-1]["id"] == "load-1"
    assert state.reload is None


def test_an_ordinary_gpu_error_is_no_loss():
    async def steps(state, engine, events):
        await worker.handle(LOAD, state)

        async def fails(state, message):
            raise GpuError("kernel 'x': WGSL compile error")

        openai_messages.answer = fails  # restored by the patch context
        await worker.handle(GENERATE, state)

    _, engine, events = run({}, steps)
    assert story(events) == [("loaded", "tiny"), ("error", "generate")]
    assert len(engine.loads) == 1
