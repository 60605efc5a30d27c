"""The installable, offline app (static/sw.js, static/manifest.webmanifest) in headless Chromium.

One browser profile, one server (in-process, on a copy of static/ and worker/ so the test can make a
new version), one flow:
  1. first visit: the service worker installs the app shell cache; after a reload it controls the
     page, and Chromium reports no installability errors (CDP Page.getInstallabilityErrors);
  2. offline (the server stopped and the context offline): the page reloads from the cache, the model
     list comes from the cached /api/models, and the real worker boots Pyodide and imports the engine;
     /models/* is in no cache;
  3. a new version that cannot be fetched whole does not install (no partial cache, the old serves on);
  4. a new version (a changed file): the new worker installs a complete new cache while the old one is
     still there and still serving; the page's "Reload" toast activates it, and only then is the old
     cache gone.
"""

import json
import shutil
import threading
import time
from contextlib import contextmanager
from pathlib import Path

import pytest

uvicorn = pytest.importorskip("uvicorn")
playwright_api = pytest.importorskip("playwright.sync_api")

from browser_harness import CHROMIUM, FLAGS  # noqa: E402
from test_server import FIXTURE, ROOT, web_build  # noqa: E402,F401  (web_build: a pytest fixture)

from app.__main__ import bind  # noqa: E402
from app.models import ModelRegistry  # noqa: E402
from app.server import create_app  # noqa: E402

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="needs Chromium at /usr/bin/chromium"),
]


class Server:
    """uvicorn in a thread that can be stopped and started again on the same port (same origin)."""

    def __init__(self, app):
        self.app, self.port, self.server, self.thread = app, 0, None, None

    def start(self):
        sock = bind("127.0.0.1", self.port)
        self.port = sock.getsockname()[1]
        self.server = uvicorn.Server(uvicorn.Config(self.app, log_level="warning", lifespan="off"))
        self.thread = threading.Thread(target=self.server.run, kwargs={"sockets": [sock]}, daemon=True)
        self.thread.start()
        deadline = time.monotonic() + 10
        while not self.server.started and time.monotonic() < deadline:
            time.sleep(0.01)
        return self

    def stop(self):
        self.server.should_exit = True
        self.thread.join(10)

    @property
    def url(self):
        return f"http://127.0.0.1:{self.port}"


@contextmanager
def serving(root):
    server = Server(
        create_app(ModelRegistry([FIXTURE], include_cache=False), root=root, web_dir=ROOT / "build" / "web")
    ).start()
    try:
        yield server
    finally:
        if server.thread.is_alive():
            server.stop()


CACHES = """async () => {
  const out = {};
  for (const name of await caches.keys()) {
    const cache = await caches.open(name);
    out[name] = (await cache.keys()).map((r) => new URL(r.url).pathname);
  }
  return out;
}"""

ACTIVE = """async () => {
  const reg = await navigator.serviceWorker.ready;
  if (reg.active.state !== "activated")
    await new Promise((ok) => reg.active.addEventListener("statechange", () => reg.active.state === "activated" && ok()));
  return reg.active.scriptURL;
}"""

UPDATE = """async () => {
  // Check for a new service worker and wait for its install to end: "installed" (waiting) or "redundant".
  const reg = await navigator.serviceWorker.getRegistration();
  await reg.update().catch(() => {});
  const w = reg.installing || reg.waiting;
  if (!w) return "no update";
  if (w.state === "installing")
    await new Promise((ok) => w.addEventListener("statechange", () => w.state !== "installing" && ok()));
  return w.state;
}"""

BOOT = """async () => {
  // The real worker, as the page starts it: Pyodide, the wheels and the engine, all from the cache.
  const worker = new Worker("/worker/worker.js?test", { type: "module" });
  const events = [];
  const result = await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error("no boot: " + JSON.stringify(events))), 90000);
    worker.onerror = (e) => reject(new Error("worker error: " + e.message));
    worker.onmessage = (ev) => {
      const msg = ev.data;
      events.push(msg.type);
      if (msg.type === "error") { clearTimeout(timer); reject(new Error(msg.message)); }
      if (msg.type === "booted")
        worker.postMessage({ type: "test_exec", id: 1, code:
          "import json, py_engine, py_engine.web.worker, jinja2\\njson.dumps(py_engine.__name__)" });
      if (msg.type === "test_result") { clearTimeout(timer); resolve(msg); }
    };
  });
  worker.terminate();
  return result;
}"""


def shell_cache(caches):
    names = [n for n in caches if n.startswith("wisp-shell-")]
    assert len(names) == 1, caches
    return names[0]


def test_installable_offline_and_atomic_update(web_build, tmp_path):  # noqa: F811
    root = tmp_path / "root"
    for name in ("static", "worker"):
        shutil.copytree(ROOT / name, root / name)
    with serving(root) as server, playwright_api.sync_playwright() as p:
        context = p.chromium.launch_persistent_context(
            str(tmp_path / "profile"), headless=True, executable_path=CHROMIUM, args=FLAGS
        )
        page = context.new_page()
        errors = []
        page.on("pageerror", lambda exc: errors.append(str(exc)))

        # 1. First visit: install; after a reload the worker controls the page.
        page.goto(server.url + "/")
        assert page.evaluate(ACTIVE) == server.url + "/sw.js"
        page.reload()
        page.wait_for_function("() => !!navigator.serviceWorker.controller")
        page.wait_for_selector("body[data-models=ready]")
        cdp = context.new_cdp_session(page)
        assert cdp.send("Page.getInstallabilityErrors")["installabilityErrors"] == []
        manifest = cdp.send("Page.getAppManifest")
        assert not manifest.get("errors") and json.loads(manifest["data"])["start_url"] == "/"

        shell = json.loads(page.evaluate("async () => JSON.stringify(await (await fetch('/version.json')).json())"))
        caches = page.evaluate(CACHES)
        old = shell_cache(caches)
        assert old == f"wisp-shell-{shell['version']}" and sorted(caches[old]) == sorted(shell["files"])
        assert caches.get("wisp-api") == ["/api/models"]  # the page's model list, network-first

        # 2. Offline: no server at all, and the browser told it has no network.
        range_ = "fetch('/models/llama-f32/model.safetensors', {headers: {Range: 'bytes=0-7'}}).then((r) => r.status)"
        assert page.evaluate(range_) == 206  # online, through the controlled page: the server's, not cached
        server.stop()
        context.set_offline(True)
        started = time.monotonic()
        page.reload()
        page.wait_for_selector("body[data-models=ready]")
        assert page.get_by_test_id("model-select").input_value() == "llama-f32"  # from the cached /api/models
        booted = page.evaluate(BOOT)
        assert booted.get("error") is None and json.loads(booted["result"]) == "py_engine", booted
        print(f"offline reload + Pyodide boot + engine import: {time.monotonic() - started:.1f} s")
        assert (
            page.evaluate("""() => fetch('/models/llama-f32/config.json').then(() => 'served', () => 'failed')""")
            == "failed"
        )
        caches = page.evaluate(CACHES)
        assert not [url for urls in caches.values() for url in urls if url.startswith("/models/")], caches

        # 3. A version whose shell cannot be fetched whole (a listed file the server refuses) does not
        #    install: no partial cache, the old worker keeps serving.
        context.set_offline(False)
        server.start()
        (tmp_path / "outside.txt").write_text("outside the root")
        (root / "static" / "leak.txt").symlink_to(tmp_path / "outside.txt")
        state = page.evaluate(UPDATE)
        assert state == "redundant", state
        assert sorted(page.evaluate(CACHES)) == sorted(caches)
        (root / "static" / "leak.txt").unlink()

        # 4. A new version: the new cache is complete while the old one is still there (and serving).
        style = root / "static" / "style.css"
        style.write_text(style.read_text() + "\n/* v2 */\n")
        new_shell = json.loads(page.evaluate("async () => JSON.stringify(await (await fetch('/version.json')).json())"))
        assert new_shell["version"] != shell["version"]
        assert page.evaluate(UPDATE) == "installed"
        caches = page.evaluate(CACHES)
        new = f"wisp-shell-{new_shell['version']}"
        assert old in caches and sorted(caches[new]) == sorted(new_shell["files"])  # both, the new one complete
        css = "async () => (await fetch('/static/style.css')).text()"
        assert "/* v2 */" not in page.evaluate(css)  # the old worker still serves the old version
        toast = page.get_by_test_id("update-toast")
        playwright_api.expect(toast).to_be_visible()
        with page.expect_navigation():
            toast.get_by_role("button", name="Reload").click()
        page.wait_for_selector("body[data-models=ready]")
        assert "/* v2 */" in page.evaluate(css)
        page.wait_for_function(f"async () => !(await caches.has({json.dumps(old)}))")
        assert shell_cache(page.evaluate(CACHES)) == new
        assert not errors, errors
        context.close()
