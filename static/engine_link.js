// One engine for every tab of the origin: the page's link to it, a Worker-like object for
// WispClient({createWorker}) (client.js sharedClient(): the chat and static/openai.js share it).
//
// - Where SharedWorker exists: every tab connects to worker/hub.js (one per origin), which routes
//   each tab's messages to ONE engine (worker/worker.js, a dedicated worker: OPFS sync handles and a
//   nested writer need one) run by one tab, the host, and its events back; a second tab reuses the
//   loaded model. The hub tells this tab when to host ({hub: "host"}) and what to post to its engine.
// - Where it does not (Chrome Android before 148): LockLink. Tabs agree through the Web Lock
//   "wisp-engine": its holder runs the dedicated worker; another tab waits (its messages held) and
//   shows a notice (static/tab_notice.js) with "take over", which asks the owner over the
//   BroadcastChannel "wisp-engine" to end its worker and let go of the lock. Closing the owner
//   lets go of it too: a waiting tab then starts its engine and sends what it held.
// `engineTabs` says which of these this page is in: mode "alone" (no link yet), "shared" (the hub),
// "owner" or "elsewhere" (LockLink), and dispatches "change" when it changes.

export const engineTabs = new EventTarget();
engineTabs.mode = "alone";
engineTabs.takeOver = () => {}; // LockLink, while another tab owns the engine

function setMode(mode) {
  if (engineTabs.mode === mode) return;
  engineTabs.mode = mode;
  engineTabs.dispatchEvent(new CustomEvent("change", { detail: mode }));
}

/** The ArrayBuffers among a message's fields (a document's bytes, a recording's samples): moved, not copied. */
export function buffers(value) {
  const out = [];
  for (const v of Object.values(value || {})) {
    if (v instanceof ArrayBuffer) out.push(v);
    else if (ArrayBuffer.isView(v) && !out.includes(v.buffer)) out.push(v.buffer);
  }
  return out;
}

const describe = (ev) => ev?.message ? `${ev.message}${ev.filename ? ` (${ev.filename.split("/").pop()}:${ev.lineno})` : ""}`
  : "The engine's worker could not start or stopped unexpectedly.";

/** Hold a Web Lock until release() (granted: resolves). */
function holdLock(name, options = {}) {
  let release;
  const held = new Promise((resolve) => { release = resolve; });
  const granted = new Promise((resolve) => {
    navigator.locks.request(name, options, (lock) => {
      resolve(lock);
      return lock ? held : null;
    }).catch(() => resolve(null));
  });
  return { granted, release: () => release() };
}

/** The page's engine link: the hub where SharedWorker exists, else LockLink. */
export function engineLink(url) {
  return typeof SharedWorker === "function" ? new HubLink(url) : new LockLink(url);
}

class HubLink {
  constructor(url) {
    this.url = url;
    this.onmessage = this.onerror = this.onmessageerror = this.onmoved = null;
    this.engine = null; // this tab's dedicated worker, while it hosts the engine
    this.held = []; // messages until the hub welcomes this tab
    this.closed = false;
    this.fallback = null; // a LockLink, where the hub did not start (a server without worker/hub.js)
    const tab = crypto.randomUUID?.() ?? `${Date.now()}-${Math.random()}`;
    this.lock = holdLock(`wisp-tab:${tab}`); // let go when this tab goes: the hub sees it closed
    this.hub = new SharedWorker(new URL("/worker/hub.js", location.href), { type: "module", name: "wisp-hub" });
    this.hub.onerror = (ev) => {
      if (this.held) this._fallBack(); // never welcomed: the tabs agree through Web Locks instead
      else this._fail(`The tabs' hub (worker/hub.js) failed: ${describe(ev)}`);
    };
    this.port = this.hub.port;
    this.port.onmessage = (ev) => this._fromHub(ev.data);
    this.port.onmessageerror = () => this.onmessageerror?.();
    this.lock.granted.then(() => { if (!this.closed && !this.fallback) this.port.postMessage({ hub: "hello", tab }); });
  }

  postMessage(msg, transfer = []) {
    if (this.fallback) this.fallback.postMessage(msg, transfer);
    else if (this.held) this.held.push([msg, transfer]);
    else if (!this.closed) this.port.postMessage({ hub: "send", msg }, transfer);
  }

  terminate() {
    if (this.closed) return;
    this.closed = true;
    this.fallback?.terminate();
    this.engine?.terminate();
    this.engine = null;
    this.port.close();
    this.lock.release();
  }

  _welcome() {
    setMode("shared");
    for (const [msg, transfer] of this.held.splice(0)) this.port.postMessage({ hub: "send", msg }, transfer);
    this.held = null;
  }

  _fallBack() {
    this.port.close();
    this.lock.release();
    const link = new LockLink(this.url);
    for (const name of ["onmessage", "onerror", "onmessageerror", "onmoved"]) link[name] = (arg) => this[name]?.(arg);
    for (const [msg, transfer] of this.held.splice(0)) link.postMessage(msg, transfer);
    this.held = null;
    this.fallback = link;
  }

  _fail(message) {
    if (!this.closed) this.onerror?.({ message });
  }

  _fromHub(data) {
    switch (data?.hub) {
      case "welcome": this._welcome(); break;
      case "event": this.onmessage?.({ data: data.event }); break;
      case "host": this._host(); break;
      case "post": this.engine?.postMessage(data.msg, buffers(data.msg)); break;
      case "stop": this.engine?.terminate(); this.engine = null; break;
      case "crash": this._fail(data.message); break;
      default: break;
    }
  }

  // This tab runs the engine for every tab: its events go to the hub, which routes them.
  _host() {
    this.engine?.terminate();
    const engine = new Worker(this.url, { type: "module" });
    engine.onmessage = (ev) => this.port.postMessage({ hub: "event", event: ev.data }, buffers(ev.data));
    engine.onerror = (ev) => {
      if (ev.preventDefault) ev.preventDefault();
      this.port.postMessage({ hub: "engine_error", message: describe(ev) });
    };
    engine.onmessageerror = () => this.port.postMessage({ hub: "engine_error", message: "The engine sent a message the page could not read." });
    this.engine = engine;
  }
}

const LOCK = "wisp-engine";

class LockLink {
  constructor(url) {
    this.url = url;
    this.onmessage = this.onerror = this.onmessageerror = this.onmoved = null;
    this.worker = null;
    this.held = [];
    this.closed = false;
    this.channel = new BroadcastChannel(LOCK);
    this.channel.onmessage = (ev) => { if (ev.data?.type === "take-over" && this.worker) this._giveUp(); };
    this._wait(true);
  }

  async _wait(first) {
    let lock = first ? holdLock(LOCK, { ifAvailable: true }) : null;
    if (!(first && await lock.granted)) {
      if (this.closed) return;
      setMode("elsewhere");
      engineTabs.takeOver = () => this.channel.postMessage({ type: "take-over" });
      lock = holdLock(LOCK);
      await lock.granted;
    }
    this.lock = lock;
    if (this.closed) { lock.release(); return; }
    this._own();
  }

  _own() {
    const w = new Worker(this.url, { type: "module" });
    w.onmessage = (ev) => this.onmessage?.(ev);
    w.onerror = (ev) => this.onerror?.(ev);
    w.onmessageerror = (ev) => this.onmessageerror?.(ev);
    this.worker = w;
    engineTabs.takeOver = () => {};
    setMode("owner");
    for (const [msg, transfer] of this.held.splice(0)) w.postMessage(msg, transfer);
  }

  // Another tab asked for the engine: this one ends its worker (the model's GPU memory goes with
  // it), lets go of the lock and waits for it again.
  _giveUp() {
    this.worker.terminate();
    this.worker = null;
    this.lock.release();
    this.onmoved?.("Wisp moved to another tab.");
    this._wait(false);
  }

  postMessage(msg, transfer = []) {
    if (this.worker) this.worker.postMessage(msg, transfer);
    else if (!this.closed) this.held.push([msg, transfer]);
  }

  terminate() {
    this.closed = true;
    this.worker?.terminate();
    this.worker = null;
    this.lock?.release();
    this.channel.close();
    setMode("alone");
  }
}
