// The GPU panel: which adapter runs the model, its features and limits (from the worker's `loaded`).
import { ui, el } from "./ui.js";
import { fmtBytes, fmtLimit, fmtMs } from "./format.js";

const CHIP_ICON = '<svg class="icon" aria-hidden="true" viewBox="0 0 24 24"><path d="M9 2v2H7a3 3 0 0 0-3 3v2H2v2h2v2H2v2h2v2a3 3 0 0 0 3 3h2v2h2v-2h2v2h2v-2h2a3 3 0 0 0 3-3v-2h2v-2h-2v-2h2V9h-2V7a3 3 0 0 0-3-3h-2V2h-2v2h-2V2zM7 6h10a1 1 0 0 1 1 1v10a1 1 0 0 1-1 1H7a1 1 0 0 1-1-1V7a1 1 0 0 1 1-1m2 3v6h6V9z"/></svg>';

// pyodideMs: how long the worker took to start Python (its `booted` event), when known.
export function renderGpu(loaded, model = null, wallMs = 0, pyodideMs = null) {
  if (!loaded) {
    ui.gpuBody.replaceChildren(el("p", "muted", "Load a model to see which GPU runs it."));
    return;
  }
  const adapter = loaded.adapter || {};
  const features = [...(adapter.features || [])].sort();
  const limits = Object.entries(adapter.limits || {}).sort(([a], [b]) => a.localeCompare(b));
  const extra = Object.entries(adapter).filter(([k, v]) => !["name", "features", "limits"].includes(k) && v !== "" && v !== null && typeof v !== "object");

  const head = el("div", "gpu-head");
  const badge = el("span", "badge", "");
  badge.innerHTML = CHIP_ICON;
  head.append(badge, el("strong", "gpu-name", adapter.name || "Unknown adapter"));
  const kv = el("dl", "kv");
  const row = (k, v) => kv.append(el("dt", "", k), el("dd", "", v));
  if (model) row("Model", model.name);
  row("Loaded in", fmtMs(loaded.load_ms ?? wallMs));
  if (pyodideMs != null) row("Python started in", fmtMs(pyodideMs));
  row("Half precision", features.includes("shader-f16") ? "yes (shader-f16)" : "no (f32 kernels)");
  if (loaded.wasm_memory_bytes) row("Python memory", fmtLimit("bytes", loaded.wasm_memory_bytes));
  if (loaded.gpu_bytes) {  // the footprint py_engine/runtime/memory.py checked before the upload
    const parts = Object.entries(loaded.gpu_bytes);
    const total = parts.reduce((sum, [, v]) => sum + v, 0);
    row("GPU memory", `${fmtBytes(total)} (${parts.map(([k, v]) => `${k.replace("_", " ")} ${fmtBytes(v)}`).join(", ")})`);
  }
  if (loaded.context) row("Context", `${loaded.context.toLocaleString("en-US")} tokens`);
  if (loaded.kv_cache) row("KV cache (K/V)", loaded.kv_cache);
  if (adapter.submit) row("Submits", adapter.submit.reason || adapter.submit.strategy);
  if (adapter.workarounds) row("WebKit measures", adapter.workarounds.length ? adapter.workarounds.join(", ") : "none");
  for (const [k, v] of extra) row(k.replace(/([A-Z])/g, " $1").replace(/^./, (c) => c.toUpperCase()), String(v));

  const chips = el("ul", "chips");
  chips.setAttribute("aria-label", "Adapter features");
  for (const f of features) chips.append(el("li", f === "shader-f16" ? "chip chip-accent" : "chip", f));
  if (!features.length) chips.append(el("li", "muted", "none reported"));

  const table = el("table", "limits");
  const tbody = el("tbody", "", "");
  for (const [k, v] of limits) {
    const tr = el("tr", "", "");
    tr.append(el("th", "", k), el("td", "", fmtLimit(k, v)));
    tbody.append(tr);
  }
  table.append(tbody);

  ui.gpuBody.replaceChildren(head, kv, el("h3", "", `Features (${features.length})`), chips,
    el("h3", "", `Limits (${limits.length})`), limits.length ? table : el("p", "muted", "none reported"));
}
