"""Submit strategies chosen at start-up, end to end in headless Chromium on SwiftShader: batched
submits have hard-crashed WebKit's GPU process on some iPhones, so WebKit submits in groups, and no
other engine may pay for that. The rules alone, with no browser: tests/test_submit_strategy.py.

The page's detectPlatform() (static/platform.js) and its ?group= parameter travel with every load
(static/client.js's pageLoadOptions); the engine picks the strategy (py_engine/gpu/submit_strategy.py's
submit_strategy) and reports it in the `loaded` event. A desktop Chrome UA must get the single pass
and no WebKit workaround; the iPad descriptor must get WebKit and grouped submits; ?group=1,
?group=8 and the full batch must give the tiny fixture's reference greedy tokens."""

import json

import pytest
from browser_harness import app_server, browser  # noqa: F401  (its fixture)
from test_browser_engine import FIXTURES

playwright_api = pytest.importorskip("playwright.sync_api")
pytestmark = pytest.mark.browser

CHROME_LINUX = "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/140.0.0.0 Safari/537.36"
REF = json.loads((FIXTURES / "llama-f32" / "reference.json").read_text())

# Load the tiny fixture through the page's client and generate its reference prompt by ids,
# greedily. loads: one options object per load, in one worker (Pyodide boots once); the first {}
# takes platform and group from the page (its user agent and URL), later ones may override group.
RUN = """async ({prompt, count, loads}) => {
  const {WispClient, fetchModels, modelRef} = await import("/static/client.js");
  const model = (await fetchModels()).find((m) => m.id === "llama-f32");
  const client = new WispClient();
  const results = [];
  try {
    for (const options of loads) {
      const loaded = await client.load(modelRef(model), {context: 64, ...options});
      const generation = client.generate({ids: prompt, sampling: {temperature: 0, max_new_tokens: count}});
      for await (const _ of generation) { /* text pieces */ }
      const done = await generation.done;
      const tokens = done.stop === "eos" ? done.tokens.slice(0, -1) : done.tokens;  // a final stop id is no answer token
      results.push({loaded, tokens, done});
    }
    return results;
  } finally {
    client.terminate();
  }
}"""


@pytest.fixture(scope="module")
def server():
    with app_server("--model", str(FIXTURES / "llama-f32")) as (url, _):
        yield url


def run(browser, url, loads=({},), init_script=None, **context_options):
    _, chromium = browser
    context = chromium.new_context(**context_options)
    try:
        page = context.new_page()
        if init_script:
            page.add_init_script(init_script)
        page.goto(url)
        results = page.evaluate(RUN, {"prompt": REF["prompt_ids"], "count": len(REF["greedy"]), "loads": list(loads)})
        return results if len(loads) > 1 else results[0]
    finally:
        context.close()


def test_desktop_chrome_is_single_pass_without_webkit_workarounds(browser, server):
    result = run(browser, server + "/", user_agent=CHROME_LINUX)
    adapter = result["loaded"]["adapter"]
    assert adapter["webkit"] is False, adapter
    assert adapter["submit"]["strategy"] == "single-pass" and adapter["submit"]["group"] is None, adapter["submit"]
    assert adapter["workarounds"] == [], f"WebKit workarounds active on desktop Chrome: {adapter['workarounds']}"
    assert result["tokens"] == REF["greedy"]
    # one command buffer per forward: one per token (the sampler rides in the forward's submit),
    # plus at most a few for prefill chunks
    assert result["done"]["command_buffers"] <= len(REF["greedy"]) + 2, result["done"]


# A page without localStorage (private modes, sandboxed frames) cannot remember a crash, so it
# does not run the submit probe (tests/test_browser_submit_probe.py): WebKit's default group applies.
NO_LOCAL_STORAGE = """Object.defineProperty(window, "localStorage", {
  get() { throw new DOMException("The operation is insecure.", "SecurityError"); } });"""


def test_ipad_is_webkit_with_grouped_submits(browser, server):
    p, _ = browser
    result = run(browser, server + "/", init_script=NO_LOCAL_STORAGE, **p.devices["iPad (gen 7)"])
    adapter = result["loaded"]["adapter"]
    assert adapter["webkit"] is True and "iPad" in adapter["platform_reason"], adapter
    assert adapter["submit"]["strategy"] == "grouped" and adapter["submit"]["group"] == 64, adapter["submit"]
    assert "probed" not in adapter["submit"], adapter["submit"]
    # WebKit's memory measures (py_engine/web/webkit.py) follow it in the list
    assert adapter["workarounds"][0] == "grouped-submits" and "submit-probe" not in adapter["workarounds"]
    assert result["tokens"] == REF["greedy"]


def test_group_override_gives_identical_tokens(browser, server):
    # ?group=1 from the URL; then the same worker reopens its device for group=8 and the full batch
    groups = ("1", "8", "all")
    runs = run(browser, f"{server}/?group=1", loads=({}, {"group": "8"}, {"group": "all"}), user_agent=CHROME_LINUX)
    results = dict(zip(groups, runs))
    assert [r["loaded"]["adapter"]["submit"]["group"] for r in runs] == [1, 8, None]
    for g, result in results.items():
        assert result["tokens"] == REF["greedy"], (g, result["tokens"])
    assert results["1"]["loaded"]["adapter"]["submit"]["group"] == 1
    assert results["all"]["loaded"]["adapter"]["submit"]["strategy"] == "single-pass"
    counts = {g: r["done"]["command_buffers"] for g, r in results.items()}
    # group=1 is one command buffer per dispatch: more than group=8's, which is more than one per forward
    assert counts["1"] > counts["8"] > counts["all"], counts
