"""WebKit's memory discipline in headless Chromium, the page posing as an iPad: WebKit kills the
web-content process without a warning above about 1.5-2 GB and Metal has miscompiled native f16
(py_engine/web/webkit.py), so a load there must stay small and f16-free.

As Playwright's iPad and as a desktop-mode iPad (a Mac UA with touch points, through CDP), the
engine must report WebKit, grouped submits, no native f16 and a packed-f16 KV cache, and give
the desktop engine's greedy tokens — for the tiny fixture and for SmolLM2 at WebKit's default
context (512). A model over the GPU budget is refused before loading, with a message, and the
stored weights and the worker survive the refusal. A desktop Chrome UA gets none of it."""

import json

import pytest
from browser_harness import launch
from test_browser_engine import DESKTOP_PARIS, FIXTURES, server  # noqa: F401  (its server fixture)
from test_browser_platform import SAFARI_MAC
from test_browser_submit_strategy import CHROME_LINUX

playwright_api = pytest.importorskip("playwright.sync_api")
pytestmark = pytest.mark.browser

REF = json.loads((FIXTURES / "llama-f32" / "reference.json").read_text())
WEBKIT_WORKAROUNDS = {"grouped-submits", "no-native-f16", "packed-f16-kv", "gpu-budget"}

# Each step loads a model with its options and, unless it is refused, generates `request`.
# A refused load is recorded as {error: {kind, message}}; the same worker goes on to the next step.
STEPS = """async (steps) => {
  const {WispClient, fetchModels, modelRef} = await import("/static/client.js");
  const models = await fetchModels();
  const client = new WispClient();
  const results = [];
  try {
    for (const {modelId, options, request} of steps) {
      const model = models.find((m) => m.id === modelId);
      let loaded;
      try {
        loaded = await client.load(modelRef(model), options);
      } catch (e) {
        results.push({error: {kind: e.kind, message: e.message}, stored: (await client.storeList()).models});
        continue;
      }
      const generation = client.generate(request);
      let text = "";
      for await (const t of generation) text += t.text;
      results.push({loaded, text, done: await generation.done});
    }
    return results;
  } finally {
    client.terminate();
  }
}"""


def greedy_ids(count):
    return {"ids": REF["prompt_ids"], "sampling": {"temperature": 0, "max_new_tokens": count}}


@pytest.fixture(scope="module")
def playwright():
    with playwright_api.sync_playwright() as p:
        yield p


def run(playwright, url, steps, tmp_path, desktop_mode_ipad=False, **context_options):
    """desktop_mode_ipad: iPadOS posing as a Mac (a Macintosh Safari UA, platform MacIntel, five
    touch points), set through CDP before the page loads."""
    context_options.pop("default_browser_type", None)  # a device descriptor's; not a context option
    context = launch(playwright, tmp_path, **context_options)  # a persistent profile: the weight store
    try:
        page = context.new_page()
        if desktop_mode_ipad:
            cdp = context.new_cdp_session(page)
            cdp.send("Emulation.setUserAgentOverride", {"userAgent": SAFARI_MAC, "platform": "MacIntel"})
            cdp.send("Emulation.setTouchEmulationEnabled", {"enabled": True, "maxTouchPoints": 5})
        page.goto(url + "/")
        return page.evaluate(STEPS, steps)
    finally:
        context.close()


def test_ipad_runs_the_webkit_path_and_refuses_what_does_not_fit(playwright, server, tmp_path):
    tiny = {"modelId": "llama-f32", "request": greedy_ids(len(REF["greedy"]))}
    first, refused, again = run(
        playwright,
        server,
        [
            {**tiny, "options": {}},
            {"modelId": "smollm2-135m-instruct", "options": {"gpu_budget_mb": 50}, "request": None},
            {**tiny, "options": {"context": 64}},
        ],
        tmp_path,
        **playwright.devices["iPad (gen 7)"],
    )

    adapter = first["loaded"]["adapter"]
    assert adapter["webkit"] is True and adapter["submit"]["strategy"] == "grouped", adapter
    assert WEBKIT_WORKAROUNDS <= set(adapter["workarounds"]), adapter["workarounds"]
    assert "shader-f16" not in adapter["features"]
    assert first["loaded"]["kv_cache"] == "f16_packed/f16_packed"
    assert first["loaded"]["context"] == 256  # WebKit's 512, within the fixture's 256 positions
    assert first["done"]["tokens"] == REF["greedy"]

    assert refused["error"]["kind"] == "load", refused
    message = refused["error"]["message"]
    assert "needs" in message and "budget of 50 MB" in message and "KV cache" in message, message
    assert "a context of at most" not in message  # the weights alone (~100 MB) are over: no context fits
    stored = {m["model"]["id"]: m for m in refused["stored"]}
    assert all(f["complete"] for f in stored["llama-f32"]["files"]), "the refusal lost stored weights"

    assert again["loaded"]["context"] == 64 and again["done"]["tokens"] == REF["greedy"]


def test_desktop_mode_ipad_is_webkit_too(playwright, server, tmp_path):
    (result,) = run(
        playwright,
        server,
        [{"modelId": "llama-f32", "options": {"context": 64}, "request": greedy_ids(len(REF["greedy"]))}],
        tmp_path,
        desktop_mode_ipad=True,
        has_touch=True,
    )
    loaded = result["loaded"]
    assert loaded["adapter"]["webkit"] is True and "Mac" in loaded["adapter"]["platform_reason"], loaded["adapter"]
    assert loaded["adapter"]["submit"]["strategy"] == "grouped" and loaded["kv_cache"] == "f16_packed/f16_packed"
    assert WEBKIT_WORKAROUNDS <= set(loaded["adapter"]["workarounds"])
    assert result["done"]["tokens"] == REF["greedy"]


def test_desktop_chrome_keeps_f32_kv_and_no_workarounds(playwright, server, tmp_path):
    (result,) = run(
        playwright,
        server,
        [{"modelId": "llama-f32", "options": {}, "request": greedy_ids(4)}],
        tmp_path,
        user_agent=CHROME_LINUX,
    )
    loaded = result["loaded"]
    assert loaded["adapter"]["workarounds"] == [], loaded["adapter"]
    assert loaded["kv_cache"] == "f32/f32"  # SwiftShader has no shader-f16: the f32 path
    assert loaded["context"] == 256  # the desktop's 2048, within the fixture's 256 positions
    assert result["done"]["tokens"] == REF["greedy"][:4]


def test_ipad_smollm2_matches_the_desktop(playwright, server, tmp_path):
    """The default model as an iPad runs it (WebKit's default context 512, packed-f16 KV, grouped
    submits): the desktop engine's greedy answer."""
    (result,) = run(
        playwright,
        server,
        [
            {
                "modelId": "smollm2-135m-instruct",
                "options": {"precision": "exact"},  # DESKTOP_PARIS: test_real_models' exact tokens
                "request": {
                    "messages": [{"role": "user", "content": "What is the capital of France?"}],
                    "sampling": {"temperature": 0, "max_new_tokens": 8},
                },
            }
        ],
        tmp_path,
        **playwright.devices["iPad (gen 7)"],
    )
    loaded = result["loaded"]
    assert loaded["context"] == 512 and loaded["kv_cache"] == "f16_packed/f16_packed", loaded
    assert WEBKIT_WORKAROUNDS | {"context-512"} <= set(loaded["adapter"]["workarounds"])
    assert sum(loaded["gpu_bytes"].values()) < 400 << 20, loaded["gpu_bytes"]
    assert result["done"]["tokens"] == DESKTOP_PARIS and "Paris" in result["text"]
