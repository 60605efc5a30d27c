"""The worker's Python half: page messages in, events out (the protocol: protocol.py's table).

worker.js calls `init(post)` once after boot, then `handle(message)` for every page message
without awaiting the previous one, so a `cancel` is handled while an `openai` request awaits the GPU.
Messages and events are plain dicts here; `init`'s post converts events at the boundary. What
the worker holds between messages is one WorkerState (state.py); tests hand `handle` their own.
"""

from __future__ import annotations

import time
import traceback

from ..errors import DocumentError, StorageQuotaError, WispError
from ..gpu.device import GpuError
from . import recovery
from .protocol import ProtocolError, check_message
from .state import WorkerState, adapter_reply, device_for

STATE = WorkerState()


def init(post) -> None:
    """Events leave through worker.js's post, as JS objects; a lost GPU device is reported by
    worker/gpu_device.js as it happens (recovery.py reloads the model)."""
    import wisp_gpu
    from js import Object
    from pyodide.ffi import create_proxy, jsnull, to_js

    STATE.post = lambda event: post(to_js(with_nulls(event, jsnull), dict_converter=Object.fromEntries))
    # reason and message: the page hears them from the recovery (it asks the device again)
    wisp_gpu.onDeviceLost(create_proxy(lambda reason, message: recovery.on_device_lost(STATE, load)))


def with_nulls(value, null):
    """An event with None as JS null: to_js makes None undefined, which a page's JSON drops (an
    OpenAI message's `content: null` must stay)."""
    if value is None:
        return null
    if isinstance(value, dict):
        return {key: with_nulls(item, null) for key, item in value.items()}
    if isinstance(value, list):
        return [with_nulls(item, null) for item in value]
    return value


def plain(value):
    """JS null arrives as pyodide's JsNull, not None: make a message plain Python."""
    if type(value).__name__ == "JsNull":
        return None
    if isinstance(value, dict):
        return {key: plain(item) for key, item in value.items()}
    if isinstance(value, list):
        return [plain(item) for item in value]
    return value


async def handle(message: dict, state: WorkerState | None = None) -> None:
    state = state or STATE
    message = plain(message)
    request = message.get("id") if isinstance(message, dict) else None
    request = request if isinstance(request, (str, int)) and not isinstance(request, bool) else None
    kind = None
    try:
        kind = check_message(message)  # protocol.py's table: a malformed message goes no further
        if kind == "cancel":
            state.cancelled.add(request)
        elif kind == "unload":
            state.drop_device()
            state.reload = None  # nothing to reload after a loss
        elif kind.startswith("store_"):
            await store_message(state, message)
        elif kind.startswith("memory_"):  # memory.py: the adds and recalls take the busy guard themselves
            from .memory import memory_message

            await memory_message(state, message)
        elif kind in ("speech_load", "transcribe", "speak"):  # speech.py: its own lock, beside a chat answer
            from .speech import speech_message

            await speech_message(state, message)
        elif kind in ("probe", "diagnose"):  # checks.py; each takes the busy guard itself
            from . import checks

            await (checks.probe(state, message) if kind == "probe" else checks.diagnose(state, message))
        else:
            await recovery.settled(state)  # after a device loss: on the reloaded model
            with state.busy(request):
                if kind == "load":
                    await load_from_page(state, message)
                else:
                    await answer_on_device(state, message)
    except WispError as exc:
        state.emit("error", request, kind=error_kind(exc, kind), message=str(exc))
    except Exception as exc:  # a bug, not bad input: keep the last frames for the report
        frames = "".join(traceback.format_exception(exc)[-3:])
        state.emit("error", request, kind="internal", message=f"{type(exc).__name__}: {exc}\n{frames}")


def error_kind(exc: WispError, message_type: str | None) -> str:
    """The `error` event's kind: what the page tells the user (protocol.py lists them)."""
    from ..api.request import RequestError
    from ..gpu.browser_host import DeviceLostError, NoWebGPUError

    if isinstance(exc, ProtocolError):
        return "protocol"
    if isinstance(exc, RequestError):
        return "request"
    if isinstance(exc, DeviceLostError):
        return "device-lost"
    if isinstance(exc, NoWebGPUError):
        return "no-webgpu"
    if isinstance(exc, StorageQuotaError):
        return "quota"
    if isinstance(exc, DocumentError):
        return "document"
    if message_type in ("load", "probe", "diagnose"):
        return message_type
    if message_type == "openai":
        return "generate"
    if message_type.startswith("memory_"):
        return "memory"
    if message_type in ("speech_load", "transcribe", "speak"):
        return "speech"
    return "store" if message_type.startswith("store_") else "internal"


async def load_from_page(state: WorkerState, message: dict) -> None:
    """The page's load: a device lost while loading is replaced and the load run again."""
    state.reload, state.losses = None, 0  # the previous model goes whether or not this one loads
    await recovery.load_retrying(state, message, load)


async def answer_on_device(state: WorkerState, message: dict) -> None:
    """An OpenAI request, its error of a lost device typed as such (the model is then reloaded)."""
    from .openai_messages import answer

    try:
        await answer(state, message)
    except GpuError as exc:
        raise await recovery.classify(state, exc, load) from exc


async def load(state: WorkerState, message: dict) -> None:
    from .. import session
    from ..gpu.submit_strategy import submit_strategy
    from .webkit import load_policy

    start = time.perf_counter()
    model, options, request = message["model"], message.get("options") or {}, message.get("id")
    state.loading = model["id"]
    emit = state.emit
    platform = options.get("platform") or {}  # the page's detectPlatform(): workers have no maxTouchPoints
    policy = load_policy(platform, options)  # WebKit: context, no native f16, packed KV, GPU budget
    submit = submit_strategy(platform, options.get("group"), options.get("probe"))  # probe: WebKit's calibration
    device, _ = await device_for(state, policy["allow_f16"], submit["group"])
    state.model = None  # the previous model's buffers go with it
    emit("progress", request, phase="store", done=0, total=0)
    await begin_store(model, request)
    source, mmproj = await open_sources(model)

    landed = [0, 0, False]  # the loader's last (bytes landed, bytes expected); upload reported

    def progress(done, total):
        landed[:2] = done, total

    def uploaded():
        # Weights reach the GPU in the same pass that downloads (or reads back and verifies) them, and
        # the store narrates that pass (download / verify, the last file's check after its last
        # bytes landed): "upload" is reported once that pass is over, so the page's steps run in
        # order: store, download, verify, upload, compile. Once: a vision model's tower is a second
        # upload (its own flush) after the text tower's.
        done, total, reported = landed
        if done >= total and not reported:
            landed[2] = True
            emit("progress", request, phase="upload", done=done, total=total)
            emit("progress", request, phase="compile", done=0, total=0)

    source.on_flushed = uploaded
    has_tokenizer = source.kind == "gguf" or source.exists("tokenizer.json")  # else: token-id prompts only
    if options.get("needs_text") and not has_tokenizer:  # the chat page's load: refused before the weights
        raise WispError(
            f"{model.get('name', model['id'])} has no tokenizer (tokenizer.json), so it cannot chat: "
            "it can only take token ids (the API's completions)"
        )
    try:
        state.model = await session.load(
            source,
            device,
            model_id=model["id"],
            with_tokenizer=has_tokenizer,
            embedders=True,
            progress=progress,
            packed_kv=policy["packed_kv"],
            gpu_budget=policy["gpu_budget"],
            context=policy["context"],
            precision=policy["precision"],
            mmproj=mmproj,
        )
    except BaseException:
        for opened in (source, mmproj):
            if opened is not None:
                await opened.settle()  # the weights' upload (files.py) stops with the load
        raise
    engine = state.model.engine or state.model.embedder  # an embedding model answers `openai` embeddings only
    emit(
        "loaded",
        request,
        model=model["id"],
        load_ms=round(1000 * (time.perf_counter() - start)),
        adapter=adapter_reply(device, platform, submit, policy),
        context=engine.context,
        kv_cache="/".join(engine.kv_formats),
        **({"precision": engine.precision} if state.model.embedder is None else {}),
        vision=state.model.vision is not None,
        gpu_bytes={k: getattr(engine.footprint, k) for k in ("weights", "kv_cache", "activations", "other")},
        wasm_memory_bytes=wasm_memory_bytes(),
        weights=weights_report(),
    )


async def open_sources(model: dict) -> tuple:
    """(the model's source, its vision projector's or None). A GGUF served with llama.cpp's mmproj
    (`mmproj`: which of its files that is) is two sources over one model's files, as session.load
    takes a text GGUF and its mmproj: the weight store keeps both files under the model."""
    from .files import RemoteModel

    name, files, pair = model.get("name", model["id"]), dict(model["files"]), model.get("mmproj")
    if pair is not None and (model["kind"] != "gguf" or pair not in files or len(files) < 2):
        raise WispError(f"{name}: its mmproj {str(pair)[:80]!r} is not one of a GGUF model's files")
    projector = {pair: files.pop(pair)} if pair is not None else None
    source = await RemoteModel.open(model["id"], name, model["kind"], model["base"], files)
    if projector is None:
        return source, None
    return source, await RemoteModel.open(model["id"], f"{name} ({pair})", "gguf", model["base"], projector)


async def begin_store(model: dict, request) -> None:
    """Tell the weight store which files this load reads (and their hashes): it drops stale copies
    and refuses, writing nothing, when the missing bytes do not fit the origin's quota."""
    import wisp_store

    await store_call(wisp_store.begin, model, request)


async def store_call(function, model: dict, *args):
    """A weight store function (worker/store.js) of a model message; its errors typed (files.py)."""
    from js import Object
    from pyodide.ffi import JsException, to_js

    from .files import store_error

    try:
        return await function(to_js(model, dict_converter=Object.fromEntries), *args)
    except JsException as exc:
        raise store_error(exc) from None


async def store_message(state: WorkerState, message: dict) -> None:
    """store_list / store_remove / store_persist / store_twin, each answered by a `store` event (the
    page's storage manager; store_twin: byo.js, before a model the user brought is loaded)."""
    import wisp_store

    kind, request = message["type"], message.get("id")
    twin = {}
    if kind == "store_twin":
        found = await store_call(wisp_store.twin, message["model"])
        twin["twin"] = found if isinstance(found, str) else None  # JS null arrives as JsNull
    if kind == "store_remove":
        model = str(message.get("model") or "")
        if not model:
            raise WispError("store_remove needs a model id")
        if state.serving is not None and state.loading == model:  # its files are open and being written
            raise WispError(f"{model} is being loaded; remove it after the load")
        await wisp_store.remove(model)
    persisted = None
    if kind == "store_persist":
        persisted = bool(await wisp_store.persist())
    report = (await wisp_store.report()).to_py()
    if persisted is not None:
        report["persisted"] = persisted
    state.emit("store", request, **report, **twin)


def weights_report() -> dict:
    """How the weights streamed in (worker/load_clock.js): bytes, wall ms, seconds per phase."""
    import wisp_store

    return wisp_store.loadReport().to_py()


def wasm_memory_bytes() -> int:
    """The size of the worker's wasm memory: weights must not have passed through it."""
    import pyodide_js

    return int(pyodide_js._module.HEAPU8.length)
