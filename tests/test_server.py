"""The web app's server (app/) and the web build (tools/build_web.py), without a browser.

The server runs under uvicorn on a free loopback port in a thread, and requests go through
http.client, which sends paths as written (httpx and browsers would fold "/../" before sending).
"""

import base64
import hashlib
import http.client
import json
import os
import shutil
import subprocess
import sys
import threading
import time
import zipfile
from contextlib import contextmanager
from pathlib import Path

import pytest

pytest.importorskip("starlette")
uvicorn = pytest.importorskip("uvicorn")

from app.__main__ import bind  # noqa: E402
from app.models import ModelPathError, ModelRegistry  # noqa: E402
from app.server import create_app  # noqa: E402
from py_engine.catalog import DEFAULT_MODEL, MODELS  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
WEB = ROOT / "build" / "web"
FIXTURE = ROOT / "tests" / "fixtures" / "llama-f32"


@pytest.fixture(scope="session")
def web_build():
    """build/web, current (a no-op when `make web` already ran)."""
    result = subprocess.run([sys.executable, str(ROOT / "tools" / "build_web.py")], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    return WEB


def fake_cached_model(cache: Path, name: str = DEFAULT_MODEL) -> Path:
    """A catalog model the cache vouches for: a sparse file of the right size and a matching
    sidecar (model_cache trusts a stat plus the sidecar, so no 98 MB are written)."""
    model = MODELS[name]
    path = cache / model.filename
    cache.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as f:
        f.write(b"GGUF" + bytes(range(256)))
        f.truncate(model.size)
        f.seek(model.size - 4)
        f.write(b"TAIL")
    st = path.stat()
    sidecar = {"sha256": model.sha256, "size": st.st_size, "mtime_ns": st.st_mtime_ns}
    (cache / f"{model.filename}.sha256").write_text(json.dumps(sidecar))
    return path


@contextmanager
def running(app):
    sock = bind("127.0.0.1", 0)
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="off"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.01)
    try:
        yield sock.getsockname()[1]
    finally:
        server.should_exit = True
        thread.join(10)


@pytest.fixture(scope="module")
def server(web_build, tmp_path_factory):
    cache = tmp_path_factory.mktemp("cache")
    gguf = fake_cached_model(cache)
    registry = ModelRegistry([FIXTURE], cache_dir=cache)
    with running(create_app(registry, web_dir=web_build)) as port:
        yield {"port": port, "gguf": gguf}


def request(port, path, headers=None, method="GET"):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        conn.request(method, path, headers=headers or {})
        response = conn.getresponse()
        body = response.read()
        return response.status, {k.lower(): v for k, v in response.getheaders()}, body
    finally:
        conn.close()


def test_api_models(server):
    status, headers, body = request(server["port"], "/api/models")
    assert status == 200 and headers["content-type"] == "application/json"
    models = {m["id"]: m for m in json.loads(body)}
    assert set(models) == {"llama-f32", DEFAULT_MODEL}
    hf = models["llama-f32"]
    assert hf["kind"] == "hf" and hf["default"] is True  # the model named on the command line comes first
    assert hf["files"] == {
        name: (FIXTURE / name).stat().st_size for name in ("config.json", "generation_config.json", "model.safetensors")
    }
    gguf = models[DEFAULT_MODEL]
    assert gguf["kind"] == "gguf" and gguf["default"] is False
    assert gguf["files"] == {MODELS[DEFAULT_MODEL].filename: MODELS[DEFAULT_MODEL].size}


def test_api_models_hashes(server):
    """The browser's store checks each file against these: the catalog's sha256, else the very
    ETag the file server sends for it."""
    models = {m["id"]: m for m in json.loads(request(server["port"], "/api/models")[2])}
    gguf = models[DEFAULT_MODEL]
    assert gguf["hashes"] == {MODELS[DEFAULT_MODEL].filename: {"sha256": MODELS[DEFAULT_MODEL].sha256}}
    hf = models["llama-f32"]
    assert set(hf["hashes"]) == set(hf["files"])
    for name, entry in hf["hashes"].items():
        assert request(server["port"], f"/models/llama-f32/{name}")[1]["etag"] == entry["etag"]


def test_sidecar_sha256_is_a_files_hash(tmp_path):
    from app.models import file_hash

    path = tmp_path / "m.gguf"
    path.write_bytes(b"GGUF1234")
    digest = hashlib.sha256(b"GGUF1234").hexdigest()
    st = path.stat()
    (tmp_path / "m.gguf.sha256").write_text(
        json.dumps({"sha256": digest, "size": st.st_size, "mtime_ns": st.st_mtime_ns})
    )
    assert file_hash(path, st) == {"sha256": digest}
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))  # changed since: the sidecar is stale
    assert "etag" in file_hash(path, path.stat())


def test_registry_defaults_and_ids(tmp_path):
    cache = tmp_path / "cache"
    fake_cached_model(cache)
    only_cache = ModelRegistry([], cache_dir=cache).models()
    assert [(m.id, m.default) for m in only_cache] == [(DEFAULT_MODEL, True)]
    assert ModelRegistry([], cache_dir=tmp_path / "empty").models() == []
    (tmp_path / "a").mkdir()
    gguf = tmp_path / "a" / "My Model.Q4_0.gguf"
    gguf.write_bytes(b"GGUF")
    (tmp_path / "b").mkdir()
    shutil.copy(gguf, tmp_path / "b" / gguf.name)
    both = ModelRegistry([gguf, tmp_path / "b" / gguf.name, DEFAULT_MODEL], include_cache=False, cache_dir=cache)
    assert [(m.id, m.kind, m.default) for m in both.models()] == [
        ("my-model.q4_0", "gguf", True),
        ("my-model.q4_0-2", "gguf", False),
        (DEFAULT_MODEL, "gguf", False),
    ]
    for bad in (tmp_path / "missing", tmp_path / "a", "qwen2.5-coder-0.5b-instruct"):  # no dir config; not cached
        with pytest.raises(ModelPathError):
            ModelRegistry([bad], cache_dir=cache)


def test_range_requests(server):
    port, size = server["port"], MODELS[DEFAULT_MODEL].size
    url = f"/models/{DEFAULT_MODEL}/{MODELS[DEFAULT_MODEL].filename}"
    status, headers, body = request(port, url, {"Range": "bytes=4-13"})
    assert status == 206 and body == bytes(range(10))
    assert headers["content-range"] == f"bytes 4-13/{size}" and headers["content-length"] == "10"
    assert headers["accept-ranges"] == "bytes" and headers["content-type"] == "application/octet-stream"
    status, headers, body = request(port, url, {"Range": "bytes=-4"})  # suffix range
    assert status == 206 and body == b"TAIL" and headers["content-range"] == f"bytes {size - 4}-{size - 1}/{size}"
    status, headers, body = request(port, url, {"Range": f"bytes={size - 2}-"})  # open-ended
    assert status == 206 and body == b"IL"
    status, headers, _ = request(port, url, {"Range": f"bytes={size}-"})
    assert status == 416 and headers["content-range"] == f"bytes */{size}"
    status, headers, body = request(port, url, method="HEAD")
    assert status == 200 and headers["content-length"] == str(size) and body == b""
    weights = FIXTURE / "model.safetensors"
    status, _, body = request(port, "/models/llama-f32/model.safetensors", {"Range": "bytes=0-7"})
    assert status == 206 and body == weights.read_bytes()[:8]


def test_etag_and_not_modified(server):
    port = server["port"]
    status, headers, body = request(port, "/models/llama-f32/config.json")
    assert status == 200 and body == (FIXTURE / "config.json").read_bytes()
    etag, modified = headers["etag"], headers["last-modified"]
    status, headers, body = request(port, "/models/llama-f32/config.json", {"If-None-Match": etag})
    assert status == 304 and body == b"" and headers["etag"] == etag
    assert request(port, "/models/llama-f32/config.json", {"If-None-Match": '"other"'})[0] == 200
    assert request(port, "/models/llama-f32/config.json", {"If-Modified-Since": modified})[0] == 304
    # A stale If-Range gets the whole (changed) file rather than a piece of it.
    status, _, body = request(port, "/models/llama-f32/config.json", {"Range": "bytes=0-1", "If-Range": '"old"'})
    assert status == 200 and len(body) == (FIXTURE / "config.json").stat().st_size
    assert request(port, "/models/llama-f32/config.json", {"Range": "bytes=0-1", "If-Range": etag})[0] == 206


@pytest.mark.parametrize(
    "path",
    [
        "/models/llama-f32/reference.json",  # exists, but not a listed model file
        "/models/nope/config.json",
        "/models/llama-f32/",
        "/models/llama-f32/missing.json",
        "/static/no-such-file.js",
        "/pyodide/nope.wasm",
        "/wheels/nope.whl",
        "/worker/nope.js",
        "/nope",
    ],
)
def test_missing_and_unlisted_files(server, path):
    assert request(server["port"], path)[0] == 404


TRAVERSALS = [
    "/models/llama-f32/../../pyproject.toml",
    "/models/llama-f32/%2e%2e/%2e%2e/pyproject.toml",
    "/models/..%2f..%2f/pyproject.toml",
    "/models/llama-f32/..%2freference.json",
    "/static/../Makefile",
    "/static/%2e%2e/Makefile",
    "/static/%2E%2E%2FMakefile",
    "/static/..%5cMakefile",
    "/static//etc/passwd",
    "/static/%2fetc%2fpasswd",
    "/static/.%2e/Makefile",
    "/static/./index.html%00",
    "/pyodide/../../..",
    "/pyodide/../../../Makefile",
    "/pyodide/%2e%2e/%2e%2e/%2e%2e/pyproject.toml",
    "/wheels/../wisp-lock.json",
    "/wheels/%2e%2e/%2e%2e/%2e%2e/Makefile",
    "/worker/../app/server.py",
    "/static/../.git/config",
    "/wisp-lock.json/../Makefile",
    "/sw.js/../Makefile",
    "/manifest.webmanifest/%2e%2e/Makefile",
    "/version.json/../pyproject.toml",
    "/static/sw.js/../../Makefile",
]


@pytest.mark.parametrize("path", TRAVERSALS)
def test_traversal_refused(server, path):
    status, _, body = request(server["port"], path)
    assert status in (400, 404), (path, status)
    assert b".PHONY" not in body and b"root:" not in body and b"[project]" not in body


def test_symlink_out_of_a_root_refused(tmp_path, web_build):
    (tmp_path / "static").mkdir()
    (tmp_path / "secret.txt").write_text("secret")
    (tmp_path / "static" / "inside.txt").write_text("inside")
    (tmp_path / "static" / "leak.txt").symlink_to(tmp_path / "secret.txt")
    (tmp_path / "static" / "alias.txt").symlink_to(tmp_path / "static" / "inside.txt")
    app = create_app(ModelRegistry([], include_cache=False), root=tmp_path, web_dir=web_build)
    with running(app) as port:
        assert request(port, "/static/leak.txt")[0] == 404
        assert request(port, "/static/alias.txt")[:3:2] == (200, b"inside")
        assert request(port, "/")[0] == 404  # no page yet: nothing else is served in its place


def test_the_server_serves_no_symlink_out_of_a_model(tmp_path, web_build):
    """A model named at start-up; then its config.json becomes a symlink to a file outside (as
    an attacker with write access to the folder would do): 404, and /api/models leaves it out."""
    model = tmp_path / "model"
    shutil.copytree(FIXTURE, model)
    (tmp_path / "passwd").write_text("root:x:0:0")
    with running(create_app(ModelRegistry([model], include_cache=False), web_dir=web_build)) as port:
        listed = json.loads(request(port, "/api/models")[2])[0]
        assert request(port, f"/models/{listed['id']}/config.json")[0] == 200
        (model / "config.json").unlink()
        (model / "config.json").symlink_to(tmp_path / "passwd")
        status, _, body = request(port, f"/models/{listed['id']}/config.json")
        assert status == 404 and b"root:" not in body
        assert "config.json" not in json.loads(request(port, "/api/models")[2])[0]["files"]


def test_mime_types(server, web_build):
    port = server["port"]
    wheel = next((web_build / "wheels").glob("wisp-*.whl")).name
    for path, expected in [
        ("/pyodide/pyodide.asm.wasm", "application/wasm"),
        ("/pyodide/pyodide.mjs", "text/javascript"),
        ("/wisp-lock.json", "application/json"),
        ("/pyodide/python_stdlib.zip", "application/zip"),
        (f"/wheels/{wheel}", "application/zip"),
        ("/models/llama-f32/model.safetensors", "application/octet-stream"),
    ]:
        status, headers, _ = request(port, path, method="HEAD")
        assert status == 200 and headers["content-type"].split(";")[0] == expected, path
    if (ROOT / "static" / "index.html").exists():
        status, headers, _ = request(port, "/")
        assert status == 200 and headers["content-type"].startswith("text/html")


def test_pwa_routes(server, web_build):
    """The manifest, the service worker (its version written in) and the app shell list it precaches."""
    port = server["port"]
    status, headers, body = request(port, "/manifest.webmanifest")
    assert status == 200 and headers["content-type"].split(";")[0] == "application/manifest+json"
    manifest = json.loads(body)
    assert manifest["start_url"] == "/" and manifest["scope"] == "/" and manifest["display"] == "standalone"
    sizes = {icon["sizes"] for icon in manifest["icons"]}
    assert {"192x192", "512x512", "any"} <= sizes
    for icon in manifest["icons"]:
        status, headers, body = request(port, icon["src"])
        assert status == 200 and headers["content-type"] == icon["type"], icon
        if icon["type"] == "image/png":
            width, height = int.from_bytes(body[16:20], "big"), int.from_bytes(body[20:24], "big")
            assert body[:8] == b"\x89PNG\r\n\x1a\n" and f"{width}x{height}" == icon["sizes"]

    status, headers, body = request(port, "/version.json")
    assert status == 200 and headers["content-type"] == "application/json" and headers["cache-control"] == "no-cache"
    shell = json.loads(body)
    assert shell == json.loads((web_build / "version.json").read_text())  # the build wrote the same
    files = shell["files"]
    assert {
        "/",
        "/manifest.webmanifest",
        "/static/app.js",
        "/worker/worker.js",
        "/wisp-lock.json",
        "/pyodide/pyodide.asm.wasm",
    } <= set(files)
    assert any(f.startswith("/wheels/wisp-") for f in files)
    assert not [f for f in files if f.startswith(("/models/", "/api/")) or f in ("/sw.js", "/version.json")]
    for url in files:  # everything the service worker precaches is there (its install is all or nothing)
        assert request(port, url, method="HEAD")[0] == 200, url

    status, headers, body = request(port, "/sw.js")
    assert status == 200 and headers["content-type"].startswith("text/javascript")
    assert headers["cache-control"] == "no-cache"
    assert f'const VERSION = "{shell["version"]}";' in body.decode() and b"%WISP_VERSION%" not in body


def test_shell_version_follows_the_files(tmp_path, web_build):
    """An edit under static/ is a new version (and so a new service worker) without a rebuild."""
    for name in ("static", "worker"):
        shutil.copytree(ROOT / name, tmp_path / name)
    app = create_app(ModelRegistry([], include_cache=False), root=tmp_path, web_dir=web_build)
    with running(app) as port:
        first = json.loads(request(port, "/version.json")[2])
        assert first["version"] in request(port, "/sw.js")[2].decode()
        (tmp_path / "static" / "extra.css").write_text("p { color: red }")
        second = json.loads(request(port, "/version.json")[2])
        assert second["version"] != first["version"] and "/static/extra.css" in second["files"]
        assert second["version"] in request(port, "/sw.js")[2].decode()
        assert json.loads(request(port, "/version.json")[2]) == second  # stable while nothing changes
    bare = create_app(ModelRegistry([], include_cache=False), root=tmp_path, web_dir=tmp_path / "unbuilt")
    with running(bare) as port:
        assert request(port, "/version.json")[0] == 404  # no build: no shell to precache (the SW won't install)
        assert b'"unbuilt"' in request(port, "/sw.js")[2]


def test_lock_file(server, web_build):
    text = (web_build / "wisp-lock.json").read_text()
    assert "http://" not in text and "https://" not in text
    lock = json.loads(text)
    stock = json.loads((web_build / "pyodide" / "pyodide-lock.json").read_text())
    assert lock["info"] == stock["info"]
    assert set(lock["packages"]) == {"wisp", "jinja2", "markupsafe"}
    assert lock["packages"]["wisp"]["depends"] == ["jinja2"] and lock["packages"]["wisp"]["imports"] == ["py_engine"]
    for name, entry in lock["packages"].items():
        assert entry["name"] == name and entry["file_name"].startswith("/wheels/")
        status, _, body = request(server["port"], entry["file_name"])  # what the browser will fetch
        assert status == 200 and hashlib.sha256(body).hexdigest() == entry["sha256"]
        assert entry["install_dir"] == "site" and entry["package_type"] == "package"


def test_wheels(web_build, tmp_path):
    wheel = next((web_build / "wheels").glob("wisp-*.whl"))
    names = set(zipfile.ZipFile(wheel).namelist())
    shaders = {
        f"py_engine/shaders/{p.relative_to(ROOT / 'shaders').as_posix()}" for p in (ROOT / "shaders").rglob("*.wgsl")
    }
    sources = {
        p.relative_to(ROOT).as_posix() for p in (ROOT / "py_engine").rglob("*.py") if "__pycache__" not in p.parts
    }
    assert shaders and shaders <= names and sources <= names
    assert any(name.startswith("py_engine/shaders/weights/") for name in names)
    # Installed (a wheel is unpacked as is), the engine finds its shaders inside itself.
    site = tmp_path / "site"
    zipfile.ZipFile(wheel).extractall(site)
    code = (
        "from py_engine.runtime.kernels import SHADER_DIR, WEIGHTS_DIR; "
        "print(SHADER_DIR, len((SHADER_DIR / 'gemv.wgsl').read_text()), (WEIGHTS_DIR / 'q4_k.wgsl').is_file())"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(site)},
        capture_output=True,
        text=True,
    )
    assert out.returncode == 0, out.stderr
    shader_dir, length, weights = out.stdout.split()
    assert Path(shader_dir) == site / "py_engine" / "shaders" and int(length) > 0 and weights == "True"
    markupsafe = next((web_build / "wheels").glob("markupsafe-*-py3-none-any.whl"))
    with zipfile.ZipFile(markupsafe) as whl:
        assert not [n for n in whl.namelist() if n.endswith((".c", ".so"))]
        info = next(n for n in whl.namelist() if n.endswith(".dist-info/RECORD"))
        for line in whl.read(info).decode().splitlines():
            name, digest, _ = line.split(",")
            if digest:
                raw = base64.urlsafe_b64encode(hashlib.sha256(whl.read(name)).digest()).rstrip(b"=").decode()
                assert digest == f"sha256={raw}", name
        assert b"Tag: py3-none-any" in whl.read(info.replace("RECORD", "WHEEL"))


NODE_BOOT = """
import { readFileSync } from "node:fs";
const web = process.argv[2];
const { loadPyodide } = await import(`${web}/pyodide/pyodide.mjs`);
const lock = JSON.parse(readFileSync(`${web}/wisp-lock.json`, "utf8"));
for (const p of Object.values(lock.packages)) p.file_name = web + p.file_name;  // Node reads files, not URLs
const py = await loadPyodide({ indexURL: `${web}/pyodide/`, lockFileContents: lock });
await py.loadPackage(["wisp"], { messageCallback: () => {} });
console.log(py.runPython(`
import sys, jinja2, markupsafe, py_engine
from py_engine.runtime.kernels import SHADER_DIR
" ".join([sys.version.split()[0], str(len((SHADER_DIR / "gemv.wgsl").read_text())), str(markupsafe.escape("<"))])
`));
"""


@pytest.mark.slow  # Pyodide boots in Node
@pytest.mark.skipif(shutil.which("node") is None, reason="needs node")
def test_pyodide_boots_offline_in_node(web_build, tmp_path):
    script = tmp_path / "boot.mjs"
    script.write_text(NODE_BOOT)
    out = subprocess.run(["node", str(script), str(web_build)], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    version, length, escaped = out.stdout.split()[-3:]
    assert version.startswith("3.14.") and int(length) > 0 and escaped == "&lt;"


def test_cli(web_build, tmp_path):
    env = {**os.environ, "WISP_MODEL_CACHE": str(tmp_path)}
    bad = subprocess.run(
        [sys.executable, "-m", "app", "--model", str(tmp_path / "nope.gguf")],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
    )
    assert bad.returncode == 2 and bad.stderr.startswith("error: ")
    proc = subprocess.Popen(
        [sys.executable, "-m", "app", "--port", "0", "--no-default", "--model", str(FIXTURE)],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        line = proc.stdout.readline()
        assert line.startswith("Wisp: http://127.0.0.1:")
        port = int(line.strip().rstrip("/").rsplit(":", 1)[1])
        status, _, body = request(port, "/api/models")
        assert status == 200 and [m["id"] for m in json.loads(body)] == ["llama-f32"]
    finally:
        proc.terminate()
        proc.wait(10)
