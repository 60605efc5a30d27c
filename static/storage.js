// The Storage panel: the models stored on this device (the worker's weight store, through
// client.storeList / storeRemove), the space they take against the origin's usage and quota (the
// same `store` event's: one source, so the figures add up), and navigator.storage.persist() (a
// page API, so it is asked here, not in the worker).
import { $, el, announce } from "./ui.js";
import { fmtBytes } from "./format.js";

const view = {
  button: $("storage-button"), panel: $("storage-panel"), list: $("storage-list"), refresh: $("storage-refresh"),
  bar: $("storage-bar"), fill: $("storage-fill"), usage: $("storage-usage"),
  persist: $("storage-persist"), persistResult: $("storage-persist-result"),
};

const PERSISTENT = "Storage is persistent: the browser keeps the models until you delete them.";
const EVICTABLE = "The browser may evict the models when space runs low (it decides; using Wisp often, or installing it, helps). They would be downloaded again.";

const store = {
  entries: new Map(), // model id → {id, name, bytes, total, complete, files}
  event: null,        // the last `store` event
  error: null,
  loading: null,      // the refresh in flight
};
let deps = { client: null, models: () => [], busyId: () => null, onChange: () => {} };

/** Wire the panel. client(): the WispClient (started on demand); models(): the catalog (/api/models);
 *  busyId(): the id of the model being loaded (its files can't be deleted meanwhile); onChange(): after
 *  every refresh (the picker re-marks the stored models). */
export function initStorage(options) {
  deps = { ...deps, ...options };
  view.button.addEventListener("click", () => toggleStorage());
  view.refresh.addEventListener("click", () => refreshStore());
  view.persist.addEventListener("click", askPersist);
  document.addEventListener("keydown", (ev) => {
    if (ev.key === "Escape" && !view.panel.hidden) { toggleStorage(false); view.button.focus(); }
  });
  document.addEventListener("pointerdown", (ev) => {
    if (!view.panel.hidden && !ev.target.closest("#storage-panel, #storage-button")) toggleStorage(false);
  });
}

export function toggleStorage(open = view.panel.hidden) {
  view.panel.hidden = !open;
  view.button.setAttribute("aria-expanded", String(open));
  if (open) {
    renderList();
    renderUsage();
    showPersisted();
    refreshStore();
  }
}
export const storageOpen = () => !view.panel.hidden;

/** "complete" | "partial" | null: what the store holds of a model. */
export function storedState(modelId) {
  const e = store.entries.get(modelId);
  return !e ? null : e.complete ? "complete" : "partial";
}

/** Ask the worker for the list (coalesced while one is in flight). */
export function refreshStore() {
  if (store.loading) return store.loading;
  store.loading = (async () => {
    try {
      const ev = await deps.client().storeList();
      accept(ev);
    } catch (err) {
      store.error = err.message || String(err);
    } finally {
      store.loading = null;
      renderList();
      renderUsage();
      deps.onChange();
    }
  })();
  return store.loading;
}

function accept(ev) {
  store.event = ev;
  store.error = null;
  const catalog = new Map(deps.models().map((m) => [m.id, m]));
  store.entries = new Map();
  for (const item of ev.models || []) {
    const info = item.model || {};
    const id = info.id ?? item.id;
    if (id == null) continue;
    const files = item.files || [];
    const known = catalog.get(id);
    const wanted = known ? Object.keys(known.files || {}) : files.map((f) => f.name);
    const byName = new Map(files.map((f) => [f.name, f]));
    const complete = files.length > 0 && wanted.every((n) => byName.get(n)?.complete);
    const bytes = item.bytes ?? files.reduce((a, f) => a + Number(f.written ?? (f.complete ? f.size : 0) ?? 0), 0);
    const total = known?.size || files.reduce((a, f) => a + Number(f.size || 0), 0);
    store.entries.set(id, { id, name: info.name || known?.name || id, bytes, total, complete, files });
  }
}

function renderList() {
  if (view.panel.hidden) return;
  const entries = [...store.entries.values()].sort((a, b) => a.name.localeCompare(b.name));
  if (!entries.length) {
    const text = store.error ? `Couldn’t read the store: ${store.error}`
      : store.event ? "No models are stored yet. A model is stored the first time you load it."
      : "Reading the store…";
    view.list.replaceChildren(el("li", "store-empty", text));
    return;
  }
  view.list.replaceChildren(...entries.map(renderEntry));
}

function renderEntry(e) {
  const li = el("li", "store-item");
  li.dataset.testid = "storage-model";
  li.dataset.model = e.id;
  li.dataset.state = e.complete ? "complete" : "partial";
  const name = el("div", "store-name", e.name);
  name.append(el("span", `store-state ${e.complete ? "complete" : "partial"}`, e.complete ? "complete" : "partial"));
  const meta = el("div", "store-meta", e.complete ? fmtBytes(e.bytes)
    : `${fmtBytes(e.bytes)} of ${fmtBytes(e.total)} downloaded · resumes on the next load`);
  const actions = el("div", "store-actions");
  const del = el("button", "btn btn-ghost btn-sm", "Delete");
  del.type = "button";
  del.dataset.testid = "storage-delete";
  del.setAttribute("aria-label", `Delete ${e.name} from this device`);
  const busy = deps.busyId() === e.id;
  del.disabled = busy;
  if (busy) del.title = "It is loading right now";
  del.addEventListener("click", () => confirmDelete(li, e, del));
  actions.append(del);
  li.append(name, meta, actions);
  return li;
}

function confirmDelete(li, e, del) {
  if (li.querySelector(".store-confirm")) return;
  const row = el("div", "store-confirm");
  row.append(el("span", "", `Delete ${e.name} (${fmtBytes(e.bytes)}) from this device? Loading it again downloads it again. `));
  const yes = el("button", "btn btn-danger btn-sm", "Delete");
  yes.type = "button";
  yes.dataset.testid = "storage-delete-confirm";
  const no = el("button", "link-button", "Keep");
  no.type = "button";
  no.addEventListener("click", () => { row.remove(); del.disabled = false; del.focus(); });
  yes.addEventListener("click", async () => {
    yes.disabled = no.disabled = true;
    yes.textContent = "Deleting…";
    try {
      accept(await deps.client().storeRemove(e.id));
      announce(`${e.name} was deleted from this device.`);
    } catch (err) {
      store.error = err.message || String(err);
      row.replaceChildren(el("span", "", `Couldn’t delete: ${store.error}`));
      return;
    }
    renderList();
    renderUsage();
    deps.onChange();
    view.refresh.focus();
  });
  row.append(yes, no);
  del.disabled = true;
  li.append(row);
  yes.focus();
}

function renderUsage() {
  if (view.panel.hidden) return;
  const { usage, quota } = store.event || {};
  const models = [...store.entries.values()].reduce((a, e) => a + Number(e.bytes || 0), 0);
  if (!(quota > 0)) {
    view.usage.textContent = store.event ? `Models take ${fmtBytes(models)}; this browser doesn’t say how much room is left.` : "Measuring…";
    view.bar.classList.add("indeterminate");
    return;
  }
  const pct = Math.min(100, (100 * (usage || 0)) / quota);
  view.bar.classList.remove("indeterminate");
  view.bar.setAttribute("aria-valuenow", pct.toFixed(0));
  view.fill.style.width = `${Math.max(pct, usage ? 1 : 0)}%`;
  view.usage.textContent = `${fmtBytes(usage)} of ${fmtBytes(quota)} used · models take ${fmtBytes(models)}`;
}

async function showPersisted() {
  if (view.persistResult.textContent) return; // the answer to the button stays
  let persisted = store.event?.persisted;
  try { if (navigator.storage?.persisted) persisted = await navigator.storage.persisted(); } catch { /* keep */ }
  if (persisted) setPersist(true);
}

function setPersist(ok, text = ok ? PERSISTENT : EVICTABLE) {
  view.persistResult.textContent = text;
  view.persistResult.classList.toggle("is-ok", !!ok);
  view.persistResult.dataset.persisted = String(!!ok);
  if (ok) view.persist.disabled = true;
}

async function askPersist() {
  if (!navigator.storage?.persist) {
    setPersist(false, "This browser can’t make storage persistent; it may evict the models when space runs low.");
    return;
  }
  view.persist.disabled = true;
  try {
    setPersist(await navigator.storage.persist());
  } catch (err) {
    setPersist(false, `The browser didn’t answer (${err.message}). ${EVICTABLE}`);
  } finally {
    if (view.persistResult.dataset.persisted !== "true") view.persist.disabled = false;
  }
}
