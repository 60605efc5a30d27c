"""The browser's model source (py_engine/web/files.py) under CPython: when the weights' upload starts
and what waits for it. The loader places every weight synchronously, then awaits the kernels'
compile; the upload starts at that await (not at `flush`), so the download overlaps the compile,
and holds every placement made before it. `flush` waits for it and reports the bytes that landed
meanwhile; a load that fails before `flush` stops it (worker/gpu.js's cancelWeights) and leaves
nothing running. A GGUF served with its mmproj opens as two sources over the model's files (worker.py
open_sources), which session.read_model_files takes as llama.cpp's pair. The device and the weight
store are stand-ins; tests/test_browser_store.py runs the real upload, tests/test_browser_pictures.py
the pair's answer."""

import asyncio
import sys
import types
from pathlib import Path

import pytest

from py_engine import session
from py_engine.errors import WispError
from py_engine.web.files import RemoteModel
from py_engine.web.worker import open_sources

PAIR = Path(__file__).parent / "fixtures" / "gemma3vl-gguf"
TEXT, MMPROJ = "gemma3vl-tiny-f32.gguf", "mmproj-gemma3vl-tiny-f32.gguf"


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


class Bytes(bytes):
    def to_bytes(self):  # a JS Uint8Array's, as fetch_bytes reads the store's answer
        return bytes(self)


async def store_read(url, start, length):
    """worker/store.js read(): the bytes of a file served under /models/pair/ (the fixture's)."""
    assert url.startswith("/models/pair/")
    return Bytes((PAIR / url.removeprefix("/models/pair/")).read_bytes()[start : start + length])


def pair_model(**change) -> dict:
    files = {name: (PAIR / name).stat().st_size for name in (TEXT, MMPROJ)}
    return {
        "id": "pair",
        "name": "Pair",
        "kind": "gguf",
        "base": "/models/pair/",
        "files": files,
        "mmproj": MMPROJ,
    } | change


def test_a_gguf_and_its_mmproj_open_as_two_sources_that_read_as_the_pair():
    ffi = types.SimpleNamespace(JsException=type("JsException", (Exception,), {}))
    stand_ins = {"wisp_store": types.SimpleNamespace(read=store_read), "pyodide": types.SimpleNamespace(ffi=ffi)}
    sys.modules |= stand_ins | {"pyodide.ffi": ffi}
    try:
        text, mmproj = asyncio.run(open_sources(pair_model()))
        assert (text.files(), mmproj.files()) == ([TEXT], [MMPROJ])
        assert text.url(TEXT) == "/models/pair/" + TEXT and mmproj.url(MMPROJ) == "/models/pair/" + MMPROJ
        files = session.read_model_files(text, mmproj=mmproj)  # the projector's checks against the text model's
        assert files.vision is mmproj and files.tokenizer is not None
        alone, none = asyncio.run(open_sources({k: v for k, v in pair_model().items() if k != "mmproj"}))
        assert none is None and alone.files() == [TEXT, MMPROJ]  # without `mmproj`: one GGUF source, as before
    finally:
        for name in (*stand_ins, "pyodide.ffi"):
            del sys.modules[name]


@pytest.mark.parametrize(
    "change",
    [{"mmproj": "other.gguf"}, {"kind": "hf"}, {"files": {MMPROJ: 10}}],
    ids=["not-a-file", "a-folder", "nothing-beside"],
)
def test_a_bad_mmproj_is_refused_before_a_byte_is_read(change):
    with pytest.raises(WispError, match="is not one of a GGUF model's files"):
        asyncio.run(open_sources(pair_model(**change)))
