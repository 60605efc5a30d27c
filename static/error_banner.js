// The error banner: a title for each kind of failure (the worker's error kinds, plus "crash" and
// "models" from the page itself) above the message; some kinds add a hint and an action button.
import { ui, $ } from "./ui.js";
import { fmtBytes } from "./format.js";

const ERROR_TITLES = {
  load: "Couldn’t load the model",
  generate: "The answer failed",
  "no-webgpu": "WebGPU isn’t available",
  internal: "The engine hit an internal error",
  crash: "The engine stopped unexpectedly",
  models: "Couldn’t list the models",
  quota: "Not enough storage on this device",
  store: "The model store on this device failed",
  "device-lost": "The GPU stopped working",
  "gpu-reset": "The GPU was reset",  // a notice: the worker reloads the model by itself
  picture: "Couldn’t attach the picture",  // attachments.js: not a picture, too large, or a model that reads none
  memory: "Your documents couldn’t be used",  // documents.js, and a chat's recall (web/memory.py)
  document: "Couldn’t read a document",
  speech: "Speech didn’t work",  // microphone.js and speaker.js (web/speech.py's errors)
};

const hint = $("error-hint");
const action = $("error-action");
let onAction = null;
action.addEventListener("click", () => { if (onAction) onAction(); });

// "needs 4200 MB, 812 MB available" (the store's quota error) → {needed, available} in bytes.
const UNITS = { B: 1, KB: 1e3, MB: 1e6, GB: 1e9, TB: 1e12, KIB: 1024, MIB: 2 ** 20, GIB: 2 ** 30 };
export function parseQuota(message) {
  const m = /needs\s+([\d.,]+)\s*([KMGT]?i?B)\b.*?([\d.,]+)\s*([KMGT]?i?B)\s+(?:are\s+|is\s+)?available/i.exec(message || "");
  if (!m) return null;
  const bytes = (n, u) => Number(n.replace(/,/g, "")) * (UNITS[u.toUpperCase()] ?? 1);
  return { needed: bytes(m[1], m[2]), available: bytes(m[3], m[4]) };
}

/** showError(kind, message, {action: {label, run}}): the banner; "quota" explains itself and offers
 *  the Storage panel when opts.openStorage is given. */
export function showError(kind, message, opts = {}) {
  ui.errorTitle.textContent = ERROR_TITLES[kind] || ERROR_TITLES.internal;
  let text = message;
  let hintText = "";
  let act = opts.action || null;
  if (kind === "quota") {
    const q = parseQuota(message);
    if (q) text = `The model needs ${fmtBytes(q.needed)} of storage, but only ${fmtBytes(q.available)} is available.`;
    hintText = "Delete a stored model in the Storage panel to make room, or free up disk space, then press Load again.";
    if (opts.openStorage) act = { label: "Open Storage", run: opts.openStorage };
  }
  ui.errorMessage.textContent = text;
  hint.textContent = hintText;
  hint.hidden = !hintText;
  action.hidden = !act;
  action.textContent = act ? act.label : "";
  onAction = act ? act.run : null;
  ui.banner.dataset.kind = kind;
  ui.banner.hidden = false;
}
export function hideError() { ui.banner.hidden = true; }

/** The notice of a `device_lost` event (py_engine/web/recovery.py): the worker reloads the model on a
 *  new device, the conversation stays; "failed" is an error with what to do next. */
export function showDeviceLost(event, { loading = false } = {}) {
  if (event.status === "failed") {
    showError("device-lost", `The model could not be reloaded: ${event.message}`);
    hint.textContent = "Close other tabs that use the GPU, then press Load to try again.";
    hint.hidden = false;
    return;
  }
  const what = loading ? "Loading the model again" : "Reloading the model";
  showError("gpu-reset", event.status === "reloading"
    ? `${what} from this device’s storage…${loading ? "" : " The conversation is kept."}`
    : "The model was reloaded; the conversation is kept.");
}
