// Offline support: registers the service worker (/sw.js, static/sw.js) and, when a new version of the
// app has finished installing in the background, offers "A new version of Wisp is ready — Reload".
// Reload asks the waiting worker to take over (skipWaiting) and reloads once it controls the page.

export function registerServiceWorker() {
  if (!("serviceWorker" in navigator) || !window.isSecureContext) return;
  window.addEventListener("load", async () => {
    let registration;
    try {
      registration = await navigator.serviceWorker.register("/sw.js", { scope: "/" });
    } catch (err) {
      console.warn("service worker not registered:", err?.message ?? err); // the page works without it
      return;
    }
    const offer = () => {
      if (registration.waiting && navigator.serviceWorker.controller) showUpdate(registration.waiting);
    };
    offer();
    registration.addEventListener("updatefound", () => {
      const installing = registration.installing;
      installing?.addEventListener("statechange", () => { if (installing.state === "installed") offer(); });
    });
  });
}

function showUpdate(waiting) {
  if (document.getElementById("update-toast")) return;
  const toast = document.createElement("div");
  toast.id = "update-toast";
  toast.dataset.testid = "update-toast";
  toast.setAttribute("role", "status");
  toast.style.cssText = "position:fixed;left:50%;bottom:96px;transform:translateX(-50%);z-index:50;display:flex;"
    + "gap:12px;align-items:center;padding:10px 12px 10px 16px;border-radius:12px;background:var(--surface,#fff);"
    + "color:inherit;box-shadow:0 6px 24px rgb(0 0 0 / .18);border:1px solid var(--surface-3,#ddd);font-size:14px";
  const text = document.createElement("span");
  text.textContent = "A new version of Wisp is ready.";
  const button = document.createElement("button");
  button.type = "button";
  button.className = "btn btn-primary";
  button.textContent = "Reload";
  button.addEventListener("click", () => {
    button.disabled = true;
    navigator.serviceWorker.addEventListener("controllerchange", () => window.location.reload(), { once: true });
    waiting.postMessage({ type: "skip-waiting" });
  });
  toast.append(text, button);
  document.body.append(toast);
}
