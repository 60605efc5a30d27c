// "Wisp is running in another tab": where tabs cannot share one engine (no SharedWorker:
// static/engine_link.js's LockLink), the tabs that do not own it say so, with a button to take
// it over. The banner is made here (beside the fallback notice) so index.html stays as it is.
// body[data-engine] says the page's mode (engine_link.js engineTabs.mode), for the tests.
import { engineTabs } from "./engine_link.js";

/** Show the notice while another tab owns the engine; onTakeOver() runs after the button asked
 *  the owner to let go (the page loads its model: the load waits until the engine is here). */
export function initTabNotice({ onTakeOver }) {
  const banner = document.createElement("div");
  banner.id = "tab-notice";
  banner.className = "banner notice";
  banner.dataset.testid = "tab-notice";
  banner.setAttribute("role", "status");
  banner.hidden = true;
  const icon = document.getElementById("fallback-notice")?.querySelector(".banner-icon")?.cloneNode(true);  // the "i"
  const text = document.createElement("div");
  text.className = "banner-text";
  const title = document.createElement("strong");
  title.textContent = "Wisp is running in another tab";
  const detail = document.createElement("span");
  detail.textContent = "This browser cannot share one engine between tabs, so only one tab holds the model. ";
  const button = document.createElement("button");
  button.type = "button";
  button.className = "btn btn-ghost btn-sm";
  button.dataset.testid = "tab-take-over";
  button.textContent = "Use Wisp in this tab";
  button.addEventListener("click", () => {
    button.disabled = true;
    engineTabs.takeOver();
    onTakeOver();
  });
  text.append(title, detail, button);
  banner.append(...(icon ? [icon] : []), text);
  const anchor = document.getElementById("fallback-notice") || document.getElementById("main");
  anchor?.after(banner);

  const render = () => {
    document.body.dataset.engine = engineTabs.mode;
    banner.hidden = engineTabs.mode !== "elsewhere";
    if (banner.hidden) button.disabled = false;
  };
  engineTabs.addEventListener("change", render);
  render();
}
