"""WebKit's crash-surviving submit probe, in headless Chromium on SwiftShader. With no browser:
the worker's half on a fake device (tests/test_submit_probe.py) and the strategy a probe's answer
gives (tests/test_submit_strategy.py).

The page (static/submit_probe.js) keeps a localStorage record per device (user agent + adapter
info); the worker (py_engine/web/submit_probe.py) runs the dependent chain batched and one by one.
An iPad user agent makes the page WebKit. A "crash" is the page closed while a size's breadcrumb is
set: the test hook holds the probe there. Pages of one browser context share localStorage, as a
reload after a real crash would. A desktop Chrome UA must never probe."""

import json

import pytest
from browser_harness import browser, check_protocol, record_protocol  # noqa: F401  (browser: its fixture)
from test_browser_engine import FIXTURES
from test_browser_submit_strategy import CHROME_LINUX, server  # noqa: F401  (its fixture)

playwright_api = pytest.importorskip("playwright.sync_api")
pytestmark = pytest.mark.browser

REF = json.loads((FIXTURES / "llama-f32" / "reference.json").read_text())
IPAD = "iPad (gen 7)"

# One load of the tiny fixture through the page's client, a few greedy tokens, and what the page
# sent the worker (probe:N, N = 0 for all), the probe answers and the probe records it stored.
RUN = """async ({prompt, count}) => {
  const {WispClient, fetchModels, modelRef} = await import("/static/client.js");
  const model = (await fetchModels()).find((m) => m.id === "llama-f32");
  const sent = [], probes = [];
  const client = new WispClient({createWorker: (url) => {
    const worker = new Worker(url, {type: "module"});
    const post = worker.postMessage.bind(worker);
    worker.postMessage = (msg) => { sent.push(msg.type === "probe" ? `probe:${msg.group}` : msg.type); post(msg); };
    return worker;
  }});
  client.addEventListener("probe", (ev) => probes.push(ev.detail));
  try {
    const loaded = await client.load(modelRef(model), {context: 64});
    const generation = client.generate({ids: prompt, sampling: {temperature: 0, max_new_tokens: count}});
    // read in the same task as generate(): no token can have arrived yet
    const duringFirst = Object.keys(localStorage).filter((k) => k.startsWith("wisp.submit-probe."))
      .map((k) => JSON.parse(localStorage.getItem(k)).breadcrumb);
    for await (const _ of generation) { /* text pieces */ }
    const done = await generation.done;
    const tokens = done.stop === "eos" ? done.tokens.slice(0, -1) : done.tokens;  // a final stop id is no answer token
    const records = Object.keys(localStorage).filter((k) => k.startsWith("wisp.submit-probe."))
      .map((k) => JSON.parse(localStorage.getItem(k)));
    return {loaded, tokens, sent, probes, records, duringFirst};
  } finally {
    client.terminate();
  }
}"""
ARGS = {"prompt": REF["prompt_ids"], "count": len(REF["greedy"])}
# Hold the probe of "all" after its breadcrumb is written: the test then closes the page.
HOLD_AT_ALL = """globalThis.__wispProbeHook = (size) =>
  size === "all" ? new Promise(() => { globalThis.__wispHeldAt = size; }) : undefined;"""


def load_in_new_page(context, url, init_script=None):
    page = context.new_page()
    if init_script:
        page.add_init_script(init_script)
    page.goto(url)
    try:
        return page.evaluate(RUN, ARGS)
    finally:
        page.close()


def probes_sent(result):
    return [s for s in result["sent"] if s.startswith("probe:")]


def test_ipad_probes_then_crash_steps_down_then_reuses(browser, server):
    p, chromium = browser
    context = chromium.new_context(**p.devices[IPAD])
    traffic = record_protocol(context)
    try:
        # (a) first load: the floor (1), then "all", which SwiftShader takes: promoted
        first = load_in_new_page(context, server + "/")
        assert probes_sent(first) == ["probe:1", "probe:0"], first["sent"]
        assert first["sent"].index("probe:0") < first["sent"].index("load"), "the load waits for the probe"
        assert all(pr["ok"] for pr in first["probes"]), first["probes"]
        assert [pr["command_buffers"] for pr in first["probes"]] == [64, 1]  # the floor's 64 steps; all in one
        (record,) = first["records"]
        assert record["good"] == "all" and record["ceiling"] == "all" and record["breadcrumb"] is None, record
        assert record["device"]["adapter"] == first["probes"][0]["adapter"] and "iPad" in record["device"]["userAgent"]
        submit = first["loaded"]["adapter"]["submit"]
        # WebKit's "all": a whole forward per command buffer, but still grouped (one in flight)
        assert submit["probed"] is True and submit["strategy"] == "grouped" and submit["group"] == "all", submit
        assert "probed on this device" in submit["reason"], submit
        workarounds = first["loaded"]["adapter"]["workarounds"]  # with WebKit's memory measures (webkit.py)
        assert {"submit-probe", "grouped-submits"} <= set(workarounds), workarounds
        assert first["tokens"] == REF["greedy"]
        # the first generation ran its first forward under a breadcrumb, cleared at its first token
        assert first["duringFirst"] == ["all"] and first["records"][0]["breadcrumb"] is None, first["duringFirst"]

        # (b) the crash path: forget the known-good size, hold the probe of "all" after its
        # breadcrumb is written, close the page (what a GPU-process crash does to it)
        page = context.new_page()
        page.add_init_script(HOLD_AT_ALL)
        page.goto(server + "/")
        page.evaluate("""() => { for (const k of Object.keys(localStorage))
                                   if (k.startsWith("wisp.submit-probe.")) localStorage.removeItem(k); }""")
        page.evaluate(f"() => {{ globalThis.__run = ({RUN})({json.dumps(ARGS)}); }}")
        page.wait_for_function("globalThis.__wispHeldAt === 'all'", timeout=120_000)
        held = page.evaluate("""() => Object.keys(localStorage).filter((k) => k.startsWith("wisp.submit-probe."))
                                  .map((k) => JSON.parse(localStorage.getItem(k)))""")
        assert [r["breadcrumb"] for r in held] == ["all"] and held[0]["good"] is None, held
        page.close()

        after = load_in_new_page(context, server + "/")
        assert probes_sent(after) == ["probe:1", "probe:64"], after["sent"]  # "all" is never tried again
        assert after["probes"][1]["ok"] and after["probes"][1]["command_buffers"] == 4, after["probes"]
        (record,) = after["records"]
        assert record["ceiling"] == 64 and record["good"] == 64 and record["breadcrumb"] is None, record
        assert [c["size"] for c in record["crashes"]] == ["all"], record
        assert record["lowered"]["cause"] == "crash" and record["lowered"]["size"] == "all", record
        submit = after["loaded"]["adapter"]["submit"]
        assert submit["strategy"] == "grouped" and submit["group"] == 64 and submit["ceiling"] == 64, submit
        assert "ceiling 64 after a crash at all" in submit["reason"], submit
        assert after["loaded"]["adapter"]["workarounds"][:2] == ["submit-probe", "grouped-submits"]
        assert after["tokens"] == REF["greedy"]

        # (c) a later reload reuses the known-good size: only the floor probe (the key) runs
        later = load_in_new_page(context, server + "/")
        assert probes_sent(later) == ["probe:1"], later["sent"]
        assert later["loaded"]["adapter"]["submit"]["group"] == 64
        assert "earlier" in later["loaded"]["adapter"]["submit"]["reason"]
        assert later["records"] == after["records"]
        # the probes, the WebKit loads and every event of the real worker fit protocol.py's table
        assert {"probe", "load", "loaded", "openai", "response"} <= set(check_protocol(traffic))
    finally:
        context.close()


def test_desktop_chrome_never_probes(browser, server):
    # (d) no probe message, no record, the single pass, no WebKit workaround
    _, chromium = browser
    context = chromium.new_context(user_agent=CHROME_LINUX)
    try:
        result = load_in_new_page(context, server + "/")
    finally:
        context.close()
    assert probes_sent(result) == [] and result["probes"] == [], result["sent"]
    assert result["records"] == []
    adapter = result["loaded"]["adapter"]
    assert adapter["submit"] == {
        "strategy": "single-pass",
        "group": None,
        "reason": "Dawn / wgpu-native: one submit per forward",
    }, adapter["submit"]
    assert adapter["workarounds"] == []
    assert result["tokens"] == REF["greedy"]


# (e) the ladder on a fake probe and an in-memory storage, in the page
LADDER = """async () => {
  const P = await import("/static/submit_probe.js");
  const memory = () => { const m = new Map(); return {getItem: (k) => m.get(k) ?? null,
                                                      setItem: (k, v) => m.set(k, String(v)), m}; };
  const adapter = {name: "gpu", vendor: "v", architecture: "a", description: ""};
  const fake = (bad, tried) => async (size) => { tried.push(size);
    return {ok: !bad.includes(size), detail: bad.includes(size) ? "word 0" : "", adapter}; };
  const calibrate = async (storage, bad, ua = "UA") => {
    const tried = [];
    const r = await P.calibrateSubmit({probe: fake(bad, tried), storage, userAgent: ua, hook: null, now: () => "t"});
    return {group: r.group, reason: r.reason, tried, record: r.record, key: r.key};
  };
  const out = {};
  const s = memory();
  out.mismatch = await calibrate(s, ["all", 64]);
  out.reuse = await calibrate(s, []);                   // known good 8, within the ceiling
  const rec = JSON.parse(s.getItem(out.mismatch.key));
  rec.breadcrumb = 8; s.setItem(out.mismatch.key, JSON.stringify(rec));
  out.crashAt8 = await calibrate(s, []);                // 8 crashed: the floor remains
  out.floorBad = await calibrate(memory(), [1]);
  const corrupt = memory(); corrupt.setItem(P.deviceKey("UA", adapter), "{not json");
  out.corrupt = await calibrate(corrupt, []);
  out.otherDevice = P.deviceKey("UA", {...adapter, name: "other"}) !== P.deviceKey("UA", adapter);
  // the worker dies at "all" (kind crash): the breadcrumb stays for the next start; the page
  // terminating the worker (kind terminated) taught nothing: cleared
  const dying = (kind) => async (size) => {
    if (size === "all") throw Object.assign(new Error(kind), {kind});
    return {ok: true, detail: "", adapter};
  };
  const w = memory();
  for (const kind of ["terminated", "crash"]) {
    await P.calibrateSubmit({probe: dying(kind), storage: w, userAgent: "UA", hook: null}).catch(() => {});
    out[kind] = JSON.parse(w.getItem(P.deviceKey("UA", adapter))).breadcrumb;
  }
  out.afterWorkerCrash = await calibrate(w, []);
  // the first real forward under a promoted size: released, nothing changes; a page that died
  // while it held the breadcrumb steps down on the next start, as in a probe
  const g = memory();
  const good = await calibrate(g, []);
  P.guardFirstForward(g, good.key, good.group, good.record.device)();
  out.released = await calibrate(g, []);
  P.guardFirstForward(g, good.key, good.group, good.record.device);
  out.diedInFirstForward = await calibrate(g, []);
  out.noStorage = P.probeStorage({get localStorage() { throw new DOMException("denied", "SecurityError"); }});
  return out;
}"""


def test_ladder_logic_with_a_fake_probe(browser, server):
    _, chromium = browser
    page = chromium.new_page()
    try:
        page.goto(server + "/")
        out = page.evaluate(LADDER)
    finally:
        page.close()
    m = out["mismatch"]
    assert m["group"] == 8 and m["tried"] == [1, "all", 64, 8], m
    assert m["record"]["ceiling"] == 8 and [x["size"] for x in m["record"]["mismatches"]] == ["all", 64]
    assert "ceiling 8 after a mismatch at 64" in m["reason"], m["reason"]
    assert out["reuse"]["group"] == 8 and out["reuse"]["tried"] == [1], out["reuse"]
    c = out["crashAt8"]
    assert c["group"] == 1 and c["tried"] == [1] and c["record"]["ceiling"] == 1, c
    assert c["record"]["crashes"] == [{"size": 8, "at": "t"}] and c["record"]["breadcrumb"] is None, c
    f = out["floorBad"]
    assert f["group"] == 1 and f["tried"] == [1] and f["record"]["good"] is None and "floor" in f["reason"], f
    assert out["corrupt"]["group"] == "all" and out["corrupt"]["record"]["crashes"] == [], out["corrupt"]
    assert out["otherDevice"] is True and out["noStorage"] is None
    assert out["terminated"] is None and out["crash"] == "all", out
    assert out["released"]["group"] == "all" and out["released"]["tried"] == [1], out["released"]
    died = out["diedInFirstForward"]
    assert died["group"] == 64 and died["tried"] == [1, 64] and died["record"]["crashes"][0]["size"] == "all", died
    after = out["afterWorkerCrash"]
    assert after["group"] == 64 and after["tried"] == [1, 64] and after["record"]["crashes"][0]["size"] == "all", after
