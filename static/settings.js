// The sampling settings popover. The values persist in localStorage ("wisp.sampling"); this
// module owns them, and app.js asks requestSampling() for what each generate sends.
import { ui } from "./ui.js";

const DEFAULT_SAMPLING = { temperature: 0.2, top_p: 0.9, repetition_penalty: 1.1, max_new_tokens: 512 };

let sampling = readSampling();

function readSampling() {
  try {
    const saved = JSON.parse(localStorage.getItem("wisp.sampling") || "{}");
    const out = { ...DEFAULT_SAMPLING };
    for (const k of Object.keys(DEFAULT_SAMPLING)) if (Number.isFinite(saved[k])) out[k] = saved[k];
    return out;
  } catch {
    return { ...DEFAULT_SAMPLING };
  }
}

export function requestSampling() {
  const s = sampling;
  // No seed: each answer draws fresh (a JS null would reach Python as JsNull, not None).
  return {
    temperature: s.temperature, top_k: 0, top_p: s.top_p, repetition_penalty: s.repetition_penalty,
    max_new_tokens: Math.max(1, Math.round(s.max_new_tokens)),
  };
}

export function fillSettings() {
  for (const [k, v] of Object.entries(sampling)) {
    const input = ui.settingsForm.elements[k];
    input.value = String(v);
    const out = ui.settingsForm.querySelector(`output[data-for="${k}"]`);
    if (out) out.value = Number(v).toFixed(2);
  }
}

export function onSettingsInput(ev) {
  const input = ev.target;
  if (!(input.name in DEFAULT_SAMPLING)) return;
  const v = Number(input.value);
  if (!Number.isFinite(v)) return;
  sampling[input.name] = input.name === "max_new_tokens" ? Math.max(1, Math.min(8192, Math.round(v))) : v;
  const out = ui.settingsForm.querySelector(`output[data-for="${input.name}"]`);
  if (out) out.value = v.toFixed(2);
  try { localStorage.setItem("wisp.sampling", JSON.stringify(sampling)); } catch { /* private mode */ }
}

export function resetSettings() {
  sampling = { ...DEFAULT_SAMPLING };
  try { localStorage.removeItem("wisp.sampling"); } catch { /* ignore */ }
  fillSettings();
}

export function toggleSettings(open = ui.settings.hidden) {
  ui.settings.hidden = !open;
  ui.settingsButton.setAttribute("aria-expanded", String(open));
  if (open) {
    ui.gpuPanel.open = false;
    ui.settingsForm.elements.temperature.focus();
  }
}
