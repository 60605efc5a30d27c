"""The worker's Python half: page messages in, events out (protocol: worker/worker.js's header).

worker.js calls `init(post)` once after boot, then `handle(message)` for every page message
without awaiting the previous one, so a `cancel` is handled while a `generate` awaits the GPU.
Messages and events are plain dicts here; worker.js converts them at the boundary.
"""
from __future__ import annotations

import contextlib
import time
import traceback

from ..errors import WispError

_post = None
_state: dict = {}  # device, source, engine, tok, stop_ids, cache, model
_cancelled: set = set()
_busy: list = []  # the request id being served (load or generate)
_loading: list = []  # the id of the model the last load was for


def init(post) -> None:
    global _post
    _post = post


def emit(event: dict) -> None:
    from js import Object
    from pyodide.ffi import to_js

    _post(to_js(event, dict_converter=Object.fromEntries))


def plain(value):
    """JS null arrives as pyodide's JsNull, not None: make a message plain Python."""
    if type(value).__name__ == "JsNull":
        return None
    if isinstance(value, dict):
        return {key: plain(item) for key, item in value.items()}
    if isinstance(value, list):
        return [plain(item) for item in value]
    return value


@contextlib.contextmanager
def busy(request):
    """One GPU request at a time (load, generate, probe, diagnose): another is refused, not queued."""
    if _busy:
        raise WispError(f"busy with request {_busy[0]!r}; wait for it or cancel it")
    _busy.append(request)
    try:
        yield
    finally:
        _busy.clear()


async def handle(message: dict) -> None:
    message = plain(message)
    kind, request = message.get("type"), message.get("id")
    try:
        if kind == "cancel":
            _cancelled.add(message.get("id"))
            return
        if kind == "unload":
            _state.clear()
            return
        if kind in ("store_list", "store_remove", "store_persist"):
            await store_message(message)
            return
        if kind in ("probe", "diagnose"):  # web_checks.py; each takes the _busy guard itself
            from . import web_checks

            await (web_checks.probe(message) if kind == "probe" else web_checks.diagnose(message))
            return
        if kind not in ("load", "generate"):
            raise WispError(f"unknown message type {kind!r}")
        with busy(request):
            await (load(message) if kind == "load" else generate(message))
    except WispError as exc:
        from .browser_host import NoWebGPUError, StorageQuotaError

        category = ("no-webgpu" if isinstance(exc, NoWebGPUError) else "quota" if isinstance(exc, StorageQuotaError)
                    else kind if kind in ("load", "generate", "probe", "diagnose")
                    else "store" if kind.startswith("store_") else "internal")
        emit({"type": "error", "id": request, "kind": category, "message": str(exc)})
    except Exception as exc:  # a bug, not bad input: keep the last frames for the report
        frames = "".join(traceback.format_exception(exc)[-3:])
        emit({"type": "error", "id": request, "kind": "internal", "message": f"{type(exc).__name__}: {exc}\n{frames}"})


async def device_for(allow_f16: bool, group, keep_model: bool = False) -> tuple:
    """(device, kept): the device a request with these settings runs on. The open one when it
    matches, or when only its submit group differs and no model holds it (the submit probe's
    device, which a WebKit load then reuses); else a new one, which replaces the open one (and
    its model) — unless keep_model, when a loaded model stays and the new device is not kept."""
    from . import open_device

    key = (allow_f16, group)
    if "device" in _state and _state["device_key"] == key:
        return _state["device"], True
    if "device" in _state and _state["device_key"][0] == allow_f16 and "engine" not in _state:
        _state["device"].set_submit_group(group)
        _state["device_key"] = key
        return _state["device"], True
    device = await open_device(allow_f16=allow_f16, submit_group=group)
    if keep_model and "engine" in _state:
        return device, False
    _state.clear()
    _state.update(device=device, device_key=key)
    return device, True


async def load(message: dict) -> None:
    from ..session import load_model
    from .web_files import RemoteModel
    from .webkit import load_policy, submit_strategy, submit_workarounds

    start = time.perf_counter()
    model, options, request = message["model"], message.get("options") or {}, message.get("id")
    _loading[:] = [model["id"]]
    platform = options.get("platform") or {}  # the page's detectPlatform(): workers have no maxTouchPoints
    policy = load_policy(platform, options)  # WebKit: context, no native f16, packed KV, GPU budget
    submit = submit_strategy(platform, options.get("group"), options.get("probe"))  # probe: WebKit's calibration
    device, _ = await device_for(policy["allow_f16"], submit["group"])
    for key in ("engine", "tok", "cache"):
        _state.pop(key, None)  # the previous model's buffers go with it
    emit({"type": "progress", "id": request, "phase": "store", "done": 0, "total": 0})
    await begin_store(model, request)
    source = await RemoteModel.open(model["id"], model.get("name", model["id"]), model["kind"], model["base"],
                                    model["files"])

    def progress(done, total):
        # Weights reach the GPU in the same pass that downloads (or reads back and verifies) them, and
        # the store narrates that pass (download / verify): "upload" is reported once all have landed,
        # so the page's steps run in order: store, download, verify, upload, compile.
        if done >= total:
            emit({"type": "progress", "id": request, "phase": "upload", "done": done, "total": total})
            emit({"type": "progress", "id": request, "phase": "compile", "done": 0, "total": 0})

    has_tokenizer = source.kind == "gguf" or source.exists("tokenizer.json")  # else: generate by ids only
    engine, tok, stop_ids = await load_model(source, device, context=policy["context"], with_tokenizer=has_tokenizer,
                                             progress=progress, packed_kv=policy["packed_kv"],
                                             gpu_budget=policy["gpu_budget"])
    from ..prompt_cache import PromptCache

    _state.update(engine=engine, tok=tok, stop_ids=stop_ids, cache=PromptCache(engine), model=model["id"])
    caps = device.caps
    emit({"type": "loaded", "id": request, "model": model["id"], "load_ms": round(1000 * (time.perf_counter() - start)),
          "adapter": {"name": caps.adapter, "features": [f for f, on in (("shader-f16", caps.shader_f16),
                                                                          ("subgroups", caps.subgroups)) if on],
                      "limits": dict(vars(caps.limits)),
                      "webkit": bool(platform.get("webkit")), "platform_reason": platform.get("reason", ""),
                      "submit": submit,
                      # WebKit workarounds in force: a desktop engine must show none (a hardware-
                      # keyed gate once made one 8x slower)
                      "workarounds": submit_workarounds(submit) + policy["workarounds"]},
          "context": engine.context, "kv_cache": "/".join(engine.kv_formats),
          "gpu_bytes": {k: getattr(engine.footprint, k) for k in ("weights", "kv_cache", "activations", "other")},
          "wasm_memory_bytes": wasm_memory_bytes()})


async def begin_store(model: dict, request) -> None:
    """Tell the weight store which files this load reads (and their hashes): it drops stale copies
    and refuses, writing nothing, when the missing bytes do not fit the origin's quota."""
    from js import Object
    from pyodide.ffi import JsException, to_js

    from .browser_host import StorageQuotaError

    import wisp_store

    try:
        await wisp_store.begin(to_js(model, dict_converter=Object.fromEntries), request)
    except JsException as exc:
        if getattr(exc, "name", "") == "QuotaError":
            raise StorageQuotaError(exc.message) from None
        raise WispError(f"the weight store: {getattr(exc, 'message', exc)}") from None


async def store_message(message: dict) -> None:
    """store_list / store_remove / store_persist: answered with {type:"store", id, models, usage,
    quota, persisted, backend} (the page's storage manager)."""
    import wisp_store

    kind, request = message["type"], message.get("id")
    if kind == "store_remove":
        model = str(message.get("model") or "")
        if not model:
            raise WispError("store_remove needs a model id")
        if _busy and _loading == [model]:  # its files are open and being written
            raise WispError(f"{model} is being loaded; remove it after the load")
        await wisp_store.remove(model)
    persisted = None
    if kind == "store_persist":
        persisted = bool(await wisp_store.persist())
    report = (await wisp_store.report()).to_py()
    if persisted is not None:
        report["persisted"] = persisted
    emit({"type": "store", "id": request, **report})


def wasm_memory_bytes() -> int:
    """The size of the worker's wasm memory: weights must not have passed through it."""
    import pyodide_js

    return int(pyodide_js._module.HEAPU8.length)


def _command_buffers() -> int:
    device = _state.get("device")
    return device.command_buffers() if hasattr(device, "command_buffers") else 0


def prompt_ids(message: dict, tok, context: int, max_new: int) -> tuple[list[int], int]:
    """(prompt ids, chat exchanges dropped to fit the context: the oldest go first)."""
    if message.get("ids") is not None:
        return [int(i) for i in message["ids"]], 0
    if tok is None:
        raise WispError("this model has no tokenizer: generate by token ids")
    if message.get("messages") is not None:
        from ..chat_prompt import fit_to_context

        return fit_to_context(tok, list(message["messages"]), context, max_new)
    if message.get("prompt") is not None:
        return tok.encode(message["prompt"], add_special_tokens=True), 0
    raise WispError("generate needs messages, prompt or ids")


async def generate(message: dict) -> None:
    from ..sampling import SamplingParams

    if "engine" not in _state:
        raise WispError("no model loaded")
    engine, tok, cache = _state["engine"], _state["tok"], _state["cache"]
    request, sampling = message.get("id"), dict(message.get("sampling") or {})
    max_new = int(sampling.pop("max_new_tokens", 512))
    params = SamplingParams(**{k: v for k, v in sampling.items() if v is not None})
    ids, dropped = prompt_ids(message, tok, engine.context, max_new)
    if len(ids) >= engine.context:
        raise WispError(f"the prompt is {len(ids)} tokens; the context holds {engine.context}")
    stream = tok.stream_decoder(skip_special_tokens=True) if tok else None
    tokens, times, stop = [], [], "length"
    start = time.perf_counter()
    stop_ids = () if message.get("ignore_eos") else _state["stop_ids"]  # benchmarks decode a fixed count
    buffers_before = _command_buffers()
    answer = cache.generate(ids, min(max_new, engine.context - len(ids)), params, stop_ids)
    try:
        async for token in answer:
            tokens.append(token)
            times.append(time.perf_counter())
            if token in stop_ids:
                stop = "eos"
                break
            emit({"type": "token", "id": request, "text": stream.push(token) if stream else "", "token_id": token,
                  "index": len(tokens) - 1})
            if request in _cancelled:
                stop = "cancel"
                break
    finally:
        await answer.aclose()  # now, not at garbage collection: the cache must know what it holds
        _cancelled.discard(request)
    tail = stream.flush() if stream else ""
    if tail:
        emit({"type": "token", "id": request, "text": tail, "token_id": -1, "index": len(tokens)})
    ttft = times[0] - start if times else 0.0
    decode = (len(times) - 1) / (times[-1] - times[0]) if len(times) > 1 and times[-1] > times[0] else 0.0
    emit({"type": "done", "id": request, "tokens": tokens, "prompt_tokens": len(ids), "dropped_exchanges": dropped,
          "prefilled_tokens": cache.prefilled, "ttft_ms": round(1000 * ttft, 1),
          "prefill_tok_s": round(cache.prefilled / ttft, 1) if ttft else 0.0,
          "decode_tok_s": round(decode, 1), "stop": stop, "command_buffers": _command_buffers() - buffers_before,
          "host_ms_per_token": round(1000 * engine.decode_host_seconds / max(engine.decode_tokens, 1), 3)})
