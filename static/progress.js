// The loading card: the stepper (boot → store → download → verify → upload → compile), the progress
// bar and the line that narrates what the worker is doing (its `progress` events). It is never silent:
// when no progress event arrives for STALL_MS, the line says what the load is waiting for, with a timer.
import { ui } from "./ui.js";
import { fmtProgressBytes, fmtSpeed, fmtEta } from "./format.js";

export const PHASES = ["boot", "store", "download", "verify", "upload", "compile"];
export const STALL_MS = 3000;

// What each phase waits on, for the stall line ("Waiting for … · 5 s").
const WAITING_FOR = {
  boot: "Python to start (the first visit downloads it)",
  store: "this device’s storage to answer",
  download: "the server to send more weights",
  verify: "the checksum of the stored weights",
  upload: "the GPU to take the weights",
  compile: "the GPU driver to compile the kernels",
};

// local: the model is the user's files on this device (byo.js: a picked or dropped folder or file),
// which the "download" phase reads from the disk into the store, not from a server.
export function narrate(p, local = false) {
  const { done = 0, total = 0 } = p;
  switch (p.phase) {
    case "boot": return "Starting Python…";
    case "store": return "Checking this device for the model…";
    case "download": {
      const doing = local ? "Reading weights from your disk…" : "Downloading weights…";
      if (!total) return doing;
      const parts = [`${doing} ${fmtProgressBytes(done, total)}`];
      if (p.bytes_per_s > 0) parts.push(fmtSpeed(p.bytes_per_s));
      if (p.eta_s != null && Number.isFinite(p.eta_s) && done < total) parts.push(fmtEta(p.eta_s));
      return parts.join(" · ");
    }
    case "verify": return total ? `Verifying… ${Math.floor((100 * done) / total)} %` : "Verifying…";
    case "upload": return total ? `Uploading to the GPU… ${fmtProgressBytes(done, total)}` : "Uploading to the GPU…";
    case "compile": return total ? `Compiling kernels… ${done} / ${total}` : "Compiling kernels…";
    default: return `${String(p.phase).charAt(0).toUpperCase()}${String(p.phase).slice(1)}…`;
  }
}

export function stallText(phase, seconds, local = false) {
  const what = local && phase === "download" ? "your disk to give more weights" : WAITING_FOR[phase] || "the engine";
  return `Waiting for ${what}… no progress for ${seconds} s`;
}

const run = { t0: 0, lastAt: 0, last: { phase: "boot" }, text: "", seen: new Set(), timer: null, local: false };

/** Show the card for a new load and start its clocks (elapsed, stall watch). */
export function resetProgress(model) {
  stopProgress();
  ui.progressModel.textContent = model.name;
  run.local = model.source === "local";
  ui.progressElapsed.textContent = "0 s";
  run.t0 = run.lastAt = performance.now();
  run.last = { phase: "boot" };
  run.seen = new Set(["boot"]);
  setSteps("boot");
  setBar(null);
  setLabel(narrate(run.last, run.local), false);
  run.timer = setInterval(tick, 250);
}

/** Stop the clocks (the load finished or failed). */
export function stopProgress() {
  if (run.timer) clearInterval(run.timer);
  run.timer = null;
}

function tick() {
  const now = performance.now();
  ui.progressElapsed.textContent = `${Math.floor((now - run.t0) / 1000)} s`;
  const quiet = now - run.lastAt;
  if (quiet >= STALL_MS) setLabel(stallText(run.last.phase, Math.floor(quiet / 1000), run.local), true);
}

function setLabel(text, stalled) {
  if (ui.progressLabel.textContent !== text) ui.progressLabel.textContent = text;
  ui.progress.classList.toggle("is-stalled", stalled);
  if (stalled) ui.progressLabel.dataset.stalled = ""; else delete ui.progressLabel.dataset.stalled;
}

function setSteps(phase) {
  const at = PHASES.indexOf(phase);
  if (at < 0) return;
  for (const li of ui.progress.querySelectorAll("[data-phase]")) {
    const i = PHASES.indexOf(li.dataset.phase);
    // a step the load passed without an event of its own (a stored model needs no download) is "skipped"
    li.className = i < at ? (run.seen.has(li.dataset.phase) ? "done" : "skipped") : i === at ? "active" : "";
  }
}

function setBar(fraction) {
  ui.progressBar.classList.toggle("indeterminate", fraction === null);
  if (fraction === null) {
    ui.progressBar.removeAttribute("aria-valuenow");
    ui.progressFill.style.width = "";
  } else {
    const pct = Math.max(0, Math.min(100, fraction * 100));
    ui.progressBar.setAttribute("aria-valuenow", pct.toFixed(0));
    ui.progressFill.style.width = `${pct}%`;
  }
}

export function onProgress(p) {
  const now = performance.now();
  const phase = p.phase;
  run.lastAt = now;
  run.last = p;
  run.seen.add(phase);
  setSteps(phase);
  setBar(p.total > 0 ? p.done / p.total : null);
  setLabel(narrate(p, run.local), false);
}
