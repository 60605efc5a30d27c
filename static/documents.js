// The Documents panel: the user's documents for memory, kept in this browser (the worker keeps them in
// OPFS: py_engine/web/memory.py), embedded by the server's embedding model (client.js memoryModel()),
// recalled into the chat when "Use my documents" is on (documentsRequest(); app.js sends it). Files
// come by the pickers (a file, a folder) or a drop on the page while the panel is open (a dropped folder
// is walked). Each goes to the worker as its bytes (a transferred ArrayBuffer), one at a time, its row
// saying what happens (read, the embedder's first load, passages embedded) until it is listed, or why
// it failed (the reader's DocumentError) while the others go on. Export downloads the collection as
// JSON lines (memory/transfer.py's, as the desktop's /v1/memory export); Import takes such a file,
// read and sent in pieces (client.js memoryImport), its row saying how far it is.
import { $, el, announce } from "./ui.js";
import { children, fileOf } from "./dropped.js";
import { fmtBytes } from "./format.js";
import { memoryModel } from "./client.js";

export const COLLECTION = "documents";
const READABLE = /\.(txt|text|md|markdown|mdown|mkd|html?|xhtml|pdf)$/i; // what a folder's walk takes
const MAX_FILES = 1000; // a dropped folder's files at most (a home folder dropped by mistake stops there)
const USE_KEY = "wisp.memory.use";

const view = {
  button: $("documents-button"), panel: $("documents-panel"), drop: $("documents-drop"), list: $("documents-list"),
  jobs: $("documents-jobs"), usage: $("documents-usage"), note: $("documents-note"),
  fileInput: $("documents-file-input"), folderInput: $("documents-folder-input"),
  exportButton: $("documents-export"), importInput: $("documents-import-input"),
  toggle: $("use-documents"), toggleWrap: $("use-documents-wrap"), count: $("use-documents-count"),
};
const state = { embedder: null, event: null, error: null, jobs: [], running: null, asked: false, exporting: false };
let deps = { client: null, busy: () => false, showError: () => {} };

/** Wire the panel and the chat's toggle. client(): the WispClient; busy(): the chat is generating or
 *  loading (a document waits for it: the worker runs one GPU request at a time). */
export function initDocuments(options) {
  deps = { ...deps, ...options };
  view.button.addEventListener("click", () => toggleDocuments());
  $("documents-add-files").addEventListener("click", () => view.fileInput.click());
  $("documents-add-folder").addEventListener("click", () => view.folderInput.click());
  view.exportButton.addEventListener("click", () => exportDocuments());
  $("documents-import").addEventListener("click", () => view.importInput.click());
  view.importInput.addEventListener("change", () => {
    const [file] = view.importInput.files || [];
    view.importInput.value = "";
    if (file) enqueue([{ path: file.name, file, kind: "import" }]);
  });
  for (const input of [view.fileInput, view.folderInput]) {
    input.addEventListener("change", () => {
      const files = Array.from(input.files || []);
      input.value = ""; // the same files may be chosen again
      const folder = input === view.folderInput;
      enqueue(files.filter((f) => !folder || READABLE.test(f.name)).map((f) => ({ path: f.webkitRelativePath || f.name, file: f })));
    });
  }
  view.toggle.checked = localStorage.getItem(USE_KEY) === "1";
  view.toggle.addEventListener("change", () => {
    localStorage.setItem(USE_KEY, view.toggle.checked ? "1" : "0");
    if (view.toggle.checked && !state.event) refreshDocuments();
  });
  initDrop();
  document.addEventListener("keydown", (ev) => {
    if (ev.key === "Escape" && !view.panel.hidden) { toggleDocuments(false); view.button.focus(); }
  });
  document.addEventListener("pointerdown", (ev) => {
    if (!view.panel.hidden && !ev.target.closest("#documents-panel, #documents-button")) toggleDocuments(false);
  });
}

/** The server's models are known: memory is offered when one of them embeds. */
export function setModels(models) {
  state.embedder = memoryModel(models);
  view.button.hidden = view.toggleWrap.hidden = !state.embedder;
  if (state.embedder && view.toggle.checked) refreshDocuments();
}

export function toggleDocuments(open = view.panel.hidden) {
  view.panel.hidden = !open;
  view.button.setAttribute("aria-expanded", String(open));
  if (open) { render(); refreshDocuments(); }
}
export const documentsOpen = () => !view.panel.hidden;

/** A chat request's memory fields when "Use my documents" is on ({memory, embedder}), else null. The
 *  passages' budget is a third of the chat model's context (at most 1024 tokens). */
export function documentsRequest(context = 2048) {
  if (!state.embedder || !view.toggle.checked) return null;
  const budget = Math.max(64, Math.min(1024, Math.floor(context / 3)));
  return { memory: { collection: COLLECTION, k: 5, token_budget: budget }, embedder: state.embedder };
}

/** Resolves once no document is being added (the chat's send waits for it: one GPU request at a time). */
export async function documentsIdle() {
  while (state.running) await state.running;
}

export async function refreshDocuments() {
  if (!state.embedder) return;
  try {
    accept(await deps.client().memoryList(COLLECTION, state.embedder));
  } catch (err) {
    state.error = err.message;
    render();
  }
}

function accept(event) {
  state.event = event;
  state.error = null;
  render();
}

// ---------- adding ----------

function enqueue(entries) {
  if (!state.embedder || !entries.length) return;
  askPersistence();
  for (const { path, file, kind = "add" } of entries.slice(0, MAX_FILES)) {
    state.jobs.push({ name: path, file, kind, status: "queued", done: 0, total: 0, message: "" });
  }
  if (entries.length > MAX_FILES) deps.showError("memory", `Only the first ${MAX_FILES} of ${entries.length} files were taken.`);
  render();
  state.running ??= run().finally(() => { state.running = null; });
}

async function run() {
  for (;;) {
    const job = state.jobs.find((j) => j.status === "queued");
    if (!job) return;
    while (deps.busy()) await new Promise((resolve) => setTimeout(resolve, 250)); // the chat's answer first
    job.status = job.kind === "import" ? "importing" : "reading";
    render();
    try {
      if (job.kind === "import") {
        await importFile(job);
        continue;
      }
      const data = await job.file.arrayBuffer();
      const event = await deps.client().memoryAdd(COLLECTION, state.embedder,
        { name: job.name, data, media_type: job.file.type || null, metadata: { bytes: job.file.size } },
        { onProgress: (p) => progress(job, p) });
      state.jobs = state.jobs.filter((j) => j !== job); // the list shows it now
      accept(event);
      announce(`${job.name} was added: ${event.added.passages} passages.`);
    } catch (err) {
      Object.assign(job, { status: "failed", message: err.message || String(err) });
      render();
    }
  }
}

async function importFile(job) {
  const { imported, skipped } = await deps.client().memoryImport(COLLECTION, state.embedder, job.file,
    { name: job.name, onProgress: (p) => progress(job, p) });
  state.jobs = state.jobs.filter((j) => j !== job);
  await refreshDocuments();
  announce(`${job.name}: ${imported} document${imported === 1 ? "" : "s"} imported${skipped ? `, ${skipped} already here` : ""}.`);
}

// Export: the lines come from the worker in parts, joined in a Blob, downloaded as a .jsonl file.
async function exportDocuments() {
  state.exporting = true;
  render();
  try {
    const { blob, exported } = await deps.client().memoryExport(COLLECTION, state.embedder);
    const url = URL.createObjectURL(blob);
    const link = el("a");
    link.href = url;
    link.download = `${COLLECTION}-${new Date().toISOString().slice(0, 10)}.jsonl`;
    document.body.append(link);
    link.click();
    link.remove();
    setTimeout(() => URL.revokeObjectURL(url), 60_000);
    announce(`${exported} document${exported === 1 ? "" : "s"} exported.`);
  } catch (err) {
    state.error = err.message;
  } finally {
    state.exporting = false;
    render();
  }
}

function progress(job, p) {
  if (job.kind === "import") {  // the file's bytes sent; another model's export: its passages embedded again
    const again = p.type === "memory_progress" && p.phase === "embed";
    if (p.type === "memory_import" || again) Object.assign(job, { status: again ? "reembedding" : "importing", done: p.done, total: p.total });
    else if (p.type === "memory_progress" || p.type === "progress") job.status = "embedder";
    render();
    return;
  }
  if (p.type === "memory_progress") {
    job.status = p.phase === "read" ? "reading" : p.phase === "embedder" && p.done === 0 ? "embedder" : "embedding";
    Object.assign(job, p.phase === "embed" ? { done: p.done, total: p.total } : { done: 0, total: 0 }); // not the download's bytes
  } else if (p.type === "progress" && p.total > 0 && ["download", "verify", "upload"].includes(p.phase)) {
    Object.assign(job, { status: "embedder", done: p.done, total: p.total });
  }
  render();
}

// Documents cannot be downloaded again as models can: ask the browser to keep this origin's storage.
function askPersistence() {
  if (state.asked) return;
  state.asked = true;
  navigator.storage?.persist?.().catch(() => {});
}

async function remove(doc, button) {
  button.disabled = true;
  button.textContent = "Removing…";
  try {
    accept(await deps.client().memoryDelete(COLLECTION, state.embedder, doc.id));
    announce(`${doc.source} was removed.`);
  } catch (err) {
    state.error = err.message;
    render();
  }
}

// ---------- drops: while the panel is open, files dropped anywhere are documents ----------

const carriesFiles = (ev) => Array.from(ev.dataTransfer?.types || []).includes("Files");

function initDrop() {
  const mine = (ev) => !view.panel.hidden && carriesFiles(ev);
  for (const type of ["dragenter", "dragover", "dragleave"]) {
    window.addEventListener(type, (ev) => {
      if (!mine(ev)) return;
      ev.stopPropagation(); // before byo.js (a model) and attachments.js (a picture) see it
      ev.preventDefault();
      view.drop.classList.toggle("is-over", type !== "dragleave");
    }, true);
  }
  window.addEventListener("drop", (ev) => {
    if (!mine(ev)) return;
    ev.stopPropagation();
    ev.preventDefault();
    view.drop.classList.remove("is-over");
    // Entries must be taken while the event is dispatched; walking them may take longer.
    const entries = Array.from(ev.dataTransfer.items || [], (item) => item.webkitGetAsEntry?.()).filter(Boolean);
    const files = Array.from(ev.dataTransfer.files || []);
    (entries.length ? walk(entries) : Promise.resolve(files.map((file) => ({ path: file.name, file })))).then(enqueue,
      (err) => deps.showError("memory", `Couldn’t read the dropped files: ${err.message}`));
  }, true);
}

/** [{path, file}] of dropped entries: a file as it is, a folder's readable files at any depth. */
async function walk(entries, prefix = "", out = []) {
  for (const entry of entries) {
    if (out.length >= MAX_FILES + 1) break;
    if (entry.isFile && (!prefix || READABLE.test(entry.name))) {
      out.push({ path: prefix + entry.name, file: await fileOf(entry) });
    } else if (entry.isDirectory) {
      await walk(await children(entry), `${prefix}${entry.name}/`, out);
    }
  }
  return out;
}


// ---------- the view ----------

const STATUS = {
  queued: () => "Waiting…",
  reading: () => "Reading…",
  embedder: (j) => j.total ? `Loading the embedding model… ${Math.round((100 * j.done) / j.total)}%` : "Loading the embedding model…",
  embedding: (j) => (j.total ? `Embedding: ${j.done} of ${j.total} passages` : "Cutting it into passages…"),
  importing: (j) => (j.total ? `Importing: ${Math.round((100 * j.done) / j.total)}%` : "Importing…"),
  reembedding: (j) => (j.total ? `Another embedding model’s export: embedding ${j.done} of ${j.total} passages again`
    : "Another embedding model’s export: embedding it again…"),
  failed: (j) => (j.message.startsWith(`${j.name}: `) ? j.message.slice(j.name.length + 2) : j.message),
};

function render() {
  const docs = state.event?.documents || [];
  view.count.textContent = state.event ? `(${docs.length})` : "";
  if (view.panel.hidden) return;
  view.jobs.replaceChildren(...state.jobs.map(renderJob));
  view.jobs.hidden = !state.jobs.length;
  view.list.replaceChildren(...(docs.length ? docs.map(renderDocument)
    : [el("li", "store-empty", state.error ? `Couldn’t read your documents: ${state.error}`
      : state.event ? "No documents yet. Add files or a folder: text, Markdown, HTML or PDF." : "Reading…")]));
  const { bytes = 0, usage = 0, quota = 0, damaged = [] } = state.event || {};
  view.usage.textContent = !state.event ? "" : quota > 0
    ? `Your documents take ${fmtBytes(bytes)} · this site uses ${fmtBytes(usage)} of ${fmtBytes(quota)}`
    : `Your documents take ${fmtBytes(bytes)}`;
  view.exportButton.disabled = state.exporting || !docs.length;
  view.exportButton.textContent = state.exporting ? "Exporting…" : "Export";
  view.note.hidden = !damaged.length;
  view.note.textContent = damaged.length ? `Some stored records could not be read (${damaged.join("; ")}); the others are here.` : "";
}

function renderJob(job) {
  const li = el("li", `doc-job is-${job.status}`);
  li.dataset.testid = "documents-job";
  li.dataset.status = job.status;
  li.append(el("div", "doc-name", job.name), el("div", "doc-status", STATUS[job.status](job)));
  if (["reading", "embedder", "embedding", "importing", "reembedding"].includes(job.status)) { // reading: a long PDF takes a while
    const bar = el("div", `bar${job.total ? "" : " indeterminate"}`);
    const fill = el("div", "bar-fill");
    fill.style.width = job.total ? `${(100 * job.done) / job.total}%` : "";
    bar.append(fill);
    li.append(bar);
  }
  if (job.status === "failed") {
    const dismiss = el("button", "link-button", "Dismiss");
    dismiss.type = "button";
    dismiss.addEventListener("click", () => { state.jobs = state.jobs.filter((j) => j !== job); render(); });
    li.append(dismiss);
  }
  return li;
}

function renderDocument(doc) {
  const li = el("li", "store-item");
  li.dataset.testid = "documents-item";
  li.dataset.id = doc.id;
  const size = doc.metadata?.bytes ?? doc.chars;
  li.append(el("div", "store-name", doc.source),
    el("div", "store-meta", `${doc.passages} passage${doc.passages === 1 ? "" : "s"} · ${fmtBytes(size)}`));
  const remove_ = el("button", "btn btn-ghost btn-sm", "Remove");
  remove_.type = "button";
  remove_.dataset.testid = "documents-remove";
  remove_.setAttribute("aria-label", `Remove ${doc.source} from your documents`);
  remove_.addEventListener("click", () => remove(doc, remove_));
  const actions = el("div", "store-actions");
  actions.append(remove_);
  li.append(actions);
  return li;
}
