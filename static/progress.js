// The loading card: the boot → fetch → upload → compile stepper, the progress bar and the line
// that narrates what the worker is doing (its `progress` events).
import { ui } from "./ui.js";
import { fmtProgressBytes } from "./format.js";

const PHASES = ["boot", "fetch", "upload", "compile"];

function narrate({ phase, done = 0, total = 0 }) {
  switch (phase) {
    case "boot": return "Starting Python…";
    case "fetch": return total ? `Downloading weights… ${fmtProgressBytes(done, total)}` : "Downloading weights…";
    case "upload": return total ? `Uploading weights to the GPU… ${fmtProgressBytes(done, total)}` : "Uploading weights to the GPU…";
    case "compile": return total ? `Compiling kernels… ${done} / ${total}` : "Compiling kernels…";
    default: return `${String(phase).charAt(0).toUpperCase()}${String(phase).slice(1)}…`;
  }
}

export function resetProgress(model) {
  ui.progressModel.textContent = model.name;
  ui.progressElapsed.textContent = "0 s";
  for (const li of ui.progress.querySelectorAll("[data-phase]")) li.className = li.dataset.phase === "boot" ? "active" : "";
  setBar(null);
  ui.progressLabel.textContent = narrate({ phase: "boot" });
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
  const at = PHASES.indexOf(p.phase);
  for (const li of ui.progress.querySelectorAll("[data-phase]")) {
    const i = PHASES.indexOf(li.dataset.phase);
    li.className = at < 0 ? li.className : i < at ? "done" : i === at ? "active" : "";
  }
  setBar(p.total > 0 ? p.done / p.total : null);
  ui.progressLabel.textContent = narrate(p);
}
