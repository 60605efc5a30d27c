"""`py_engine.load` in Pyodide outside Wisp's own page: a JupyterLite kernel, PyScript's worker, a
worker of your own.

The engine needs what worker/worker.js gives it on Wisp's page: WebGPU, the weight store (OPFS, whose
sync access handles exist in dedicated workers only) and the JS glue registered as Python modules
(worker/gpu.js as wisp_gpu, store.js as wisp_store, pictures.js as wisp_pictures, memory_files.js as
wisp_memory_files). open_model checks the first two, brings the glue once from the serving origin,
finds the model in that origin's /api/models and runs the page worker's own load (worker.py) with a
WorkerState of its own: the same load message, the same weight store, so on one origin a model the
page downloaded serves a notebook too, and the other way round.

host_problem (which host cannot work, and why) takes the JS global scope as an argument, so the
desktop tests check its messages with a stand-in.
"""

from __future__ import annotations

import importlib
import itertools
from collections.abc import Callable
from typing import TYPE_CHECKING

from ..errors import WispError
from ..gpu.browser_host import NoWebGPUError

if TYPE_CHECKING:
    from ..session import LoadedModel

Progress = Callable[[str, int, int], None]

# The JS modules worker/worker.js registers, by the names py_engine imports them by.
GLUE = {
    "wisp_gpu": "worker/gpu.js",
    "wisp_store": "worker/store.js",
    "wisp_pictures": "worker/pictures.js",
    "wisp_memory_files": "worker/memory_files.js",
}
_glue_from: str | None = None  # the origin the glue was brought from (once per interpreter); "": worker.js's
_progress_proxy = None  # the store's progress sink (a JS proxy of the last load's post)
_loads = itertools.count(1)


class MainThreadError(WispError):
    """Python runs on a page's main thread (or a shared or service worker): the weight store needs
    a dedicated Web Worker."""


class ModelNotServedError(WispError):
    """The serving origin's /api/models does not list the model asked for, or cannot be read."""


def host_problem(scope) -> WispError | None:
    """Why Wisp cannot run in this JS global scope (None: it can). scope: Pyodide's `js` module
    (globalThis), or a stand-in with the same attributes."""
    if getattr(scope, "DedicatedWorkerGlobalScope", None) is None:
        if getattr(scope, "document", None) is not None:
            where = "on a page's main thread"
        elif getattr(scope, "WorkerGlobalScope", None) is not None:
            where = "in a shared or service worker"
        else:
            where = "outside a browser worker"
        return MainThreadError(
            f"wisp.load needs a dedicated Web Worker, and this Python runs {where}: the weight store "
            "keeps models in OPFS through sync access handles, which browsers give dedicated workers only. "
            "Run it in a worker: PyScript's <script type=\"py\" worker>, JupyterLite's Pyodide kernel "
            "(a worker already), or Pyodide started in a Worker of your own"
        )
    navigator = getattr(scope, "navigator", None)
    if getattr(navigator, "gpu", None) is None:
        if getattr(scope, "isSecureContext", True) is False:
            return NoWebGPUError(
                "this worker has no WebGPU (navigator.gpu is missing): the page is not a secure context; "
                "serve it over https or from localhost / 127.0.0.1"
            )
        return NoWebGPUError(
            "this worker has no WebGPU (navigator.gpu is missing): use a browser that gives WebGPU to "
            "workers (Chrome or Edge 113+, Safari 26), with WebGPU enabled"
        )
    return None


def model_ref(entry: dict, server: str, same_origin: bool, absolute: bool = False) -> dict:
    """The load message's model of an /api/models entry, as static/client.js's modelRef builds it:
    its files served at <server>/models/<id>/, an absolute URL when that is another origin (a model
    from a URL, as the page's brought ones) or when `absolute`: a worker started from a blob: URL
    (PyScript's) resolves no path against its own location."""
    base = f"/models/{entry['id']}/"
    ref = {key: entry[key] for key in ("id", "name", "kind", "files", "hashes", "mmproj") if entry.get(key) is not None}
    ref["base"] = base if same_origin and not absolute else server + base
    if not same_origin:
        ref["source"] = "url"
    return ref


def find_model(models: list, name: str, url: str) -> dict:
    """The /api/models entry whose id (or name) is `name`; else ModelNotServedError listing them."""
    for entry in models:
        if isinstance(entry, dict) and name in (entry.get("id"), entry.get("name")):
            return entry
    listed = ", ".join(str(m.get("id")) for m in models if isinstance(m, dict)) or "no models"
    raise ModelNotServedError(
        f"{name!r} is not a model {url} lists (it lists: {listed}); start the server with it "
        f"(`python -m app --model PATH`, or fetch a catalog model first: `python -m py_engine fetch {name}`)"
    )


def load_message(
    entry: dict, server: str, same_origin: bool, context, precision: str, platform: dict, absolute: bool = False
) -> dict:
    """The page's `load` message for this model (protocol.py's table), its options the notebook's."""
    options = {"precision": precision, "platform": platform}
    if context is not None:
        options["context"] = context
    return {
        "type": "load",
        "id": f"library-load-{next(_loads)}",
        "model": model_ref(entry, server, same_origin, absolute),
        "options": options,
    }


async def _import_js(url: str):
    """A JS module by URL: dynamic import(), which Python cannot spell (a Function wraps it)."""
    import js

    return await js.Function.new("url", "return import(url)")(url)


def glue_registered() -> bool:
    """Whether the glue is importable already (in Wisp's own worker, worker.js registered it: a second
    copy of gpu.js would hold a second, empty set of GPU objects)."""
    try:
        for name in GLUE:
            importlib.import_module(name)
    except ImportError:
        return False
    return True


async def bring_glue(server: str) -> None:
    """Register worker/gpu.js, store.js, pictures.js and memory_files.js under worker.js's names, once."""
    global _glue_from
    import pyodide_js

    if _glue_from is not None:
        return
    if glue_registered():
        _glue_from = ""
        return
    for name, path in GLUE.items():
        try:
            module = await _import_js(f"{server}/{path}")
        except Exception as exc:  # a JsException: the origin does not serve Wisp's worker files
            raise WispError(f"cannot import {server}/{path} (is {server} a Wisp server?): {exc}") from None
        pyodide_js.registerJsModule(name, module)
    _glue_from = server


async def fetch_json(url: str):
    import js

    try:
        response = await js.fetch(url)
    except Exception as exc:
        raise ModelNotServedError(f"cannot fetch {url}: {exc}") from None
    if not response.ok:
        raise ModelNotServedError(f"{url} answered {response.status} {response.statusText}")
    return (await response.json()).to_py()


async def open_model(
    name: str,
    *,
    context: int | None = None,
    precision: str = "fast",
    server: str | None = None,
    progress: Progress | None = None,
) -> LoadedModel:
    """The session.LoadedModel of `name`, a model `server` (default: this page's origin) lists at
    /api/models, its weights through the origin's weight store (OPFS) onto this worker's WebGPU.
    progress(stage, done, total): the load's steps as the page shows them: "store", "download",
    "verify" (bytes), "upload", "compile". Raises MainThreadError on a page's main thread,
    NoWebGPUError without WebGPU, ModelNotServedError for a model not listed, WispError subclasses
    for bad files."""
    import js

    from .state import WorkerState
    from .worker import load, plain

    problem = host_problem(js)
    if problem is not None:
        raise problem
    origin = str(js.location.origin)
    server = (server or origin).rstrip("/")
    await bring_glue(server)
    url = f"{server}/api/models"
    models = await fetch_json(url)
    if not isinstance(models, list):
        raise ModelNotServedError(f"{url} did not answer a list of models")
    entry = find_model(models, name, url)
    platform = (await _import_js(f"{server}/static/platform.js")).detectPlatform(js.navigator).to_py()
    blob = str(js.location.protocol) == "blob:"
    message = load_message(entry, server, server == origin, context, precision, plain(platform), absolute=blob)

    state = WorkerState()

    def post(event: dict) -> None:  # the load's events: its progress is the caller's, `loaded` says nothing new
        if event.get("type") == "progress" and progress is not None:
            progress(str(event.get("phase")), int(event.get("done") or 0), int(event.get("total") or 0))

    state.post = post
    _store_progress(post)
    from .protocol import check_message

    check_message(message)
    await load(state, message)
    return state.model


def _store_progress(post) -> None:
    """The weight store's download/verify progress to `post`: store.js posts it on its worker's own
    channel, which in a kernel's worker is the kernel's. In Wisp's own worker (glue registered by
    worker.js) it stays the page's."""
    global _progress_proxy
    import wisp_store
    from pyodide.ffi import create_proxy

    if not _glue_from:
        return
    previous, _progress_proxy = _progress_proxy, create_proxy(lambda event: post(event.to_py()))
    wisp_store.progressTo(_progress_proxy)
    if previous is not None:
        previous.destroy()
