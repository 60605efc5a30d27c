// The engine's worker (a *module* worker: new Worker("/worker/worker.js", {type: "module"})).
//
// Boot: Pyodide from our own origin (/pyodide/, built by tools/build_web.py into build/web), the
// engine wheel and its dependencies through /wisp-lock.json, then worker/gpu.js registered as the
// Python module "wisp_gpu" (py_engine/gpu/browser_host.py drives it). Then {type: "booted"}.
//
// Protocol (page <-> worker; static/client.js is the page side):
// page -> worker: {type:"load", id, model:{id, name, kind, base:"/models/<id>/", files:{rel:size}}, options:{context, f32,
//                  gpu_budget_mb, platform (static/platform.js), group (?group=), probe:{group, reason, ceiling} | {error}}}
//                 {type:"generate", id, messages:[{role,content}] | prompt:"...", sampling:{temperature, top_k, top_p,
//                  repetition_penalty, seed, max_new_tokens, lookup}}
//                 {type:"cancel", id}   {type:"unload"}
//                 {type:"store_list", id}  {type:"store_remove", id, model}  {type:"store_persist", id}
//                 {type:"diagnose", id, options:{platform, group, probe}}   ("Check this device"; no model needed)
//                 {type:"probe", id, group (0: all), steps}   (WebKit's submit probe: static/submit_probe.js)
// worker -> page: {type:"booted", pyodide_ms}
//                 {type:"progress", id, phase:"boot"|"store"|"download"|"verify"|"upload"|"compile", done, total}
//                  (download also has bytes_per_s, eta_s; verify/upload count bytes read back from the store
//                  / landed in GPU buffers)
//                 {type:"store", id, models:[{model, files:[{name,size,written,complete}], bytes}], usage, quota,
//                  persisted, backend}
//                 {type:"loaded", id, model, adapter:{name, features:[...], limits:{...}, webkit, platform_reason,
//                  submit:{strategy, group, reason, probed?, ceiling?}, workarounds:[...]}, load_ms, context,
//                  kv_cache:"K/V formats", gpu_bytes:{weights, kv_cache, activations, other}, wasm_memory_bytes}
//                 {type:"probe", id, group, steps, ok, detail, ms, command_buffers, adapter:{name, vendor,
//                  architecture, description}}
//                 {type:"token", id, text, token_id, index}
//                 {type:"done", id, tokens:[...], prompt_tokens, ttft_ms, prefill_tok_s, decode_tok_s, host_ms_per_token, stop}
//                 {type:"diagnostic", id, result:{name, ok, detail, ms}}  (one per self-test, as it finishes)
//                 {type:"diagnostics", id, adapter:{name, features, limits, webkit, platform_reason, submit,
//                  workarounds}, results:[{name, ok, detail, ms}]}
//                 {type:"error", id, kind:"no-webgpu"|"load"|"quota"|"generate"|"store"|"probe"|"diagnose"|"internal", message}
// Messages that arrive during boot wait for it; each is then handed to the Python entry point
// py_engine.web.worker.handle(message) (a dict) without awaiting the previous one, so that a
// `cancel` is seen while a `generate` awaits the GPU. Python posts its events through init(post).
//
// Test hook: only a worker started as /worker/worker.js?test also accepts
// {type:"test_exec", id, code} — runs `code` with pyodide.runPythonAsync in one shared namespace
// and answers {type:"test_result", id, result} (the value of the last expression, JSON-encoded by
// the code itself) or {type:"test_result", id, error}. tests/test_browser_gpu.py uses it.

import * as gpu from "./gpu.js";
import * as store from "./store.js";

const TEST = new URL(self.location.href).searchParams.has("test");

function fail(kind, id, err) {
  postMessage({ type: "error", id: id ?? null, kind, message: err?.message ? `${err.name || "Error"}: ${err.message}` : String(err) });
}

async function boot() {
  const t0 = performance.now();
  postMessage({ type: "progress", id: null, phase: "boot", done: 0, total: 3 });
  const origin = self.location.origin;
  const { loadPyodide } = await import(`${origin}/pyodide/pyodide.mjs`);
  const pyodide = await loadPyodide({ indexURL: `${origin}/pyodide/`, lockFileURL: `${origin}/wisp-lock.json` });
  postMessage({ type: "progress", id: null, phase: "boot", done: 1, total: 3 });
  await pyodide.loadPackage(["wisp"], { messageCallback: () => {}, errorCallback: (m) => console.warn(m) });
  postMessage({ type: "progress", id: null, phase: "boot", done: 2, total: 3 });
  pyodide.registerJsModule("wisp_gpu", gpu);
  pyodide.registerJsModule("wisp_store", store);  // the weight store (worker/store.js)
  // ---- the Python entry point (py_engine/web/worker.py) ----
  const entry = pyodide.pyimport("py_engine.web.worker");
  entry.init((event) => postMessage(event));
  const handle = entry.handle;
  postMessage({ type: "progress", id: null, phase: "boot", done: 3, total: 3 });
  postMessage({ type: "booted", pyodide_ms: Math.round(performance.now() - t0) });
  return { pyodide, handle, globals: TEST ? pyodide.toPy({}) : null };
}

const booting = boot();
booting.catch((err) => fail("internal", null, err));

async function testExec(state, msg) {
  try {
    const value = await state.pyodide.runPythonAsync(msg.code, { globals: state.globals });
    const result = value?.toJs ? value.toJs() : value;
    if (value?.destroy) value.destroy();
    postMessage({ type: "test_result", id: msg.id, result });
  } catch (err) {
    postMessage({ type: "test_result", id: msg.id, error: err?.message ?? String(err) });
  }
}

self.onmessage = async (ev) => {
  const msg = ev.data;
  let state;
  try {
    state = await booting;
  } catch (err) {
    fail("internal", msg?.id, err);
    return;
  }
  if (TEST && msg?.type === "test_exec") return testExec(state, msg);
  // ---- dispatch: load / generate / cancel / unload go to py_engine.web.worker.handle ----
  let message;
  try {
    message = state.pyodide.toPy(msg);
    await state.handle(message);
  } catch (err) {  // handle() reports its own errors; this is a failure of the bridge itself
    fail("internal", msg?.id, err);
  } finally {
    if (message?.destroy) message.destroy();
  }
};
