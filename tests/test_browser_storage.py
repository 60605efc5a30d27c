"""The page's UI for the weight store (downloaded weights kept on the device, so a second load fetches
nothing) in headless Chromium against the fake worker: the Storage panel (stored models, delete, usage,
persist), the picker's "on this device" marks, the narrated load phases (speed and time left, the stall
line) and the quota banner. Server and fixtures: tests/test_browser_page.py."""

import re
import threading
from http.server import ThreadingHTTPServer

import pytest
from browser_harness import check_protocol
from test_browser_page import MODELS, Handler, context, expect, open_page, page, tid, traffic  # noqa: F401 (fixtures)

pytestmark = pytest.mark.browser  # the page tests' Chromium fixtures

EXTRA = [
    {"id": "tiny-stored", "name": "Tiny Stored", "kind": "gguf", "files": {"tiny.gguf": 60_000_000}},
    {"id": "slow-model", "name": "Slow Model", "kind": "gguf", "files": {"slow.gguf": 98_000_000}},
    {"id": "huge-model", "name": "Huge Model", "kind": "gguf", "files": {"huge.gguf": 4_200_000_000}},
]

# Every message the page posts to the worker.
RECORD_SENT = """
    window.__sent = [];
    const post = Worker.prototype.postMessage;
    Worker.prototype.postMessage = function (msg, ...rest) { window.__sent.push(msg); return post.call(this, msg, ...rest); };
"""


class StoreHandler(Handler):
    models = MODELS + EXTRA


@pytest.fixture(scope="module")
def base_url():
    server = ThreadingHTTPServer(("127.0.0.1", 0), StoreHandler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def option(page, model_id):
    return tid(page, "model-select").locator(f"option[value='{model_id}']")


def stored_row(page, model_id):
    return page.locator(f"[data-testid=storage-model][data-model='{model_id}']")


def test_storage_panel_lists_deletes_and_persists(page, base_url):
    page.add_init_script(RECORD_SENT)
    open_page(page, base_url)
    # The picker marks what the store holds (the page asks the worker at start).
    expect(option(page, "tiny-stored")).to_contain_text("Tiny Stored · 60 MB · on this device")
    expect(option(page, "qwen2.5-coder-0.5b-instruct")).to_contain_text("partly on this device")
    expect(option(page, "smollm2-135m-instruct")).not_to_contain_text("on this device")

    panel = tid(page, "storage-panel")
    expect(panel).to_be_hidden()
    tid(page, "storage-button").click()
    expect(panel).to_be_visible()
    expect(tid(page, "storage-model")).to_have_count(2)
    tiny = stored_row(page, "tiny-stored")
    expect(tiny).to_contain_text("Tiny Stored")
    expect(tiny).to_contain_text("complete")
    expect(tiny).to_contain_text("60 MB")
    expect(tiny).to_have_attribute("data-state", "complete")
    qwen = stored_row(page, "qwen2.5-coder-0.5b-instruct")
    expect(qwen).to_have_attribute("data-state", "partial")
    expect(qwen).to_contain_text("partial")
    expect(qwen).to_contain_text("200 MB of 491 MB downloaded")
    # One source (the store's event): the models are part of what is used (the fake's 12 MB app).
    expect(tid(page, "storage-usage")).to_have_text("272 MB of 10.0 GB used · models take 260 MB")
    expect(page.locator("#storage-bar")).to_have_attribute("aria-valuenow", re.compile(r"^\d+$"))
    page.screenshot(path=str(__import__("test_browser_page").ARTIFACTS / "storage-panel.png"))

    # Delete asks first; "Keep" keeps it.
    tiny.get_by_test_id("storage-delete").click()
    expect(tiny).to_contain_text("Delete Tiny Stored (60 MB) from this device?")
    tiny.get_by_role("button", name="Keep").click()
    expect(tid(page, "storage-model")).to_have_count(2)
    tiny.get_by_test_id("storage-delete").click()
    tiny.get_by_test_id("storage-delete-confirm").click()
    expect(tid(page, "storage-model")).to_have_count(1)
    expect(tid(page, "storage-usage")).to_have_text("212 MB of 10.0 GB used · models take 200 MB")
    removes = [m for m in page.evaluate("window.__sent") if m["type"] == "store_remove"]
    assert [m["model"] for m in removes] == ["tiny-stored"] and removes[0]["id"]
    expect(option(page, "tiny-stored")).not_to_contain_text("on this device")

    # persist() is asked from the page; headless Chromium may say no: either answer is shown.
    tid(page, "storage-persist").click()
    expect(tid(page, "storage-persist-result")).to_have_text(
        re.compile(r"^(Storage is persistent|The browser may evict)")
    )
    granted = page.evaluate("navigator.storage.persisted()")
    expect(tid(page, "storage-persist-result")).to_have_attribute("data-persisted", str(granted).lower())

    # Escape closes; a loaded model is stored and marked.
    page.keyboard.press("Escape")
    expect(panel).to_be_hidden()
    tid(page, "load-button").click()
    page.wait_for_selector("body[data-phase=ready]", timeout=10_000)
    expect(option(page, "smollm2-135m-instruct")).to_contain_text("on this device")
    tid(page, "storage-button").click()
    expect(stored_row(page, "smollm2-135m-instruct")).to_have_attribute("data-state", "complete")
    assert page.errors == []


def test_narration_speed_eta_and_stall(page, base_url):
    open_page(page, base_url)
    tid(page, "model-select").select_option("slow-model")
    tid(page, "load-button").click()
    label = page.locator("#progress-label")
    # 4 s without events mid-download: after 3 s the line says what it waits for, with a timer.
    expect(label).to_have_text("Waiting for the server to send more weights… no progress for 3 s", timeout=6_000)
    expect(label).to_have_attribute("data-stalled", "")
    steps = page.locator("#progress-steps li")
    assert steps.evaluate_all("l => l.map(li => li.dataset.phase + ':' + li.className)") == [
        "boot:done",
        "store:done",
        "download:active",
        "verify:",
        "upload:",
        "compile:",
    ]
    page.wait_for_selector("body[data-phase=ready]", timeout=10_000)
    log = page.evaluate("window.__progressLog")
    assert "Checking this device for the model…" in log
    assert "Downloading weights… 49 / 98 MB · 12.3 MB/s · 4 s left" in log
    assert "Downloading weights… 98 / 98 MB · 12.3 MB/s" in log  # done: no time left to show
    assert "Verifying… 50 %" in log
    assert "Uploading to the GPU… 49 / 98 MB" in log
    assert "Compiling kernels… 6 / 12" in log
    # the timer counted on past 3 s (which second it showed last depends on the machine's load)
    stalls = [line for line in log if line.startswith("Waiting for the server to send more weights… no progress for")]
    assert any(not line.endswith(("1 s", "2 s", "3 s")) for line in stalls), stalls

    # A stored model skips download and verify: the stepper shows them skipped.
    tid(page, "model-select").select_option("tiny-stored")
    tid(page, "load-button").click()
    page.wait_for_selector("body[data-phase=ready]", timeout=10_000)
    assert steps.evaluate_all("l => l.map(li => li.className)") == [
        "done",
        "done",
        "skipped",
        "skipped",
        "done",
        "active",
    ]
    assert page.errors == []


def test_narrate_texts(page, base_url):
    open_page(page, base_url)
    texts = page.evaluate("""async () => {
        const { narrate, stallText } = await import("/static/progress.js");
        return [
          narrate({ phase: "boot", done: 1, total: 3 }),
          narrate({ phase: "store" }),
          narrate({ phase: "download", done: 34e6, total: 98e6, bytes_per_s: 12.3e6, eta_s: 5.2 }),
          narrate({ phase: "download", done: 1.2e9, total: 4.2e9, bytes_per_s: 800e3, eta_s: 3750 }),
          narrate({ phase: "download", done: 34e6, total: 98e6 }),  // no speed in the event
          narrate({ phase: "verify", done: 49e6, total: 98e6 }),
          narrate({ phase: "upload", done: 40e6, total: 98e6 }),
          narrate({ phase: "compile" }),
          stallText("upload", 7),
          stallText("compile", 12),
          narrate({ phase: "download", done: 34e6, total: 98e6, bytes_per_s: 12.3e6, eta_s: 5.2 }, true),
          stallText("download", 5, true),  // the user's own files: read from the disk
        ];
    }""")
    assert texts == [
        "Starting Python…",
        "Checking this device for the model…",
        "Downloading weights… 34 / 98 MB · 12.3 MB/s · 6 s left",
        "Downloading weights… 1.20 / 4.20 GB · 800 KB/s · 1 h 2 min left",
        "Downloading weights… 34 / 98 MB",
        "Verifying… 50 %",
        "Uploading to the GPU… 40 / 98 MB",
        "Compiling kernels…",
        "Waiting for the GPU to take the weights… no progress for 7 s",
        "Waiting for the GPU driver to compile the kernels… no progress for 12 s",
        "Reading weights from your disk… 34 / 98 MB · 12.3 MB/s · 6 s left",
        "Waiting for your disk to give more weights… no progress for 5 s",
    ]


def test_quota_banner(page, base_url):
    open_page(page, base_url)
    tid(page, "model-select").select_option("huge-model")
    tid(page, "load-button").click()
    banner = tid(page, "error-banner")
    expect(banner).to_be_visible()
    expect(banner).to_contain_text("Not enough storage on this device")
    expect(banner).to_contain_text("The model needs 4.2 GB of storage, but only 812 MB is available.")
    expect(banner).to_contain_text("Delete a stored model in the Storage panel")
    expect(tid(page, "progress")).to_be_hidden()
    expect(tid(page, "load-button")).to_be_enabled()
    tid(page, "error-action").click()
    expect(tid(page, "storage-panel")).to_be_visible()
    expect(tid(page, "storage-model")).to_have_count(2)
    assert page.errors == []


def test_traffic_fits_the_protocol_table(traffic):
    """The storage manager's messages and the fake worker's answers fit py_engine/web/protocol.py."""
    seen = check_protocol(traffic[0])
    assert {"store_list", "store_remove", "store", "error"} <= set(seen), seen
