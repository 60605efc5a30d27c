// The chat page: model picker, narrated loading, streamed answers. This module is the page's state
// machine (idle → loading → ready ⇄ generating, and ready → recovering → ready while the worker
// reloads the model after a GPU reset) and its event wiring; the views live beside it: ui.js
// (elements), progress.js (the loading card), gpu_panel.js, error_banner.js, fallback_notice.js (a
// CPU fallback adapter), messages.js (the conversation), settings.js (sampling), format.js (numbers),
// attachments.js (a message's pictures, for a model that reads them), documents.js (the Documents
// panel and "Use my documents") and citations.js (an answer's sources).
// Protocol handling lives in client.js.
import { fetchModels, sharedClient, webgpuSupport } from "./client.js";
import { $, ui, announce } from "./ui.js";
import { fmtMs, fmtSize } from "./format.js";
import { resetProgress, onProgress, stopProgress } from "./progress.js";
import { renderGpu } from "./gpu_panel.js";
import { showError, hideError, showDeviceLost } from "./error_banner.js";
import { addUserMessage, addAssistantMessage, scrollToBottom, statsLine } from "./messages.js";
import { fillSettings, onSettingsInput, requestSampling, resetSettings, toggleSettings } from "./settings.js";
import { registerServiceWorker } from "./pwa.js";
import { initStorage, refreshStore, toggleStorage, storageOpen } from "./storage.js";
import { initDiagnostics } from "./diagnostics.js";
import { fillPicker, updateWelcome } from "./picker.js";
import { broughtModels, initByo } from "./byo.js";
import { checkAdapter, renderFallbackNotice } from "./fallback_notice.js";
import { clearPictures, initAttachments, pictureCount, takePictures } from "./attachments.js";
import { documentsIdle, documentsRequest, initDocuments, setModels, toggleDocuments } from "./documents.js";
import { initCitations, showCitations } from "./citations.js";
import { initMicrophone, renderMicrophone } from "./microphone.js";
import { initSpeaker, stopReading, withSpeaker } from "./speaker.js";
import { speechModel } from "./speech_client.js";
import { initTabNotice } from "./tab_notice.js";

// No context: the worker picks it (2048; 512 on WebKit, where memory is tight: py_engine/web/webkit.py).
const LOAD_OPTIONS = { f32: false, needs_text: true }; // a model with no tokenizer is refused at load: the chat sends text
const STOP_GRACE_MS = 60000; // after Stop, how long to wait for the worker's `response` (a slow GPU finishes its step first)
const SUGGESTIONS = [
  "What is the capital of France?",
  "Explain WebGPU to a ten-year-old.",
  "Write a haiku about autumn rain.",
  "Give me three tips for writing clear emails.",
];

const state = {
  phase: "idle",        // idle | loading | ready | generating | recovering (the worker reloads after a GPU reset)
  models: [],
  loaded: null,         // the model (from /api/models) the worker holds
  loadedEvent: null,
  history: [],          // [{role, content}] sent with every generate (a content with pictures: OpenAI's parts)
  gen: null,            // the running Generation
  client: null,
  noGpu: false,
  loadingId: null,      // the model being loaded (the Storage panel won't delete it meanwhile)
  voice: { transcriber: null, speaker: null },  // the server's speech models (microphone.js, speaker.js)
};

// ---------- view state ----------
function setPhase(phase) {
  state.phase = phase;
  document.body.dataset.phase = phase;
  render();
}

function render() {
  const { phase, loaded, noGpu } = state;
  const busy = phase === "loading";
  const recovering = phase === "recovering";
  const hasMessages = ui.messages.childElementCount > 0;
  const selected = selectedModel();

  ui.help.hidden = !noGpu;
  ui.welcome.hidden = noGpu || !!loaded || busy || hasMessages;
  ui.progress.hidden = !busy;
  ui.ready.hidden = !loaded || busy || hasMessages;
  renderFallbackNotice(selected, !loaded && !noGpu);

  ui.select.disabled = busy || state.models.length === 0;
  const sameModel = loaded && selected && selected.id === loaded.id;
  ui.load.disabled = noGpu || busy || recovering || !selected || sameModel;
  ui.load.classList.toggle("is-busy", busy);
  ui.load.classList.toggle("is-done", !!sameModel && !busy);
  ui.load.querySelector(".btn-label").textContent = busy ? "Loading…" : sameModel ? "Loaded" : loaded ? "Switch" : "Load";

  ui.prompt.disabled = busy || noGpu;
  const narrow = window.innerWidth < 560;
  ui.prompt.placeholder = recovering ? "Reloading the model…" : loaded ? (narrow ? "Message…" : `Message ${loaded.name}…`)
    : busy ? "Loading the model…" : narrow ? "Load a model first" : "Load a model to start chatting";
  const generating = phase === "generating";
  ui.send.hidden = generating;
  ui.stop.hidden = !generating;
  if (!generating) {
    ui.stop.disabled = false;
    ui.stop.querySelector("span").textContent = "Stop";
    ui.stop.title = "";
  }
  ui.send.disabled = phase !== "ready" || (!ui.prompt.value.trim() && !pictureCount());
  ui.gpuPanel.classList.toggle("is-live", !!loaded);
}

function selectedModel() {
  return state.models.find((m) => m.id === ui.select.value) || null;
}

// ---------- no WebGPU ----------
function showNoWebGPU(reason) {
  state.noGpu = true;
  $("webgpu-secure").hidden = reason !== "insecure-context";
  render();
}

// ---------- the worker ----------
function client() {
  if (state.client) return state.client;
  const c = sharedClient(); // static/openai.js on this page speaks to the same worker
  c.addEventListener("crash", (ev) => {
    const during = state.phase === "loading" ? "while loading" : state.phase === "generating" ? "while answering" : "";
    showError("crash", `${ev.detail.message}${during ? ` (${during})` : ""}. Press Load to start it again.`);
    state.loaded = null;
    state.loadedEvent = null;
    renderGpu(null);
    setPhase("idle");
  });
  c.addEventListener("error", (ev) => showError(ev.detail.kind, ev.detail.message, { openStorage }));
  c.addEventListener("moved", () => { // another tab took the engine (static/tab_notice.js says so)
    state.loaded = null;
    state.loadedEvent = null;
    renderGpu(null);
    setPhase("idle");
  });
  c.addEventListener("device_lost", (ev) => onDeviceLost(ev.detail));
  // A load of the page's own is settled by loadModel (a reload after a GPU reset brings the same
  // model back); another model loaded by static/openai.js replaced the chat's in the shared
  // worker, and the chat follows it.
  c.addEventListener("loaded", (ev) => {
    if (state.phase !== "loading" && ev.detail.model !== state.loaded?.id) followLoaded(ev.detail);
  });
  state.client = c;
  return c;
}

// The worker holds another model now: the chat's, if the picker lists it (an embedding model is
// no chat model: nothing is loaded for the chat then).
function followLoaded(event) {
  const model = state.models.find((m) => m.id === event.model) || null;
  state.loaded = model;
  state.loadedEvent = model ? event : null;
  if (!event.vision) clearPictures();
  renderGpu(model ? event : null, model);
  if (model) {
    fillPicker(state.models, model.id);
    showReady(model, event.load_ms);
  }
  setPhase(model ? "ready" : "idle");
  refreshStore();
}

// The GPU device was lost: the worker reloads the model by itself, and the conversation stays. A
// load under way just goes on (its `loaded` or error settles it); an answer on the lost device has
// already failed (send() marks it) before "reloading" arrives.
function onDeviceLost(event) {
  const loading = state.phase === "loading";
  showDeviceLost(event, { loading });
  if (loading) return;
  if (event.status === "reloading") setPhase("recovering");
  else if (event.status === "failed") {
    state.loaded = null;
    state.loadedEvent = null;
    renderGpu(null);
    setPhase("idle");
  } else if (state.phase === "recovering") {
    setPhase("ready");
    announce("The GPU was reset; the model was reloaded.");
  }
}

// The picker's model, or one the user brought (byo.js); true once it is loaded.
async function loadModel(model = selectedModel()) {
  if (!model || state.phase === "loading" || state.noGpu) return false;
  if (state.gen) state.gen.cancel();
  hideError();
  const c = client();
  if (state.loaded) c.unload();
  state.loaded = null;
  state.loadedEvent = null;
  renderGpu(null);
  resetProgress(model);
  state.loadingId = model.id;
  setPhase("loading");
  ui.progress.scrollIntoView({ block: "nearest" });
  const t0 = performance.now();
  try {
    const loaded = await c.load(model, LOAD_OPTIONS, { onProgress });
    state.loaded = model;
    state.loadedEvent = loaded;
    if (!loaded.vision) clearPictures();
    renderGpu(loaded, model, performance.now() - t0, state.client?.booted?.pyodide_ms);
    showReady(model, loaded.load_ms ?? performance.now() - t0);
    setPhase("ready");
    announce(`${model.name} is loaded. Type a message.`);
    ui.prompt.focus();
    return true;
  } catch (err) {
    if (err.kind !== "crash") {
      const kind = ["no-webgpu", "internal", "quota", "store", "device-lost"].includes(err.kind) ? err.kind : "load";
      showError(kind, err.message, { openStorage });
      if (err.kind === "no-webgpu") showNoWebGPU("no-adapter");
      setPhase("idle");
    }
  } finally {
    stopProgress();
    state.loadingId = null;
    if (state.client) refreshStore(); // the model is stored now (or partly: a failed load resumes later)
  }
  return false;
}

// A model the user brought is listed beside the server's (the list: byo.js, in localStorage); one
// listed already keeps its place.
function addModel(model) {
  const at = state.models.findIndex((m) => m.id === model.id);
  state.models = at < 0 ? [...state.models, model] : state.models.with(at, model);
  fillPicker(state.models, model.id);
  updateWelcome(selectedModel());
  render();
}

function openStorage() {
  toggleSettings(false);
  ui.gpuPanel.open = false;
  toggleStorage(true);
  $("storage-button").focus();
}

function showReady(model, loadMs) {
  ui.readyTitle.textContent = `${model.name} is ready`;
  ui.readySub.textContent = `Loaded in ${fmtMs(loadMs)} · ${fmtSize(model.size)} · runs on your GPU, offline from here on`;
  ui.suggestions.replaceChildren(...SUGGESTIONS.map((text) => {
    const b = document.createElement("button");
    b.type = "button";
    b.className = "suggestion";
    b.setAttribute("role", "listitem");
    b.textContent = text;
    b.addEventListener("click", () => send(text));
    return b;
  }));
}

async function send(rawText) {
  const text = (rawText ?? ui.prompt.value).trim();
  if ((!text && !pictureCount()) || state.phase !== "ready" || !state.loaded) return;
  hideError();
  const model = state.loaded;
  const pictures = takePictures();
  state.history.push({ role: "user", content: withPictures(text, pictures) });
  const userTurn = state.history.length - 1;
  addUserMessage(text, pictures);
  if (rawText === undefined) { ui.prompt.value = ""; autosize(); }
  const view = withSpeaker(addAssistantMessage(model));  // its speaker button reads it aloud, even while it streams
  setPhase("generating");
  scrollToBottom();

  await documentsIdle(); // a document being added holds the worker's GPU: the answer comes after it
  const recall = documentsRequest(state.loadedEvent?.context); // "Use my documents": {memory, embedder}
  const t0 = performance.now();
  let firstAt = null;
  const gen = client().generate(
    { messages: state.history.map((m) => forModel(m, state.loadedEvent?.vision)), sampling: requestSampling(), ...recall },
    { onToken: (_msg, g) => { firstAt ??= performance.now(); view.setText(g.text); } },
  );
  state.gen = gen;
  try {
    const done = await Promise.race([gen.done, stopFallback(gen)]);
    const end = performance.now();
    state.history.push({ role: "assistant", content: gen.text });
    const local = { tokens: gen.tokens, ttft: firstAt === null ? null : firstAt - t0, decodeMs: firstAt === null ? 0 : end - firstAt };
    const [line, title] = statsLine(done, local);
    view.finish(line, title, gen.text);
    showCitations(view.article, done.response?.memory ?? gen.memory);
    announce(done.stop === "cancel" ? "Stopped." : "Answer complete.");
  } catch (err) {
    if (state.history.length - 1 === userTurn) state.history.pop(); // the model never answered this turn
    const lost = err.kind === "device-lost";  // the worker reloads the model: its device_lost events narrate
    view.fail(lost ? "the GPU was reset mid-answer" : err.message, gen.text);
    if (!lost && err.kind !== "crash" && err.kind !== "terminated") showError(err.kind === "internal" ? "internal" : "generate", err.message);
  } finally {
    if (state.gen === gen) state.gen = null;
    if (state.phase === "generating") setPhase("ready");
    if (document.activeElement === document.body || document.activeElement === ui.stop) ui.prompt.focus();
  }
}

// A user message's content: its text, or OpenAI's parts with the pictures first (as SmolVLM's chat
// template places them: the picture, then the question), each named by its blob: URL.
function withPictures(text, pictures) {
  if (!pictures.length) return text;
  const parts = pictures.map((p) => ({ type: "image_url", image_url: { url: p.url } }));
  return text ? [...parts, { type: "text", text }] : parts;
}

// The message as the loaded model takes it: a model that reads no pictures (one loaded after a
// vision model, in the same conversation) gets the earlier turns' text without them.
function forModel(message, vision) {
  if (vision || !Array.isArray(message.content)) return { ...message };
  return { ...message, content: message.content.filter((p) => p.type === "text").map((p) => p.text).join("\n") };
}

// Why a picture cannot be attached now, or null (attachments.js shows it).
function pictureRefusal() {
  if (state.noGpu) return "This browser offers no WebGPU, so no model runs here.";
  if (!state.loaded) return "Load a model that reads pictures first: a vision-language model such as SmolVLM.";
  if (!state.loadedEvent?.vision) {
    return `${state.loaded.name} reads text only: load a vision-language model (such as SmolVLM) to ask about pictures.`;
  }
  return null;
}

// A worker that never confirms a cancel must not leave the page stuck in "generating".
function stopFallback(gen) {
  return new Promise((resolve) => {
    const check = setInterval(() => {
      if (!gen.cancelled) return;
      clearInterval(check);
      setTimeout(() => resolve({ stop: "cancel" }), STOP_GRACE_MS);
    }, 100);
    gen.done.finally(() => clearInterval(check)).catch(() => {});
  });
}

// The worker checks for a cancel after every token, and a forward the GPU has begun runs to its end:
// the answer stops at the next token (on a slow adapter, that token's time; the first one comes
// after the whole prompt is read). The button says so meanwhile.
function stop() {
  if (!state.gen || state.gen.cancelled) return;
  state.gen.cancel(); // nothing more is shown; the worker confirms with `response` at the next token
  ui.stop.disabled = true;
  ui.stop.querySelector("span").textContent = "Stopping at the next token…";
  ui.stop.title = "The GPU finishes the token it is computing, then the answer ends";
}

function newChat() {
  if (state.gen) state.gen.cancel();
  stopReading();
  state.history = [];
  ui.messages.replaceChildren();
  clearPictures({ all: true });
  hideError();
  render();
  if (!ui.prompt.disabled) ui.prompt.focus();
}

// ---------- composer ----------
function autosize() {
  ui.prompt.style.height = "auto";
  ui.prompt.style.height = `${Math.min(ui.prompt.scrollHeight, 220)}px`;
}

// ---------- start ----------
async function init() {
  fillSettings();
  const support = webgpuSupport();
  // a CPU fallback adapter is said before any load, with an estimate of its pace
  const adapterChecked = support.ok ? checkAdapter(render) : null;
  if (!support.ok) showNoWebGPU(support.reason);

  ui.load.addEventListener("click", () => loadModel());
  ui.select.addEventListener("change", () => { updateWelcome(selectedModel()); render(); });
  initByo({ client, load: loadModel, busy: () => state.phase === "loading" || state.noGpu, onModel: addModel, showError,
           models: () => state.models });
  ui.composer.addEventListener("submit", (ev) => { ev.preventDefault(); send(); });
  initAttachments({ refusal: pictureRefusal, showError, onChange: render });
  ui.prompt.addEventListener("input", () => { autosize(); render(); });
  ui.prompt.addEventListener("keydown", (ev) => {
    if (ev.key === "Enter" && !ev.shiftKey && !ev.isComposing) {
      ev.preventDefault();
      send();
    } else if (ev.key === "Escape" && state.gen) {
      ev.preventDefault();
      stop();
    }
  });
  ui.stop.addEventListener("click", stop);
  ui.newChat.addEventListener("click", newChat);
  ui.errorDismiss.addEventListener("click", () => { hideError(); ui.prompt.focus(); });
  ui.settingsButton.addEventListener("click", () => toggleSettings());
  ui.settingsForm.addEventListener("input", onSettingsInput);
  ui.settingsForm.addEventListener("submit", (ev) => { ev.preventDefault(); toggleSettings(false); });
  ui.settingsReset.addEventListener("click", resetSettings);
  ui.gpuPanel.addEventListener("toggle", () => { if (ui.gpuPanel.open) { toggleSettings(false); toggleStorage(false); } });
  ui.settingsButton.addEventListener("click", () => { if (!ui.settings.hidden) toggleStorage(false); });
  initDiagnostics({ client }); // "Check this device" (the GPU panel's button)
  initTabNotice({ onTakeOver: () => loadModel() }); // another tab owns the engine (no SharedWorker here)
  initDocuments({ client, showError, busy: () => state.phase === "loading" || state.phase === "recovering" || state.gen !== null });
  initCitations();
  initMicrophone({ client, prompt: ui.prompt, showError, transcriber: () => (state.noGpu ? null : state.voice.transcriber) });
  initSpeaker({ client, showError, speaker: () => (state.noGpu ? null : state.voice.speaker) });
  $("documents-button").addEventListener("click", () => { toggleSettings(false); ui.gpuPanel.open = false; });
  ui.settingsButton.addEventListener("click", () => toggleDocuments(false));
  initStorage({
    client, models: () => state.models, busyId: () => state.loadingId,
    onChange: () => { fillPicker(state.models); updateWelcome(selectedModel()); },
  });
  $("storage-button").addEventListener("click", () => {
    if (storageOpen()) { toggleSettings(false); ui.gpuPanel.open = false; }
  });
  document.addEventListener("keydown", (ev) => {
    if (ev.key !== "Escape") return;
    if (!ui.settings.hidden) { toggleSettings(false); ui.settingsButton.focus(); }
    if (ui.gpuPanel.open) { ui.gpuPanel.open = false; ui.gpuPanel.querySelector("summary").focus(); }
  });
  document.addEventListener("pointerdown", (ev) => {
    if (!ui.settings.hidden && !ev.target.closest(".popover-anchor")) toggleSettings(false);
    if (ui.gpuPanel.open && !ev.target.closest("#gpu-panel")) ui.gpuPanel.open = false;
  });

  window.addEventListener("resize", render);
  render();
  try {
    // embedding models (task "embedding") answer static/openai.js and the memory, speech models
    // ("transcription", "speech") the microphone and the speaker buttons: none of them chats
    const listed = await fetchModels();
    setModels(listed); // the Documents panel, where one of them embeds
    state.voice = { transcriber: speechModel(listed, "transcription"), speaker: speechModel(listed, "speech") };
    renderMicrophone();
    state.models = [...listed.filter((m) => (m.task ?? "chat") === "chat"), ...broughtModels()];
  } catch (err) {
    ui.select.replaceChildren(new Option("No models available"));
    showError("models", err.message);
    return;
  }
  fillPicker(state.models);
  if (!state.models.some((m) => m.default) && state.models.length) ui.select.value = state.models[0].id;
  if (!state.models.length) ui.select.replaceChildren(new Option("No models on this server"));
  updateWelcome(selectedModel());
  render();
  document.body.dataset.models = "ready";
  await adapterChecked; // the probe first: the worker's boot would share its CPU and slow it
  if (!state.noGpu && state.models.length) refreshStore(); // marks the stored models (and starts the worker early)
}

init();
registerServiceWorker(); // offline: static/sw.js (static/pwa.js)
