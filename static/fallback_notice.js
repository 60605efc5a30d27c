// The notice a CPU fallback adapter gets before any load: on one, a small model takes minutes to
// its first token, and nothing else on the page says why. It names the adapter, estimates the
// selected model's pace from a short probe (fallback_probe.js) and says what would be faster.
// body[data-adapter] says what the check found ("fallback" | "gpu"), for the tests.
import { ui } from "./ui.js";
import { fallbackAdapter, secondsPerToken, weightBytesPerSecond } from "./fallback_probe.js";

let found = null;  // {name, rate} on a fallback adapter; rate: null while the probe runs, 0 if it failed

/** Check the adapter (and probe it, if it is a fallback); render() shows what was found. */
export async function checkAdapter(render) {
  const adapter = await fallbackAdapter();
  document.body.dataset.adapter = adapter ? "fallback" : "gpu";
  if (!adapter) return;
  const info = adapter.info || {};
  found = { name: info.description || info.device || "", rate: null };  // Chrome may hide both (the vendor alone says little)
  render();
  found.rate = await weightBytesPerSecond(adapter).catch(() => 0);
  render();
}

/** Shown while `show` (the page's choice: no model loaded yet), about the selected model. */
export function renderFallbackNotice(model, show) {
  ui.fallback.hidden = !found || !show;
  if (!found) return;
  const text = `${found.name ? `Its adapter, ${found.name}, is` : "Its adapter is"} a fallback, not a GPU: `
    + `answers will be slow. ${estimate(model)} For usable speed, open Wisp in a browser or on a device `
    + "with GPU-enabled WebGPU.";
  if (ui.fallbackText.textContent !== text) ui.fallbackText.textContent = text;
}

function estimate(model) {
  if (found.rate === null) return "Measuring this adapter…";
  if (!found.rate || !model?.size) return "";
  const seconds = secondsPerToken(model.size, found.rate);
  const pace = seconds >= 1 ? `${seconds < 10 ? seconds.toFixed(1) : Math.round(seconds)} s per token`
    : `${(1 / seconds).toFixed(1)} tokens per second`;
  return `A short test here puts ${model.name} at about ${pace} (a rough estimate).`;
}
