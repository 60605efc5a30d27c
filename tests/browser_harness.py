"""Shared plumbing of the browser tests: our server in a subprocess, Chromium with WebGPU flags."""

from __future__ import annotations

from pathlib import Path

import pytest
from server_harness import ROOT, app_server  # noqa: F401 - the browser tests import it from here

CHROMIUM = "/usr/bin/chromium"  # Debian's (make test installs it); never `playwright install`
FLAGS = [
    "--enable-unsafe-webgpu",
    "--enable-features=Vulkan",
    "--use-angle=swiftshader",
    "--use-webgpu-adapter=swiftshader",
    "--no-sandbox",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-quic",
]


def launch(p, profile: Path | None = None, **options):
    """Headless Chromium with WebGPU (SwiftShader here): a persistent context when a profile
    directory is given (storage, service workers), else a plain browser."""
    if profile is None:
        return p.chromium.launch(headless=True, executable_path=CHROMIUM, args=FLAGS, **options)
    return p.chromium.launch_persistent_context(
        str(profile), headless=True, executable_path=CHROMIUM, args=FLAGS, **options
    )


@pytest.fixture(scope="module")
def browser():
    """(playwright, a plain headless Chromium) for one test module: import it into the module."""
    sync_api = pytest.importorskip("playwright.sync_api")
    with sync_api.sync_playwright() as p:
        chromium = launch(p)
        yield p, chromium
        chromium.close()


# Every message a page posts to a worker and every event a worker posts back goes to the test
# (record_protocol's list) as it happens, reloads and new pages included: Worker is wrapped before
# any page script runs.
PROTOCOL_RECORDER = """(() => {
  const Native = self.Worker;
  if (!Native || Native.recorded) return;
  const record = (to, data) => { try { self.__wispRecord(to, data); } catch { /* page closing */ } };
  self.Worker = class extends Native {
    static recorded = true;
    constructor(url, options) {
      super(url, options);
      this.addEventListener("message", (ev) => record("page", ev.data));
    }
    postMessage(data, transfer) {
      record("worker", data);
      return super.postMessage(data, transfer);
    }
  };
})();"""


def record_protocol(context) -> list:
    """The worker traffic of every page this context opens, as (to, data) pairs, for check_protocol."""
    log = []
    context.expose_function("__wispRecord", lambda to, data: log.append((to, data)))
    context.add_init_script(PROTOCOL_RECORDER)
    return log


def check_protocol(log: list) -> dict:
    """Check recorded worker traffic against py_engine/web/protocol.py's table (messages page ->
    worker, events worker -> page; the test hook's two against TEST_HOOK); returns {type: count}
    of what was checked, so a test can say what it expected to see."""
    from collections import Counter

    from py_engine.web.protocol import TEST_HOOK, check, check_event, check_message

    seen = Counter()
    for to, data in log:
        kind = data.get("type") if isinstance(data, dict) else None
        if kind in TEST_HOOK:
            check(data, {"type": str, **TEST_HOOK[kind]}, kind)
        elif to == "worker":
            check_message(data)
        else:
            check_event(data)
        seen[kind] += 1
    return dict(seen)
