"""Attaching pictures on the chat page, against the fake worker (tests/web/fake_worker.js), whose
models read no pictures (its `loaded` event has no `vision`): every way in — the composer's button,
a paste into the message box, a drop on the page — is refused with one sentence saying why (no
model yet, or one that reads text only), nothing reaches the tray, and a dropped picture does not
start a model load (byo.js leaves pictures to attachments.js). The ways in for a model that reads
pictures, with the real worker: tests/test_browser_pictures.py. Server and fixtures:
tests/test_browser_page.py."""

import base64
from pathlib import Path

import pytest
from test_browser_page import base_url, context, expect, load_model, open_page, page, tid, traffic  # noqa: F401 (fixtures)

pytestmark = pytest.mark.browser  # the page tests' Chromium fixtures

PICTURE = Path(__file__).parent / "fixtures" / "smolvlm-f32" / "images" / "rgb_45x71.png"

# Files given to the page as a user gives them: `kind` "paste" (a ClipboardEvent on `target`) or
# "drop" (the drag's events on `target`, in order); each file {name, type, b64}.
GIVE_FILES = """async ({target, kind, events, files}) => {
  const dt = new DataTransfer();
  for (const f of files) {
    const bytes = Uint8Array.from(atob(f.b64), (c) => c.charCodeAt(0));
    dt.items.add(new File([bytes], f.name, {type: f.type}));
  }
  const node = document.querySelector(target);
  if (kind === "paste") {
    node.dispatchEvent(new ClipboardEvent("paste", {clipboardData: dt, bubbles: true, cancelable: true}));
    return;
  }
  for (const type of events) node.dispatchEvent(new DragEvent(type, {dataTransfer: dt, bubbles: true, cancelable: true}));
}"""


def file_arg(path: Path, kind: str = "image/png", name: str | None = None) -> dict:
    return {"name": name or path.name, "type": kind, "b64": base64.b64encode(path.read_bytes()).decode()}


def paste(page, *files):
    page.evaluate(GIVE_FILES, {"target": "#prompt", "kind": "paste", "events": [], "files": list(files)})


def drop(page, *files, events=("dragenter", "dragover", "drop")):
    page.evaluate(GIVE_FILES, {"target": "#composer", "kind": "drop", "events": list(events), "files": list(files)})


def test_a_text_only_model_refuses_pictures(page, base_url):
    chooser = []
    page.on("filechooser", lambda chosen: chooser.append(chosen))
    open_page(page, base_url)
    banner, tray, dismiss = tid(page, "error-banner"), tid(page, "attachments"), page.locator("#error-dismiss")

    tid(page, "attach-button").click()  # no model yet
    expect(banner).to_contain_text("Couldn’t attach the picture")
    expect(banner).to_contain_text("Load a model that reads pictures first")

    load_model(page)  # the banner goes with the load
    expect(banner).to_be_hidden()
    tid(page, "attach-button").click()
    expect(banner).to_contain_text("SmolLM2 135M Instruct reads text only")
    assert chooser == []  # refused before the file dialog

    dismiss.click()
    paste(page, file_arg(PICTURE))
    expect(banner).to_contain_text("reads text only")

    dismiss.click()
    drop(page, file_arg(PICTURE), events=["dragenter"])
    expect(tid(page, "drop-overlay")).to_have_text("Drop the picture to attach it to your message")
    drop(page, file_arg(PICTURE), events=["dragover", "drop"])
    expect(banner).to_contain_text("reads text only")
    expect(tid(page, "drop-overlay")).to_be_hidden()
    assert page.evaluate("document.body.dataset.phase") == "ready"  # no model load began
    expect(tray).to_be_hidden()
    assert tid(page, "attachment").count() == 0
    expect(tid(page, "send-button")).to_be_disabled()  # nothing to send
    assert not page.errors, page.errors
