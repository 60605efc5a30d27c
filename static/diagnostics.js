// "Check this device": a dialog that runs the engine's GPU self-tests (py_engine/selftest/suite.py,
// through client.diagnose) and shows each result as it arrives, the adapter's features and limits,
// and the submit strategy a load would use. Made for devices with no console (an iPad): everything
// is on the page, and the plain-text report can be copied with a button or selected by hand.
import { $, el, ui, announce } from "./ui.js";
import { fmtLimit, fmtMs } from "./format.js";

const view = {
  open: $("diagnostics-open"), dialog: $("diagnostics"), close: $("diagnostics-close"),
  status: $("diagnostics-status"), rows: $("diagnostics-rows"), device: $("diagnostics-device"),
  limits: $("diagnostics-limits"), copy: $("diagnostics-copy"), rerun: $("diagnostics-rerun"),
  copied: $("diagnostics-copied"), report: $("diagnostics-report"),
};
const BYTE_LIMITS = new Set(["max_storage_binding", "max_buffer_size", "max_workgroup_storage"]);

// The last run: results so far, the final `diagnostics` event, or the error that ended it.
const run = { running: false, results: [], final: null, error: null, startedAt: null };
let getClient = null;

/** Wire the button and the dialog. client(): the page's WispClient (started on demand). */
export function initDiagnostics({ client }) {
  getClient = client;
  view.open.addEventListener("click", () => {
    ui.gpuPanel.open = false;
    if (!view.dialog.open) view.dialog.showModal();
    if (!run.running) start();
  });
  view.close.addEventListener("click", () => view.dialog.close());
  view.dialog.addEventListener("close", () => ui.gpuPanel.querySelector("summary").focus());
  view.rerun.addEventListener("click", () => { if (!run.running) start(); });
  view.copy.addEventListener("click", copyReport);
}

async function start() {
  Object.assign(run, { running: true, results: [], final: null, error: null, startedAt: new Date() });
  setState("running", "Starting the engine and the GPU…");
  render();
  try {
    run.final = await getClient().diagnose({
      onResult: (result) => {
        run.results.push(result);
        setState("running", `Running the GPU self-tests… ${run.results.length} finished`);
        render();
      },
    });
    run.results = run.final.results;
    const failed = run.results.filter((r) => !r.ok).length;
    setState("done", failed ? `${failed} of ${run.results.length} tests failed.` : `All ${run.results.length} tests passed.`);
  } catch (err) {
    run.error = err;
    setState("error", `The check could not finish: ${err.message}`);
  } finally {
    run.running = false;
    render();
    announce(view.status.textContent);
  }
}

function setState(state, text) {
  view.dialog.dataset.state = state;
  view.status.textContent = text;
  view.status.classList.toggle("is-bad", state === "error" || (state === "done" && run.results.some((r) => !r.ok)));
}

function render() {
  view.rows.replaceChildren(...run.results.map(resultRow));
  const adapter = run.final?.adapter;
  view.device.replaceChildren(...(adapter ? deviceRows(adapter) : [el("dd", "muted", run.running ? "Waiting for the results…" : "Unknown")]));
  const limits = Object.entries(adapter?.limits || {}).sort(([a], [b]) => a.localeCompare(b));
  view.limits.tBodies[0].replaceChildren(...limits.map(([k, v]) => {
    const tr = el("tr", "", "");
    tr.append(el("th", "", k), el("td", "", BYTE_LIMITS.has(k) ? fmtLimit("bytes", v) : fmtLimit(k, v)));
    return tr;
  }));
  view.report.textContent = reportText();
  view.copy.disabled = run.running;
  view.rerun.disabled = run.running;
  view.copied.textContent = "";
}

function resultRow(result) {
  const tr = el("tr", result.ok ? "is-ok" : "is-bad", "");
  tr.dataset.testid = "diagnostics-result";
  tr.dataset.ok = String(result.ok);
  const name = el("th", "", "");
  name.scope = "row";
  name.append(el("span", "diag-name", result.name), el("span", "diag-detail", result.detail));
  tr.append(name, el("td", "diag-verdict", result.ok ? "Passed" : "Failed"), el("td", "diag-ms", fmtMs(result.ms)));
  return tr;
}

function deviceRows(adapter) {
  const submit = adapter.submit || {};
  const rows = [
    ["Adapter", adapter.name || "Unknown"],
    ["Features", (adapter.features || []).join(", ") || "none"],
    ["Submit strategy", submitText(submit)],
    ["WebKit", adapter.webkit ? `yes (${adapter.platform_reason})` : "no"],
    ["Workarounds", (adapter.workarounds || []).join(", ") || "none"],
  ];
  return rows.flatMap(([k, v]) => {
    const dd = el("dd", "", v);
    if (k === "Submit strategy") dd.dataset.testid = "diagnostics-submit";
    return [el("dt", "", k), dd];
  });
}

const submitText = (s) => (s.strategy ? `${s.strategy}${s.group ? ` (${s.group} dispatches per command buffer)` : ""}` : "unknown");

/** The plain-text report: what a bug report about this device needs, results so far included. */
export function reportText() {
  const { results, final, error } = run;
  if (!run.startedAt) return "";
  const adapter = final?.adapter || {};
  const passed = results.filter((r) => r.ok).length;
  const lines = [
    `Wisp device check: ${run.running ? "running, " : ""}${passed} of ${results.length} passed`,
    `Date: ${run.startedAt.toISOString()}`,
    `Browser: ${navigator.userAgent}`,
    `Page: ${location.origin}${location.pathname}${location.search}`,
  ];
  if (error) lines.push(`Error (${error.kind || "error"}): ${error.message}`);
  if (final) {
    const submit = adapter.submit || {};
    lines.push(`Adapter: ${adapter.name}`, `Features: ${(adapter.features || []).join(", ") || "none"}`,
      `Submit: ${submitText(submit)}${submit.reason ? ` - ${submit.reason}` : ""}`,
      `WebKit: ${adapter.webkit ? `yes (${adapter.platform_reason})` : "no"}`,
      `Workarounds: ${(adapter.workarounds || []).join(", ") || "none"}`, "Limits:",
      ...Object.entries(adapter.limits || {}).sort(([a], [b]) => a.localeCompare(b)).map(([k, v]) => `  ${k} = ${v}`));
  }
  lines.push("Results:", ...results.map((r) => `  ${r.ok ? "PASS" : "FAIL"} ${r.name} (${Math.round(r.ms)} ms): ${r.detail}`));
  return lines.join("\n");
}

// The clipboard API needs a secure context and may be refused; then the report is selected so
// that the system's own Copy works (and execCommand("copy") is tried on it).
async function copyReport() {
  const text = view.report.textContent;
  try {
    await navigator.clipboard.writeText(text);
    view.copied.textContent = "Copied to the clipboard.";
    return;
  } catch {
    const range = document.createRange();
    range.selectNodeContents(view.report);
    const selection = getSelection();
    selection.removeAllRanges();
    selection.addRange(range);
    let copied = false;
    try { copied = document.execCommand("copy"); } catch { copied = false; }
    view.copied.textContent = copied ? "Copied to the clipboard." : "The clipboard is not available: the report below is selected, copy it from there.";
  }
}
