"""The browser's model source (py_engine/web/files.py) under CPython: when the weights' upload starts
and what waits for it. The loader places every weight synchronously, then awaits the kernels'
compile; the upload starts at that await (not at `flush`), so the download overlaps the compile,
and holds every placement made before it. `flush` waits for it and reports the bytes that landed
meanwhile; a load that fails before `flush` stops it (worker/gpu.js's cancelWeights) and leaves
nothing running. The device is a stand-in; tests/test_browser_store.py runs the real upload."""

import asyncio
import sys
import types

from py_engine.web.files import RemoteModel


class Device:
    """upload_plan as BrowserDevice's: the plan, progress(step) as bytes land; `hold` keeps it open."""

    def __init__(self):
        self.uploads, self.hold, self.fail = [], asyncio.Event(), None

    async def upload_plan(self, plan, progress=None):
        self.uploads.append(list(plan))
        for piece in plan:
            if progress:
                progress(piece[4])
        await self.hold.wait()
        if self.fail:
            raise self.fail
        return {"bytes": sum(p[4] for p in plan)}


def source():
    return RemoteModel("m", "m", "gguf", "/models/m/", {"m.gguf": 1000})


def test_the_upload_starts_at_the_loaders_first_await_with_every_placement():
    async def run():
        device, src, landed = Device(), source(), []
        src.place(device, 1, [(0, "/models/m/m.gguf", 100, 40)])
        src.place(device, 2, [(0, "/models/m/m.gguf", 140, 60)])
        assert device.uploads == []  # nothing before the loader awaits
        await asyncio.sleep(0)  # the compile's await
        await asyncio.sleep(0)
        assert device.uploads == [[(1, 0, "/models/m/m.gguf", 100, 40), (2, 0, "/models/m/m.gguf", 140, 60)]]
        device.hold.set()
        await src.flush(device, landed.append)
        assert sum(landed) == 100 and len(device.uploads) == 1  # reported at flush; nothing sent twice

    asyncio.run(run())


def test_flush_waits_for_the_upload_and_a_failed_load_stops_it():
    async def run():
        device, src = Device(), source()
        src.place(device, 1, [(0, "/models/m/m.gguf", 100, 40)])
        flushing = asyncio.ensure_future(src.flush(device, lambda n: None))
        await asyncio.sleep(0.01)
        assert not flushing.done()  # the upload is still under way
        device.hold.set()
        await flushing

        cancelled = []
        sys.modules["wisp_gpu"] = types.SimpleNamespace(cancelWeights=lambda: cancelled.append(True))
        try:
            device, src = Device(), source()
            device.fail = RuntimeError("loadWeights: cancelled")
            src.place(device, 1, [(0, "/models/m/m.gguf", 100, 40)])
            await asyncio.sleep(0)
            asyncio.get_running_loop().call_later(0.01, device.hold.set)
            await src.settle()  # the load failed (a compile error): the upload is stopped and awaited
            assert cancelled == [True] and src.early is None
            await src.settle()  # and again: nothing left
        finally:
            del sys.modules["wisp_gpu"]

    asyncio.run(run())
