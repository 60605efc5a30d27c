// The model picker: every model with its size, stored ones marked "on this device" (the Storage
// panel's knowledge), and the welcome line about the chosen one. The list is the server's models
// plus those the user brought (byo.js); app.js owns it and passes it in.
import { ui } from "./ui.js";
import { fmtSize } from "./format.js";
import { storedState } from "./storage.js";

/** Fill the picker; the choice stays where it was, else goes to `choose`, else the default model. */
export function fillPicker(models, choose = null) {
  if (!models.length) return;
  const current = choose ?? ui.select.value;
  const keep = models.some((m) => m.id === current);
  ui.select.replaceChildren(...models.map((m) => {
    const stored = storedState(m.id);
    const mark = stored === "complete" ? " · on this device" : stored === "partial" ? " · partly on this device" : "";
    const o = new Option(`${m.name} · ${fmtSize(m.size)}${mark}`, m.id);
    o.dataset.stored = stored || "";
    if (m.description) o.title = m.description;
    o.selected = keep ? m.id === current : !!m.default;
    return o;
  }));
}

export function updateWelcome(m) {
  const about = !m ? "" : m.description ? `${m.description}.` : `${m.name}: ${fmtSize(m.size)} of weights.`;
  const stored = m && storedState(m.id) === "complete" ? " Stored on this device: it loads without downloading." : "";
  ui.welcomeSize.textContent = about + stored;
}
