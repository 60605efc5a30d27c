"""One engine for every tab (static/engine_link.js, worker/hub.js) in headless Chromium, one
persistent context (one origin, one weight store) for the module.

Shared: tab 1 loads the tiny Llama fixture and answers its reference tokens; tab 2 loads the same
model and answers the same WITHOUT a second load reaching any engine (its `loaded` is tab 1's, and
no request for the model's files); two requests at once from both tabs are both answered, in order;
closing tab 1 (which ran the engine) leaves tab 2 working. Fallback (SharedWorker deleted before
any page script): the second tab shows "Wisp is running in another tab", not a second load; its
"take over" button moves the engine to it (not to a third tab that waited longer); closing the
owner hands it back to the tab that waits."""

import json

import pytest
from browser_harness import ROOT, app_server, check_protocol, launch, record_protocol
from test_openai_server import tiny_tool_model

playwright_api = pytest.importorskip("playwright.sync_api")
pytestmark = [pytest.mark.browser, pytest.mark.slow]

LLAMA = ROOT / "tests" / "fixtures" / "llama-f32"
REF = json.loads((LLAMA / "reference.json").read_text())
NO_SHARED_WORKER = "delete globalThis.SharedWorker;"
EXACT = "/?precision=exact"  # the chat's loads in f32 arithmetic: SwiftShader compiles the int8 kernels slowly
ARTIFACTS = ROOT / "tests" / "artifacts"  # gitignored
HANG = 180_000  # ms: a guard against a hang, not a measure of speed

# The page's own engine (client.js sharedClient(), as the chat and static/openai.js use it): load
# the fixture (unless `load` is false; loaded already: answered at once), then its reference prompt, greedy. Times are
# performance.timeOrigin + now(): one clock for every tab of the browser.
RUN = """async ({ids, n, load = true}) => {
  const {sharedClient, fetchModels} = await import("/static/client.js");
  const clock = () => performance.timeOrigin + performance.now();
  const client = sharedClient();
  const model = (await fetchModels()).find((m) => m.id === "llama-f32");
  const loaded = load ? await client.load(model, {context: 128, precision: "exact"}) : client.loaded;
  const sent = clock();
  const generation = client.generate({ids, sampling: {temperature: 0, max_new_tokens: n}, ignoreEos: true});
  let first = null;  // its first chunk (token ids without a tokenizer: no text pieces)
  const chunk = (ev) => { if (ev.detail.id === generation.id) first ??= clock(); };
  client.addEventListener("chunk", chunk);
  const done = await generation.done;
  client.removeEventListener("chunk", chunk);
  return {loaded, tokens: done.tokens, sent, first, done: clock()};
}"""
START = f"(args) => {{ window.__run = ({RUN})(args); return true; }}"
RESULT = "() => window.__run"


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    chat = tiny_tool_model(tmp_path_factory.mktemp("chat"))  # the chat's picker: a model with a tokenizer
    with app_server("--no-default", "--model", str(chat), str(LLAMA)) as (url, _):
        yield url


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    """(context, traffic, model file requests): one persistent context for the module."""
    with playwright_api.sync_playwright() as p:
        context = launch(p, tmp_path_factory.mktemp("profile"))
        traffic = record_protocol(context)
        files = []
        context.on("request", lambda r: files.append(r.url) if "/models/" in r.url else None)
        yield context, traffic, files
        context.close()


def engine_loads(traffic):
    return [data for to, data in traffic if to == "worker" and data.get("type") == "load"]


def test_two_tabs_share_one_engine(server, browser):
    context, traffic, files = browser
    args = {"ids": REF["prompt_ids"], "n": len(REF["greedy"])}
    tab1 = context.new_page()
    tab1.goto(server + "/")
    one = tab1.evaluate(RUN, args)
    assert one["tokens"] == REF["greedy"]
    assert files, "tab 1 fetched the model's files (the recorder sees them)"
    fetched, loads = len(files), len(engine_loads(traffic))
    assert loads == 1

    tab2 = context.new_page()
    tab2.goto(server + "/")
    two = tab2.evaluate(RUN, args)
    assert two["tokens"] == REF["greedy"]
    assert two["loaded"] == {**one["loaded"], "id": two["loaded"]["id"]}  # the same load: its clocks, its report
    assert len(files) == fetched and len(engine_loads(traffic)) == 1  # no fetch, no second load or upload

    # Both tabs at once (32 tokens each, eos ignored): served one after the other, in order.
    both = {"ids": REF["prompt_ids"], "n": 32, "load": False}
    tab1.evaluate(START, both)
    tab2.evaluate(START, both)
    first, second = tab1.evaluate(RESULT), tab2.evaluate(RESULT)
    assert second["sent"] < first["done"], "tab 2 asked while tab 1's answer ran"
    # As the engine saw them (the host tab's worker traffic, in order): one tab's request, its
    # response, and only then the other tab's request (ids "<tab>:<the tab's own id>").
    at = {id(data): i for i, (_, data) in enumerate(traffic)}
    a, b = [data for to, data in traffic if to == "worker" and data.get("type") == "openai"][-2:]
    answered = next(
        at[id(d)] for to, d in traffic if to == "page" and d.get("type") == "response" and d["id"] == a["id"]
    )
    assert a["id"].split(":")[0] != b["id"].split(":")[0] and answered < at[id(b)], (a["id"], b["id"])
    assert first["tokens"] == second["tokens"] and first["tokens"][:16] == REF["greedy"]

    # Tab 1 ran the engine: closing it hands the engine to tab 2, which loads the model again from
    # the weight store (no download) and answers.
    tab1.close()
    three = tab2.evaluate(RUN, args)
    assert three["tokens"] == REF["greedy"]
    assert len(files) == fetched and len(engine_loads(traffic)) == 2
    tab2.close()
    seen = check_protocol(traffic)
    assert {"load", "openai", "booted", "loaded", "chunk", "response"} <= set(seen), seen


def test_without_shared_worker_one_tab_owns_the_engine(server, browser):
    context, traffic, files = browser
    args = {"ids": REF["prompt_ids"], "n": len(REF["greedy"])}
    owner = context.new_page()
    owner.add_init_script(NO_SHARED_WORKER)
    owner.goto(server + EXACT)
    assert owner.evaluate(RUN, args)["tokens"] == REF["greedy"]
    playwright_api.expect(owner.locator("body")).to_have_attribute("data-engine", "owner")
    loads = len(engine_loads(traffic))

    other = context.new_page()
    other.add_init_script(NO_SHARED_WORKER)
    other.goto(server + EXACT)
    notice = other.get_by_test_id("tab-notice")
    playwright_api.expect(notice).to_be_visible(timeout=HANG)  # the page's store list waits for the engine
    assert "running in another tab" in notice.inner_text()
    ARTIFACTS.mkdir(exist_ok=True)
    other.screenshot(path=str(ARTIFACTS / "tabs_notice.png"))
    assert len(engine_loads(traffic)) == loads and owner.get_by_test_id("tab-notice").is_hidden()

    third = context.new_page()  # a tab that waited longer than `other`: the button's tab still wins
    third.add_init_script(NO_SHARED_WORKER)
    third.goto(server + EXACT)
    playwright_api.expect(third.get_by_test_id("tab-notice")).to_be_visible(timeout=HANG)

    # Take over: the owner ends its engine and waits; this tab loads the chat's model (from the store).
    other.get_by_test_id("tab-take-over").click()
    label = other.get_by_test_id("load-button").locator(".btn-label")
    playwright_api.expect(label).to_have_text("Loaded", timeout=HANG)
    playwright_api.expect(owner.locator("body")).to_have_attribute("data-engine", "elsewhere")
    playwright_api.expect(owner.get_by_test_id("tab-notice")).to_be_visible()
    assert notice.is_hidden() and third.get_by_test_id("tab-notice").is_visible()
    third.close()

    # Closing the owner hands over: the waiting tab gets the engine, which answers what it held.
    other.close()
    playwright_api.expect(owner.locator("body")).to_have_attribute("data-engine", "owner", timeout=HANG)
    playwright_api.expect(owner.get_by_test_id("tab-notice")).to_be_hidden()
    stored = owner.evaluate("async () => (await (await import('/static/client.js')).sharedClient().storeList()).models")
    assert {"llama-f32"} <= {m["model"]["id"] for m in stored}, stored
    owner.close()
    assert len(engine_loads(traffic)) == loads + 1  # the chat's load after taking over; no other
