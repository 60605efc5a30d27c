"""wisp.load in Pyodide outside Wisp's page (py_engine/web/library.py) without a browser: which hosts it
refuses and with what message (a stand-in for the JS global scope), the load message it builds for the
page worker's load, the model it finds in /api/models; and the server's /notebook/ mount.
tests/test_browser_notebook.py runs the real thing: JupyterLite's kernel, and Pyodide on a page's
main thread."""

from types import SimpleNamespace

import pytest
from test_server import request, running

from app.models import ModelRegistry
from app.server import create_app
from py_engine.errors import WispError
from py_engine.gpu.browser_host import NoWebGPUError
from py_engine.web.library import (
    MainThreadError,
    ModelNotServedError,
    find_model,
    host_problem,
    load_message,
)
from py_engine.web.protocol import check_message

GPU = SimpleNamespace(gpu=object())
WORKER = {"DedicatedWorkerGlobalScope": object(), "WorkerGlobalScope": object(), "isSecureContext": True}
SERVED = [
    {"id": "tiny-tools", "name": "tiny-tools", "kind": "hf", "files": {"config.json": 831}, "hashes": None},
    {"id": "smollm2-135m-instruct", "name": "SmolLM2", "kind": "gguf", "files": {"m.gguf": 9}, "hashes": {}},
]


def test_a_dedicated_worker_with_webgpu_can_run_wisp():
    assert host_problem(SimpleNamespace(**WORKER, navigator=GPU)) is None


def test_a_pages_main_thread_is_refused_naming_what_to_do():
    problem = host_problem(SimpleNamespace(document=object(), navigator=GPU, isSecureContext=True))
    assert isinstance(problem, MainThreadError) and isinstance(problem, WispError)
    message = str(problem)
    assert "on a page's main thread" in message and "dedicated Web Worker" in message
    assert '<script type="py" worker>' in message and "OPFS" in message


def test_a_shared_worker_is_refused_too():
    problem = host_problem(SimpleNamespace(WorkerGlobalScope=object(), navigator=GPU))
    assert isinstance(problem, MainThreadError) and "in a shared or service worker" in str(problem)


def test_a_worker_without_webgpu_is_refused_with_the_cause():
    missing = host_problem(SimpleNamespace(**WORKER, navigator=SimpleNamespace()))
    assert isinstance(missing, NoWebGPUError) and "navigator.gpu is missing" in str(missing)
    assert "secure context" not in str(missing)
    insecure = host_problem(SimpleNamespace(**{**WORKER, "isSecureContext": False}, navigator=SimpleNamespace()))
    assert isinstance(insecure, NoWebGPUError) and "not a secure context" in str(insecure)


def test_a_model_not_served_is_refused_listing_those_that_are():
    assert find_model(SERVED, "SmolLM2", "u")["id"] == "smollm2-135m-instruct"  # by name too
    with pytest.raises(ModelNotServedError) as caught:
        find_model(SERVED, "qwen", "http://x/api/models")
    message = str(caught.value)
    assert "'qwen' is not a model http://x/api/models lists" in message
    assert "tiny-tools, smollm2-135m-instruct" in message


def test_the_load_message_is_the_pages():
    """The page worker's load takes it (protocol.py's table), files served by the origin: same origin,
    /models/<id>/ as static/client.js's modelRef; another server: its absolute URL, a model from a URL."""
    platform = {"webkit": False, "reason": "not WebKit"}
    same = load_message(SERVED[0], "http://o", True, 128, "exact", platform)
    assert check_message(same) == "load"
    assert same["model"] == {
        "id": "tiny-tools",
        "name": "tiny-tools",
        "kind": "hf",
        "files": {"config.json": 831},
        "base": "/models/tiny-tools/",
    }
    assert same["options"] == {"precision": "exact", "platform": platform, "context": 128}
    other = load_message(SERVED[1], "http://other:8000", False, None, "fast", platform)
    assert check_message(other) == "load" and "context" not in other["options"]
    assert other["model"]["base"] == "http://other:8000/models/smollm2-135m-instruct/"
    assert other["model"]["source"] == "url" and other["model"]["hashes"] == {}
    assert same["id"] != other["id"]
    # PyScript's worker runs from a blob: URL, against which no path resolves: the same files, absolute
    blob = load_message(SERVED[0], "http://o", True, 128, "exact", platform, absolute=True)
    assert blob["model"]["base"] == "http://o/models/tiny-tools/" and "source" not in blob["model"]


def test_the_server_mounts_a_notebook_site(tmp_path):
    site = tmp_path / "site"
    (site / "lab").mkdir(parents=True)
    (site / "index.html").write_text("<p>root</p>")
    (site / "lab" / "index.html").write_text("<p>lab</p>")
    (site / "jupyter-lite.json").write_text("{}")
    (site / ".stamp.json").write_text("{}")
    (site / "pyscript.html").write_text("<p>py</p>")
    with running(create_app(ModelRegistry([], include_cache=False), notebook=site)) as port:
        status, headers, body = request(port, "/notebook/")
        assert body == b"<p>root</p>" and "cross-origin-opener-policy" not in headers  # JupyterLite: not isolated
        assert request(port, "/notebook/lab/")[2] == b"<p>lab</p>"
        status, headers, _ = request(port, "/notebook/lab")
        assert status == 308 and headers["location"] == "/notebook/lab/"
        status, headers, _ = request(port, "/notebook")
        assert status == 308 and headers["location"] == "/notebook/"
        status, headers, _ = request(port, "/notebook/jupyter-lite.json")
        assert status == 200 and headers["content-type"] == "application/json"
        status, headers, _ = request(port, "/notebook/pyscript.html")  # PyScript's worker reaches the DOM
        assert status == 200 and headers["cross-origin-opener-policy"] == "same-origin"
        assert headers["cross-origin-embedder-policy"] == "require-corp"
        assert request(port, "/notebook/.stamp.json")[0] == 404  # hidden files stay private
        assert request(port, "/notebook/../pyproject.toml")[0] == 404
    with running(create_app(ModelRegistry([], include_cache=False))) as port:
        assert request(port, "/notebook/")[0] == 404  # only with --notebook
