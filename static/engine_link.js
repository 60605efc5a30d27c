// One engine for every tab of the origin: the page's link to it, a Worker-like object for
// WispClient({createWorker}) (client.js sharedClient(): the chat and static/openai.js share it).
//
// - Where SharedWorker exists: every tab connects to worker/hub.js (one per origin), which routes
//   each tab's messages to ONE engine (worker/worker.js, a dedicated worker: OPFS sync handles and a
//   nested writer need one) run by one tab, the host, and its events back; a second tab reuses the
//   loaded model. The hub tells this tab when to host ({hub: "host"}) and what to post to its engine.
// - Where it does not (Chrome Android before 148), or the hub does not start: LockLink. Tabs agree
//   through the Web Lock "wisp-engine": its holder runs the dedicated worker; another tab waits (its
//   messages held) and shows a notice (static/tab_notice.js) with "take over", which steals the
//   lock (Web Locks' steal: the tab that asked gets it, however many wait); the owner, its lock
//   taken, ends its worker and waits again. Closing the owner lets go of the lock: the tab that
//   waited longest starts its engine and sends what it held.
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

/** Hold a Web Lock until release(): `granted` resolves with the lock (null: not granted, or
 *  ifAvailable and held elsewhere); onLost() runs if another tab steals it from this one. */
function holdLock(name, options = {}, onLost = () => {}) {
  let release;
  let got = false;
  const held = new Promise((resolve) => { release = resolve; });
  const granted = new Promise((resolve) => {
    navigator.locks.request(name, options, (lock) => {
      got = Boolean(lock);
      resolve(lock);
      return lock ? held : null;
    }).catch(() => (got ? onLost() : resolve(null)));  // stolen, or aborted while it waited
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
    this.lock = null;
    this._wait(true);
  }

  // Own the engine if no tab does, else wait for it (the notice says so) or for "take over".
  async _wait(first) {
    if (first) {
      const lock = holdLock(LOCK, { ifAvailable: true }, () => this._lost());
      if (await lock.granted) return this._own(lock);
    }
    if (this.closed) return;
    const waiting = new AbortController();
    const lock = holdLock(LOCK, { signal: waiting.signal }, () => this._lost());
    engineTabs.takeOver = () => { // steal it: the owner's lock is taken away, and it lets its engine go
      waiting.abort();
      const stolen = holdLock(LOCK, { steal: true }, () => this._lost());
      stolen.granted.then(() => this._own(stolen));
    };
    setMode("elsewhere");
    if (await lock.granted) this._own(lock);
  }

  _own(lock) {
    if (this.closed) { lock.release(); return; }
    this.lock = lock;
    const w = new Worker(this.url, { type: "module" });
    w.onmessage = (ev) => this.onmessage?.(ev);
    w.onerror = (ev) => this.onerror?.(ev);
    w.onmessageerror = (ev) => this.onmessageerror?.(ev);
    this.worker = w;
    engineTabs.takeOver = () => {};
    setMode("owner");
    for (const [msg, transfer] of this.held.splice(0)) w.postMessage(msg, transfer);
  }

  // Another tab took the engine over: this one ends its worker (the model's GPU memory goes with
  // it) and waits for the lock again.
  _lost() {
    if (this.closed || !this.worker) return;
    this.worker.terminate();
    this.worker = null;
    this.lock = null;
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
    setMode("alone");
  }
}
