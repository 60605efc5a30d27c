// "Bring your own model": a URL or the user's files, turned into the model a load message carries
// ({id, name, kind, base, files: {name: bytes}, source, blobs?}; py_engine/web/protocol.py MODEL).
// Only names and sizes are learned here — HEAD requests (or a one-byte Range where HEAD is not
// allowed), the small index.json of a sharded model, File.size — never a weight byte: the worker
// reads the header, plans the model and refuses one that does not fit before anything is downloaded.
//
//   fromUrl(text)      a GGUF file's URL, or a Hugging Face repository (its resolve/main/ base, the
//                      repository page, or a file's blob/ page) on any origin that allows CORS
//   fromFiles(list)    [{path, file}]: one .gguf, or an HF folder's files (path "folder/config.json")
import { WispError } from "./client.js";

// The files of an HF folder the engine reads besides the weights (py_engine/formats/hf_dir.py).
const INDEX = "model.safetensors.index.json";
// (a vision-language model's image processor last: py_engine/formats/hf_dir.py SMALL_FILES)
const SMALL = ["config.json", "generation_config.json", "tokenizer.json", "tokenizer_config.json", "chat_template.jinja",
  "preprocessor_config.json", "processor_config.json"];
// A file name must stay a plain name under its base: the worker checks the same (web/files.py).
const SEGMENT = /^[A-Za-z0-9_][A-Za-z0-9._-]{0,127}$/;
const NO_STORE = { cache: "no-store" };

const fail = (message) => new WispError("load", message);

export function plainName(name) {
  const parts = String(name).split("/");
  return parts.length <= 4 && parts.every((p) => SEGMENT.test(p));
}

function checkName(name, where) {
  if (!plainName(name)) throw fail(`${where} names the file “${String(name).slice(0, 80)}”: Wisp takes only plain names (letters, digits, . _ -)`);
}

/** The store keys a model by this id: a slug of its name and a digest of where it came from, so the
 *  same URL or the same file maps to the same stored copy. */
async function modelId(name, key) {
  const digest = new Uint8Array(await crypto.subtle.digest("SHA-256", new TextEncoder().encode(key)));
  const hex = Array.from(digest.subarray(0, 4), (b) => b.toString(16).padStart(2, "0")).join("");
  const slug = name.toLowerCase().replace(/[^a-z0-9._-]+/g, "-").replace(/^[-.]+|[-.]+$/g, "").slice(0, 48);
  return `byo-${slug || "model"}-${hex}`;
}

const total = (files) => Object.values(files).reduce((a, b) => a + b, 0);

/** A brought model's name says where it came from, so it is told apart from a hosted model of the
 *  same name (the picker and the Storage panel list both). */
const broughtName = (label, from) => `${label} (${from})`;

// ---------- a URL ----------

/** The bytes of a file at url, or null when the server says 404. HEAD first; where HEAD is refused
 *  (405, or CORS allows only GET), a one-byte Range request and its Content-Range. */
export async function probeSize(url) {
  try {
    const res = await fetch(url, { ...NO_STORE, method: "HEAD" });
    if (res.status === 404) return null;
    const length = res.headers.get("Content-Length");
    if (res.ok && length !== null && /^\d+$/.test(length)) return Number(length);
  } catch { /* no HEAD across origins here: try a Range */ }
  let res;
  try {
    res = await fetch(url, { ...NO_STORE, headers: { Range: "bytes=0-0" } });
  } catch (err) {
    throw fail(`Couldn’t reach ${url} (${err.message}): the server may not allow other sites to read it (CORS)`);
  }
  await res.body?.cancel().catch(() => {});  // a server that ignores Range would send the whole file
  if (res.status === 404) return null;
  if (!res.ok) throw fail(`${url}: HTTP ${res.status} ${res.statusText}`);
  const range = /\/(\d+)\s*$/.exec(res.headers.get("Content-Range") || "");
  if (res.status === 206 && range) return Number(range[1]);
  const length = res.headers.get("Content-Length");
  if (res.status === 200 && length !== null) return Number(length);
  throw fail(`${url}: the server does not say how big the file is (it must expose Content-Range or answer HEAD)`);
}

/** Hugging Face page URLs to their file URLs: a repository page to its resolve/main/ base, a
 *  file's blob/ page to its resolve/ URL. Anything else is taken as given. */
function normalise(url) {
  if (!/^(www\.)?(huggingface\.co|hf\.co)$/.test(url.hostname)) return url;
  const parts = url.pathname.split("/").filter(Boolean);
  if (parts.length === 2) url.pathname = `/${parts.join("/")}/resolve/main/`;
  else if (parts[2] === "blob" || parts[2] === "tree") url.pathname = `/${[parts[0], parts[1], "resolve", ...parts.slice(3)].join("/")}${parts[2] === "tree" ? "/" : ""}`;
  return url;
}

export async function fromUrl(text) {
  let url;
  try { url = new URL(String(text).trim()); } catch { throw fail(`“${String(text).slice(0, 80)}” is not a URL`); }
  if (url.protocol !== "https:" && url.protocol !== "http:") throw fail(`Wisp loads models over http(s), not ${url.protocol}`);
  url.hash = "";
  url.search = "";  // a file is base + name: a query (?download=true) would not survive that
  url = normalise(url);
  if (/\.gguf$/i.test(url.pathname)) {
    const cut = url.href.lastIndexOf("/") + 1;
    const base = url.href.slice(0, cut), name = url.href.slice(cut);
    checkName(name, "The URL");
    const size = await probeSize(url.href);
    if (size === null) throw fail(`${url.href}: no such file (HTTP 404)`);
    const label = decodeURIComponent(name).replace(/\.gguf$/i, "");
    return { id: await modelId(label, url.href), name: broughtName(label, url.host), kind: "gguf", base, files: { [name]: size },
             source: "url", size, description: `From ${url.href}` };
  }
  const base = url.href.endsWith("/") ? url.href : `${url.href}/`;
  return fromRepository(base);
}

async function fromRepository(base) {
  const [config, ...small] = await Promise.all(["config.json", ...SMALL.slice(1)].map((n) => probeSize(base + n)));
  if (config === null) {
    throw fail(`${base} has no config.json: give a .gguf file’s URL, or a repository of config.json, tokenizer and safetensors files (…/resolve/main/)`);
  }
  const files = { "config.json": config };
  SMALL.slice(1).forEach((name, i) => { if (small[i] !== null) files[name] = small[i]; });
  let shards = ["model.safetensors"];
  const index = await fetch(base + INDEX, NO_STORE).catch(() => null);
  if (index?.ok) {
    const body = new Uint8Array(await index.arrayBuffer());
    let map;
    try { map = JSON.parse(new TextDecoder().decode(body)).weight_map; } catch { map = null; }
    if (!map || typeof map !== "object") throw fail(`${base}${INDEX} has no weight_map`);
    shards = [...new Set(Object.values(map))];
    for (const name of shards) checkName(name, INDEX);
    files[INDEX] = body.length;
  }
  const sizes = await Promise.all(shards.map((name) => probeSize(base + name)));
  shards.forEach((name, i) => {
    if (sizes[i] === null) throw fail(`${base}${name}: no such file (HTTP 404)${shards.length === 1 ? "; the repository has neither model.safetensors nor its index" : ""}`);
    files[name] = sizes[i];
  });
  const path = new URL(base).pathname.split("/").filter(Boolean);
  const at = path.indexOf("resolve");
  const label = (at >= 2 ? path.slice(at - 2, at) : path.slice(-2)).join("/") || new URL(base).host;
  return { id: await modelId(label, base), name: broughtName(label, new URL(base).host), kind: "hf", base, files, source: "url", size: total(files),
           description: `From ${base}` };
}

// ---------- the user's files ----------

/** [{path, file}] from an <input type=file> (webkitRelativePath in a picked folder). */
export function pickedFiles(fileList) {
  return Array.from(fileList, (file) => ({ path: file.webkitRelativePath || file.name, file }));
}

export async function fromFiles(list) {
  if (!list.length) throw fail("No files were given");
  const deep = list.some((x) => x.path.includes("/"));  // a folder: its files are "folder/name"
  const top = new Map();
  for (const { path, file } of list) {
    const parts = path.split("/");
    if (deep ? parts.length === 2 : parts.length === 1) top.set(parts[parts.length - 1], file);
  }
  const folder = deep ? list[0].path.split("/")[0] : null;
  const ggufs = [...top.keys()].filter((n) => /\.gguf$/i.test(n));
  if (!top.has("config.json")) {
    if (ggufs.length !== 1) {
      throw fail(ggufs.length ? `${folder || "The files"} hold ${ggufs.length} .gguf files: choose one` : "Choose a .gguf file, or a folder with config.json, tokenizer and safetensors files");
    }
    const file = top.get(ggufs[0]);
    const label = ggufs[0].replace(/\.gguf$/i, "");
    return local(label, "your file", "gguf", { "model.gguf": file }, `From this device: ${ggufs[0]}`);
  }
  const blobs = {};
  for (const name of [...SMALL, INDEX]) if (top.has(name)) blobs[name] = top.get(name);
  let shards = [...top.keys()].filter((n) => n.endsWith(".safetensors"));
  if (blobs[INDEX]) {
    let map;
    try { map = JSON.parse(await blobs[INDEX].text()).weight_map; } catch { map = null; }
    if (!map || typeof map !== "object") throw fail(`${INDEX} has no weight_map`);
    shards = [...new Set(Object.values(map))];
    for (const name of shards) checkName(name, INDEX);  // before looking them up: a name is untrusted
    const missing = shards.filter((n) => !top.has(n));
    if (missing.length) throw fail(`${folder || "The folder"} lacks ${missing.slice(0, 3).join(", ")} (named in ${INDEX})`);
  }
  if (!shards.length) throw fail(`${folder || "The folder"} has config.json but no .safetensors weights`);
  for (const name of shards) { checkName(name, folder || "The folder"); blobs[name] = top.get(name); }
  return local(folder || "model", "your folder", "hf", blobs, `From this device: ${folder || "a model folder"}`);
}

async function local(label, from, kind, blobs, description) {
  const files = Object.fromEntries(Object.entries(blobs).map(([name, file]) => [name, file.size]));
  // The same files picked again map to the same stored copy: their names, sizes and dates.
  const key = Object.entries(blobs).map(([name, f]) => `${name}:${f.name}:${f.size}:${f.lastModified}`).join("|");
  const id = await modelId(label, key);
  return { id, name: broughtName(label, from), kind, base: `local:${id}/`, files, source: "local", blobs, size: total(files), description };
}
