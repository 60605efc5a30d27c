// The pictures a message carries, for a model that reads them (the worker's `loaded` event says
// `vision`): attached with the composer's button, pasted into the message box, or dropped on the
// page; each shows as a thumbnail above the box until the message is sent. A picture is the user's
// File and a blob: URL of it, which the message's image_url part names: the worker fetches and
// decodes it itself (worker/pictures.js), so no picture's bytes are copied into a message. The URLs
// live as long as the conversation (its thumbnails, and every later turn sends them again); a new
// chat revokes them. Anything else attached is refused with one sentence saying why.
import { $, el, announce } from "./ui.js";

// vision/files.py's limits: the worker refuses more; here the user hears it when attaching.
const MAX_PIXELS = 40_000_000;
const MAX_SIDE = 16_384;

const view = { button: $("attach-button"), input: $("attach-input"), tray: $("attachments") };
let deps = null;     // {refusal: () => string | null, showError(kind, message), onChange()}
let pending = [];    // [{url, name, width, height}] shown in the tray, sent with the next message
let sent = [];       // the URLs of pictures already sent: revoked with the conversation

export const isPicture = (file) => /^image\//.test(file?.type || "");

export function initAttachments(options) {
  deps = options;
  view.button.addEventListener("click", () => { if (allowed()) view.input.click(); });
  view.input.addEventListener("change", () => {
    const files = Array.from(view.input.files || []);
    view.input.value = "";  // the same file may be chosen again
    attach(files);
  });
  $("prompt").addEventListener("paste", (ev) => {
    const files = Array.from(ev.clipboardData?.files || []).filter(isPicture);
    if (!files.length) return;  // text: the box takes it
    ev.preventDefault();
    attach(files);
  });
  // A drop of pictures only (byo.js leaves those to us); model files and folders are byo.js's.
  document.addEventListener("drop", (ev) => {
    const files = Array.from(ev.dataTransfer?.files || []);
    if (files.length && files.every(isPicture)) attach(files);
  });
}

/** The pictures for the next message, taken out of the tray. */
export function takePictures() {
  const taken = pending;
  pending = [];
  sent.push(...taken.map((p) => p.url));
  renderTray();
  return taken;
}

export const pictureCount = () => pending.length;

/** Empty the tray (a model that reads no pictures was loaded); all: the conversation's too (New chat). */
export function clearPictures({ all = false } = {}) {
  for (const p of pending) URL.revokeObjectURL(p.url);
  pending = [];
  if (all) {
    for (const url of sent) URL.revokeObjectURL(url);
    sent = [];
  }
  renderTray();
}

function allowed() {
  const why = deps.refusal();
  if (why) deps.showError("picture", why);
  return !why;
}

async function attach(files) {
  if (!files.length || !allowed()) return;
  const before = pending.length;
  for (const file of files) {
    const picture = await readPicture(file);
    if (typeof picture === "string") deps.showError("picture", picture);
    else pending.push(picture);
  }
  renderTray();
  if (pending.length > before) announce(`${pending.length} picture${pending.length === 1 ? "" : "s"} attached`);
}

// {url, name, width, height} of a picture this page can send, else a sentence saying why not.
async function readPicture(file) {
  const name = file.name || "The pasted picture";
  if (!isPicture(file)) return `${name} is not a picture: attach a PNG, JPEG, WebP or GIF.`;
  if (/svg/i.test(file.type)) return `${name} is an SVG drawing, which the model cannot read: attach a PNG, JPEG, WebP or GIF.`;
  const url = URL.createObjectURL(file);
  const img = new Image();
  img.src = url;
  try {
    await img.decode();
  } catch {
    URL.revokeObjectURL(url);
    return `${name} is not a picture this browser can read.`;
  }
  const width = img.naturalWidth, height = img.naturalHeight;
  if (width > MAX_SIDE || height > MAX_SIDE || width * height > MAX_PIXELS) {
    URL.revokeObjectURL(url);
    return `${name} is ${width} x ${height} pixels: at most ${MAX_SIDE} a side and ${MAX_PIXELS / 1e6} megapixels are read.`;
  }
  return { url, name, width, height };
}

function renderTray() {
  view.tray.replaceChildren(...pending.map((picture) => {
    const item = el("figure", "attachment", "");
    item.dataset.testid = "attachment";
    const img = document.createElement("img");
    img.src = picture.url;
    img.alt = picture.name;
    img.title = `${picture.name} · ${picture.width} x ${picture.height}`;
    const remove = el("button", "icon-button attachment-remove", "");
    remove.type = "button";
    remove.setAttribute("aria-label", `Remove ${picture.name}`);
    remove.dataset.testid = "attachment-remove";
    remove.innerHTML = '<svg class="icon" aria-hidden="true" viewBox="0 0 24 24"><path d="M19 6.4 17.6 5 12 10.6 6.4 5 5 6.4 10.6 12 5 17.6 6.4 19l5.6-5.6 5.6 5.6 1.4-1.4-5.6-5.6z"/></svg>';
    remove.addEventListener("click", () => {
      pending = pending.filter((p) => p !== picture);
      URL.revokeObjectURL(picture.url);
      renderTray();
      $("prompt").focus();
    });
    item.append(img, remove);
    return item;
  }));
  view.tray.hidden = pending.length === 0;
  deps?.onChange();
}
