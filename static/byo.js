// "Load from URL or file…": the dialog (a URL, a .gguf file, a model folder), the page as a drop
// target, and the list of models the user brought (localStorage), offered in the picker beside the
// server's. What a URL or files are made into is byo_source.js; the load itself is the page's own
// (app.js), so a brought model is stored, verified, checked for fit and narrated like a hosted one.
import { $, announce } from "./ui.js";
import { children, fileOf } from "./dropped.js";
import { fromFiles, fromUrl, pickedFiles } from "./byo_source.js";
import { refreshStore } from "./storage.js";

const KEY = "wisp-byo-models";
const KEEP = 12;  // models remembered; the store may hold more (the Storage panel lists them all)

const view = {
  open: $("byo-open"), dialog: $("byo"), close: $("byo-close"), form: $("byo-url-form"), url: $("byo-url"),
  file: $("byo-file"), folder: $("byo-folder"), fileInput: $("byo-file-input"), folderInput: $("byo-folder-input"),
  status: $("byo-status"), drop: $("drop-overlay"),
};
const WEIGHTS = /\.(gguf|safetensors)$/;
let deps = { client: null, load: async () => false, busy: () => false, onModel: () => {}, showError: () => {}, models: () => [] };

/** client(): the WispClient; load(model) -> Promise<bool>: the page's load (true once loaded);
 *  busy(): a load is under way; onModel(model): a brought model loaded (the picker lists and selects it);
 *  showError(kind, message); models(): the picker's models. */
export function initByo(options) {
  deps = { ...deps, ...options };
  view.open.addEventListener("click", () => { setStatus(""); view.dialog.showModal(); view.url.focus(); });
  view.close.addEventListener("click", () => view.dialog.close());
  view.form.addEventListener("submit", (ev) => { ev.preventDefault(); bring(() => fromUrl(view.url.value), "Looking at the URL…"); });
  view.file.addEventListener("click", () => view.fileInput.click());
  view.folder.addEventListener("click", () => view.folderInput.click());
  for (const input of [view.fileInput, view.folderInput]) {
    input.addEventListener("change", () => {
      const list = pickedFiles(input.files);
      input.value = "";  // the same file chosen again is a new change
      if (list.length) bring(() => fromFiles(list), "Reading the files…");
    });
  }
  initDrop();
}

/** The models brought before (no File handles: a local one loads from the store, where it is). */
export function broughtModels() {
  try {
    const list = JSON.parse(localStorage.getItem(KEY) || "[]");
    return Array.isArray(list) ? list.filter((m) => m && typeof m.id === "string" && m.files && m.base) : [];
  } catch { return []; }
}

function remember(model) {
  const { blobs: _blobs, ...kept } = model;
  const list = [kept, ...broughtModels().filter((m) => m.id !== model.id)].slice(0, KEEP);
  try { localStorage.setItem(KEY, JSON.stringify(list)); } catch { /* private mode: this visit only */ }
}

function setStatus(text, isError = false) {
  view.status.textContent = text;
  view.status.classList.toggle("is-error", isError);
}

/** Resolve a model (names and sizes only), then hand it to the page's load. Errors before the load
 *  are said where the user is (the dialog, else the banner); the load narrates its own. */
async function bring(resolve, what) {
  if (deps.busy()) { say("Wisp can’t load a model now: one is loading (wait for it), or this browser has no WebGPU.", true); return; }
  say(what);
  let model;
  try {
    model = await resolve();
  } catch (err) {
    say(err.message || String(err), true, err.kind || "load");
    return;
  }
  say("Looking for the same model on this device…");
  const stored = await storedTwin(model);
  setStatus("");
  if (view.dialog.open) view.dialog.close();
  if (stored) {  // the very same bytes: stored once, listed once
    announce(`${model.name} is ${stored.name}, already on this device.`);
    if (await deps.load(stored)) deps.onModel(stored);
  } else if (await deps.load(model)) {
    remember(model);
    deps.onModel(model);
  } else {
    await forgetUnstarted(model.id);
  }
}

/** The picker's model whose stored files hold exactly this model's bytes (worker/store.js twin()),
 *  or null. A failed check is no answer: the load goes on and says what is wrong with the files. */
async function storedTwin(model) {
  try {
    const { twin } = await deps.client().storeTwin(model);
    return deps.models().find((m) => m.id === twin) || null;
  } catch { return null; }
}

// A load that failed before any weight byte was stored (refused by the footprint check, a missing
// file) leaves at most its small files (config, tokenizer): they go, so the Storage panel lists no
// model that never loaded. Weight bytes stay, for the next load to resume from.
async function forgetUnstarted(id) {
  try {
    const entry = (await deps.client().storeList()).models.find((m) => m.model?.id === id);
    if (entry && !entry.files.some((f) => WEIGHTS.test(f.name) && f.written > 0)) {
      await deps.client().storeRemove(id);
      refreshStore();
    }
  } catch { /* the Storage panel shows the store's own errors */ }
}

function say(text, isError = false, kind = "load") {
  if (view.dialog.open) setStatus(text, isError);
  else if (isError) deps.showError(kind, text);
}

// ---------- the page as a drop target ----------

const carriesFiles = (ev) => Array.from(ev.dataTransfer?.types || []).includes("Files");

// Pictures only (each item an image): attachments.js takes them for the message, not a model load.
const carriesPictures = (ev) => {
  const items = Array.from(ev.dataTransfer?.items || []);
  return items.length > 0 && items.every((item) => item.kind === "file" && /^image\//.test(item.type));
};

function initDrop() {
  let depth = 0;  // dragenter/leave fire for every child crossed: count them
  const overlay = view.drop.querySelector("p"), modelText = overlay.textContent;
  document.addEventListener("dragenter", (ev) => {
    if (!carriesFiles(ev)) return;
    depth++;
    overlay.textContent = carriesPictures(ev) ? "Drop the picture to attach it to your message" : modelText;
    view.drop.hidden = false;
  });
  document.addEventListener("dragleave", (ev) => { if (carriesFiles(ev) && --depth <= 0) { depth = 0; view.drop.hidden = true; } });
  document.addEventListener("dragover", (ev) => { if (carriesFiles(ev)) ev.preventDefault(); });
  document.addEventListener("drop", (ev) => {
    if (!carriesFiles(ev)) return;
    ev.preventDefault();
    depth = 0;
    view.drop.hidden = true;
    if (carriesPictures(ev)) return;  // attachments.js's
    // Entries must be taken while the event is dispatched; reading them may take longer.
    const entries = Array.from(ev.dataTransfer.items || [], (item) => item.webkitGetAsEntry?.()).filter(Boolean);
    const files = Array.from(ev.dataTransfer.files || []);
    bring(async () => fromFiles(entries.length ? await walk(entries) : files.map((file) => ({ path: file.name, file }))),
      "Reading the files…");
  });
}

/** [{path, file}] of dropped entries: files, and a dropped folder's files one level down (an HF
 *  folder is flat; deeper ones are not model files). */
async function walk(entries) {
  const out = [];
  for (const entry of entries) {
    if (entry.isFile) out.push({ path: entry.name, file: await fileOf(entry) });
    else if (entry.isDirectory) {
      for (const child of await children(entry)) {
        if (child.isFile) out.push({ path: `${entry.name}/${child.name}`, file: await fileOf(child) });
      }
    }
  }
  return out;
}

