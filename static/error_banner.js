// The error banner: a title for each kind of failure (the worker's error kinds, plus "crash" and
// "models" from the page itself) above the message.
import { ui } from "./ui.js";

const ERROR_TITLES = {
  load: "Couldn’t load the model",
  generate: "The answer failed",
  "no-webgpu": "WebGPU isn’t available",
  internal: "The engine hit an internal error",
  crash: "The engine stopped unexpectedly",
  models: "Couldn’t list the models",
};

export function showError(kind, message) {
  ui.errorTitle.textContent = ERROR_TITLES[kind] || ERROR_TITLES.internal;
  ui.errorMessage.textContent = message;
  ui.banner.dataset.kind = kind;
  ui.banner.hidden = false;
}
export function hideError() { ui.banner.hidden = true; }
