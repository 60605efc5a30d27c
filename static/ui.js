// The page's elements, looked up once, and the two helpers every view module uses: build an
// element, and speak to screen readers.

export const $ = (id) => document.getElementById(id);
export const ui = {
  select: $("model-select"), load: $("load-button"), gpuPanel: $("gpu-panel"), gpuBody: $("gpu-body"),
  settingsButton: $("settings-button"), settings: $("settings"), settingsForm: $("settings-form"),
  settingsReset: $("settings-reset"), newChat: $("new-chat"), banner: $("error-banner"),
  errorTitle: $("error-title"), errorMessage: $("error-message"), errorDismiss: $("error-dismiss"),
  main: $("main"), help: $("webgpu-help"), welcome: $("welcome"), welcomeSize: $("welcome-size"),
  progress: $("progress"), progressModel: $("progress-model"), progressElapsed: $("progress-elapsed"),
  progressBar: $("progress-bar"), progressFill: $("progress-fill"), progressLabel: $("progress-label"),
  ready: $("ready"), readyTitle: $("ready-title"), readySub: $("ready-sub"), suggestions: $("suggestions"),
  messages: $("messages"), composer: $("composer"), prompt: $("prompt"), send: $("send-button"),
  stop: $("stop-button"), announcer: $("announcer"), fallback: $("fallback-notice"), fallbackText: $("fallback-text"),
};

export function el(tag, className, text) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text) node.textContent = text;
  return node;
}

// Cleared first and set on the next frame so that repeating the same text is announced again.
export function announce(text) {
  ui.announcer.textContent = "";
  requestAnimationFrame(() => { ui.announcer.textContent = text; });
}
