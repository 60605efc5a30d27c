// The tabs' hub: ONE SharedWorker per origin (static/engine_link.js starts it as
// new SharedWorker("/worker/hub.js", {type: "module", name: "wisp-hub"})) through which every tab of
// the origin speaks to one engine, so a second tab reuses the loaded model and its prompt cache.
//
// Why the engine is not in here: a SharedWorker gets WebGPU (Chromium 124+), but neither
// createSyncAccessHandle (OPFS: the weight store and the documents' store need it; the spec exposes
// it to dedicated workers only) nor a nested Worker (Chromium). So the engine stays the dedicated
// worker/worker.js, run by one tab (the host, elected here); the hub routes, queues and re-hosts.
//
// Tab -> hub (over the tab's port): {hub: "hello", tab} once it holds the Web Lock "wisp-tab:<tab>"
// (released when the tab goes: the hub's request for it is then granted, so a closed tab is seen
// though a MessagePort has no close event); {hub: "send", msg} an engine message (protocol.py's);
// the host also {hub: "event", event} for each event its engine posts, {hub: "engine_error", message}.
// Hub -> tab: {hub: "welcome"} (the answer to hello), {hub: "event", event} (the tab's own ids again), {hub: "host"} (start the engine),
// {hub: "post", msg} (host: give it to the engine), {hub: "stop"} (host: end the engine),
// {hub: "crash", message} (the engine this tab's requests ran on is gone).
//
// Ids are namespaced per tab ("t3:load-1") so two tabs' "load-1" never meet; events with an id go to
// the tab whose request it is, those without (boot, device_lost) to every tab. Requests are served
// one tab at a time, in the order they came (FIFO): a tab's own overlapping requests go on at once
// (the worker's busy guard answers them as before), another tab's wait for the first's to end. A load
// of the model already loaded with the same options is answered at once with its `loaded`: no fetch,
// no upload. A closed tab's queued requests are dropped and its running ones cancelled; a closed host
// takes the engine with it, so another tab hosts one and the loaded model is loaded again (from the
// weight store: no download) before the queue goes on.

// The event that ends each request (an `error` ends any); messages with none (cancel, unload) end
// when they are posted.
const ANSWER = { load: "loaded", openai: "response", probe: "probe", diagnose: "diagnostics",
  speech_load: "speech", transcribe: "speech", speak: "speech" };
const answerOf = (type) => ANSWER[type] ?? (type.startsWith("memory_") ? "memory" : type.startsWith("store_") ? "store" : null);

const tabs = new Map(); // tab -> {port, n}
const queue = []; // [{tab, msg}] not yet posted to the engine
const running = new Map(); // engine id -> {tab, id, answer}
let host = null; // the tab whose dedicated worker is the engine
let engineUp = false;
let booted = null; // the engine's `booted` event, for tabs that come later
let loaded = null; // {key, event, msg}: the model the engine holds, and the load that gave it
let tabCount = 0;

const keyOf = (msg) => JSON.stringify([msg.model?.id, msg.model?.files, msg.model?.mmproj ?? null, msg.options ?? {}]);

function buffers(value) {
  const out = [];
  for (const v of Object.values(value || {})) {
    if (v instanceof ArrayBuffer) out.push(v);
    else if (ArrayBuffer.isView(v) && !out.includes(v.buffer)) out.push(v.buffer);
  }
  return out;
}

function toTab(tab, data) {
  const t = tabs.get(tab);
  if (t) t.port.postMessage(data, data.event ? buffers(data.event) : []);
}

function everyTab(data) {
  for (const tab of tabs.keys()) toTab(tab, data);
}

function ensureEngine() {
  if (engineUp) return true;
  if (host === null || !tabs.has(host)) host = tabs.keys().next().value ?? null;
  if (host === null) return false;
  engineUp = true;
  toTab(host, { hub: "host" });
  return true;
}

function postToEngine(msg) {
  toTab(host, { hub: "post", msg });
}

// The queue's head goes when nothing of another tab runs; a tab's own requests follow each other.
function pump() {
  while (queue.length) {
    const { tab, msg, cancelled } = queue[0];
    const busyTabs = new Set([...running.values()].map((r) => r.tab));
    if (busyTabs.size && !busyTabs.has(tab)) return;
    if (!ensureEngine()) return;
    queue.shift();
    dispatch(tab, msg);
    if (cancelled) postToEngine({ type: "cancel", id: `${tab}:${msg.id}` });
  }
}

function dispatch(tab, msg) {
  const answer = answerOf(msg.type);
  if (msg.type === "load" && loaded && !loaded.pending && loaded.key === keyOf(msg)) {
    toTab(tab, { hub: "event", event: { ...loaded.event, id: msg.id } }); // the model is there already
    return;
  }
  if (msg.type === "unload") loaded = null;
  if (answer === null || msg.id == null) { // cancel, unload: nothing answers them
    postToEngine(msg.id == null ? msg : { ...msg, id: `${tab}:${msg.id}` });
    return;
  }
  const id = `${tab}:${msg.id}`;
  running.set(id, { tab, id: msg.id, answer, msg });
  if (msg.type === "load") loaded = { key: keyOf(msg), pending: true, msg };
  postToEngine({ ...msg, id });
}

function onEngineEvent(event) {
  if (event?.type === "booted") booted = event;
  if (event?.type === "device_lost" && event.status === "failed") loaded = null;
  if (event?.type === "device_lost") { // every tab hears it (its model is reloaded); its id: the load's
    const [owner, ...rest] = String(event.id ?? "").split(":");
    for (const tab of tabs.keys()) toTab(tab, { hub: "event", event: { ...event, id: tab === owner ? rest.join(":") : null } });
    return;
  }
  const r = event?.id != null ? running.get(event.id) : undefined;
  if (!r) {
    if (event?.id == null) everyTab({ hub: "event", event });
    return; // a request of a closed tab (or the hub's own reload), answered now
  }
  const done = event.type === "error" || event.type === r.answer;
  if (r.msg.type === "load" && done) {
    if (event.type === "loaded") {
      loaded = { key: keyOf(r.msg), event, msg: r.msg };
      for (const other of tabs.keys()) { // the other tabs follow (app.js's followLoaded): id null
        if (other !== r.tab) toTab(other, { hub: "event", event: { ...event, id: null } });
      }
    } else loaded = null;
  }
  if (r.tab !== null) toTab(r.tab, { hub: "event", event: { ...event, id: r.id } });
  if (done) {
    running.delete(event.id);
    pump();
  }
}

// The engine is gone (its tab closed, or its worker failed): the requests on it failed; a model it
// held is loaded again by the next host when `reload` (the hub's own request: no tab hears it);
// a failed worker is every tab's crash (each client starts over, as after a dedicated worker's).
function engineGone(message, reload) {
  const failed = new Set(reload ? [] : tabs.keys()); // a failed engine: every tab hears it, as one tab would
  for (const [id, r] of running) {
    running.delete(id);
    if (r.tab !== null && tabs.has(r.tab)) failed.add(r.tab);
  }
  for (const tab of failed) toTab(tab, { hub: "crash", message });
  engineUp = false;
  booted = null;
  const held = loaded && !loaded.pending ? loaded.msg : null;
  loaded = null;
  if (reload && held) queue.unshift({ tab: null, msg: { ...held, id: `reload-${++tabCount}` } });
  pump();
}

function tabGone(tab) {
  if (!tabs.delete(tab)) return;
  for (let i = queue.length - 1; i >= 0; i--) if (queue[i].tab === tab) queue.splice(i, 1);
  if (tab === host) {
    host = null;
    engineGone("The tab that ran the engine was closed.", true);
    return;
  }
  for (const [id, r] of running) {
    if (r.tab !== tab) continue;
    r.tab = null; // its events go nowhere; the queue waits for the engine to end it
    if (r.msg.type === "openai" || r.msg.type === "transcribe" || r.msg.type === "speak") postToEngine({ type: "cancel", id });
  }
  pump();
}

function onTabMessage(tab, data) {
  if (data?.hub === "send") {
    const msg = data.msg;
    if (msg?.type === "cancel") { // a queued request is cancelled as it starts; a running one now
      const queued = queue.find((q) => q.tab === tab && q.msg.id === msg.id);
      if (queued) queued.cancelled = true;
      else if (running.has(`${tab}:${msg.id}`)) postToEngine({ ...msg, id: `${tab}:${msg.id}` });
      return;
    }
    queue.push({ tab, msg });
    pump();
  } else if (data?.hub === "event" && tab === host) onEngineEvent(data.event);
  else if (data?.hub === "engine_error" && tab === host) {
    toTab(host, { hub: "stop" });
    engineGone(data.message || "The engine's worker stopped unexpectedly.", false);
  }
}

self.onconnect = (ev) => {
  const port = ev.ports[0];
  port.onmessage = ({ data }) => {
    if (data?.hub !== "hello" || typeof data.tab !== "string") return;
    const tab = `t${++tabCount}`;
    tabs.set(tab, { port });
    port.onmessage = (e) => onTabMessage(tab, e.data);
    port.postMessage({ hub: "welcome" });
    if (booted) port.postMessage({ hub: "event", event: booted });
    if (loaded && !loaded.pending) port.postMessage({ hub: "event", event: { ...loaded.event, id: null } });
    navigator.locks.request(`wisp-tab:${data.tab}`, () => tabGone(tab));
    pump();
  };
};
