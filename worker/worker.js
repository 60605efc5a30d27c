// The engine's worker (a *module* worker: new Worker("/worker/worker.js", {type: "module"})).
//
// Boot: Pyodide from our own origin (/pyodide/, built by tools/build_web.py into build/web), the
// engine wheel and its dependencies through /wisp-lock.json, then worker/gpu.js registered as the
// Python module "wisp_gpu" (py_engine/gpu/browser_host.py drives it), worker/store.js as
// "wisp_store", worker/pictures.js as "wisp_pictures" and worker/memory_files.js as
// "wisp_memory_files". Then {type: "booted"}.
//
// The protocol (page <-> worker; static/client.js is the page side): py_engine/web/protocol.py's
// table lists every message and event with its fields; the Python handler checks each message
// against it, and the browser tests check every event both ways. This file adds only `booted`,
// boot `progress` (id null) and `error` events of kind "internal" when the bridge itself fails.
// Messages that arrive during boot wait for it; each is then handed to the Python entry point
// py_engine.web.worker.handle(message) (a dict) without awaiting the previous one, so that a
// `cancel` is seen while an `openai` request awaits the GPU. Python posts its events through init(post).
//
// Test hook: only a worker started as /worker/worker.js?test also accepts
// {type:"test_exec", id, code} — runs `code` with pyodide.runPythonAsync in one shared namespace
// and answers {type:"test_result", id, result} (the value of the last expression, JSON-encoded by
// the code itself) or {type:"test_result", id, error}. tests/test_browser_gpu.py uses it.

import * as gpu from "./gpu.js";
import * as memoryFiles from "./memory_files.js";
import * as pictures from "./pictures.js";
import * as store from "./store.js";
import { attach } from "./remote.js";

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
  pyodide.registerJsModule("wisp_pictures", pictures);  // a chat's pictures decoded (worker/pictures.js)
  pyodide.registerJsModule("wisp_memory_files", memoryFiles);  // the documents' store in OPFS (worker/memory_files.js)
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

// A load (or store_twin) of the user's own files carries their File handles (model.blobs): they stay
// in JavaScript, with the weight store (worker/remote.js), and Python gets the message without them.
function localFilesOut(msg) {
  if (!["load", "store_twin"].includes(msg?.type) || !msg.model?.blobs || typeof msg.model.blobs !== "object") return msg;
  const { blobs, ...model } = msg.model;
  attach(model.id, blobs);
  return { ...msg, model };
}

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
  // ---- dispatch: load / openai / cancel / unload go to py_engine.web.worker.handle ----
  let message;
  try {
    message = state.pyodide.toPy(localFilesOut(msg));
    await state.handle(message);
  } catch (err) {  // handle() reports its own errors; this is a failure of the bridge itself
    fail("internal", msg?.id, err);
  } finally {
    if (message?.destroy) message.destroy();
  }
};
