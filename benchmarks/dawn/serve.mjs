// The few routes of our app server (app/server.py) that the page's worker uses, served by Node itself
// (node:http on 127.0.0.1, port 0), so the Dawn benchmark needs neither Starlette nor uvicorn:
//
//   /api/models          one model, the entry app/models.py gives the page: {id, name, kind, files:{name:size},
//                        hashes:{name:{sha256}|{etag}}, default}
//   /models/<id>/<file>  its files (exact names only), with single Range requests, If-Range and an ETag
//   /worker/*            worker/          /pyodide/*  build/web/pyodide/
//   /wheels/*            build/web/wheels/    /wisp-lock.json  build/web/wisp-lock.json
//
//   serve({model, root, web}) -> {origin, entry, close(), cpu()}   cpu(): the server thread's CPU seconds
//     model: a .gguf file or an HF directory; root: the repository; web: build/web (default root/build/web)
//     The server runs on a thread of its own (node:worker_threads), as the app's is another process:
//     on the page's thread, its work would be counted as the download's.
//
// Like app/files.py: answers 206 + Content-Range for one satisfiable range, 416 for an unsatisfiable one,
// the whole file (200) when If-Range names another ETag; Cache-Control no-cache; files are streamed.

import { createHash } from "node:crypto";
import { once } from "node:events";
import fs from "node:fs";
import http from "node:http";
import path from "node:path";
import { Worker, isMainThread, parentPort, workerData } from "node:worker_threads";

import { threadCpu } from "./cpu.mjs";

// What app/models.py serves of an HF directory (besides *.safetensors): formats/hf_dir.py's SMALL_FILES
// of a text model, and an embedding model's sentence-transformers files (its pooling, its prompts).
const HF_FILES = ["config.json", "generation_config.json", "tokenizer.json", "tokenizer_config.json",
                  "chat_template.jinja", "model.safetensors.index.json", "modules.json", "sentence_bert_config.json",
                  "1_Pooling/config.json", "config_sentence_transformers.json"];
const MIME = { ".wasm": "application/wasm", ".mjs": "text/javascript", ".js": "text/javascript",
               ".json": "application/json", ".whl": "application/zip", ".zip": "application/zip" };

/** app/models.py's slug: a URL-safe id. */
export function slug(text) {
  return text.replace(/[^A-Za-z0-9._-]+/g, "-").replace(/^[-.]+|[-.]+$/g, "").toLowerCase() || "model";
}

/** The ETag of a file: a digest of its mtime and size (what the store compares on a resume). */
function etag(stat) {
  return `"${createHash("md5").update(`${stat.mtimeMs}-${stat.size}`).digest("hex")}"`;
}

/** app/models.py's file_hash: the .sha256 sidecar of the model cache while it matches, else the ETag. */
function fileHash(file, stat) {
  try {
    const text = fs.readFileSync(`${file}.sha256`, "utf8"), record = JSON.parse(text);
    const ns = /"mtime_ns"\s*:\s*(\d+)/.exec(text)?.[1];  // exactly: more digits than a double holds
    const same = ns !== undefined && BigInt(ns) === fs.statSync(file, { bigint: true }).mtimeNs;
    if (same && record?.size === stat.size && /^[0-9a-f]{64}$/.test(record.sha256 || "")) return { sha256: record.sha256 };
  } catch { /* no sidecar */ }
  return { etag: etag(stat) };
}

/** The model's /api/models entry and its files ({name: absolute path}). */
export function modelEntry(model) {
  const abs = path.resolve(model);
  const stat = fs.statSync(abs);
  const files = {};
  let kind, name;
  if (stat.isFile() && abs.toLowerCase().endsWith(".gguf")) {
    kind = "gguf";
    name = path.basename(abs).replace(/\.gguf$/i, "");
    files[path.basename(abs)] = abs;
  } else if (stat.isDirectory()) {
    kind = "hf";
    name = path.basename(abs);
    for (const f of HF_FILES) {
      if (fs.statSync(path.join(abs, f), { throwIfNoEntry: false })?.isFile()) files[f] = path.join(abs, f);
    }
    for (const f of fs.readdirSync(abs).sort()) if (f.endsWith(".safetensors")) files[f] = path.join(abs, f);
    const codec = path.join(abs, "nanocodec");  // a Kani-TTS-2 folder's NanoCodec decoder, as app/models.py serves it
    if (fs.statSync(codec, { throwIfNoEntry: false })?.isDirectory()) {
      const parts = ["config.json", ...fs.readdirSync(codec).filter((f) => f.endsWith(".safetensors")).sort()];
      for (const f of parts) if (fs.statSync(path.join(codec, f), { throwIfNoEntry: false })?.isFile()) files[`nanocodec/${f}`] = path.join(codec, f);
    }
    if (!files["config.json"]) throw new Error(`${abs}: not a model directory (needs config.json and *.safetensors)`);
  } else {
    throw new Error(`${abs}: expected a .gguf file or an HF model directory`);
  }
  const sizes = {}, hashes = {};
  for (const [rel, file] of Object.entries(files)) {
    const st = fs.statSync(file);
    sizes[rel] = st.size;
    hashes[rel] = fileHash(file, st);
  }
  const id = slug(name);
  return { entry: { id, name, kind, files: sizes, hashes, default: true }, files };
}

/** The regular file `rel` names under `base`, or null: no empty, hidden, "." or ".." segments, nothing outside. */
function safePath(base, rel) {
  if (!rel || rel.includes("\\") || rel.includes("\0")) return null;
  if (rel.split("/").some((p) => p === "" || p === "." || p === ".." || p.startsWith("."))) return null;
  try {
    const root = fs.realpathSync(base), file = fs.realpathSync(path.join(root, rel));
    return file.startsWith(root + path.sep) && fs.statSync(file).isFile() ? file : null;
  } catch { return null; }
}

/** {start, end} (inclusive) of a single "bytes=" range; "unsatisfiable"; or null (no usable header: whole file). */
export function parseRange(header, size) {
  const m = /^bytes=(\d*)-(\d*)$/.exec((header || "").trim());
  if (!m || (m[1] === "" && m[2] === "")) return null;
  let start, end;
  if (m[1] === "") {  // the last N bytes
    const n = Number(m[2]);
    if (n === 0) return "unsatisfiable";
    start = Math.max(0, size - n); end = size - 1;
  } else {
    start = Number(m[1]); end = m[2] === "" ? size - 1 : Math.min(Number(m[2]), size - 1);
    if (m[2] !== "" && Number(m[2]) < start) return null;  // invalid: ignored, as a server may
  }
  return start >= size ? "unsatisfiable" : { start, end };
}

function sendFile(req, res, file) {
  let stat;
  try { stat = fs.statSync(file); } catch { return notFound(res); }
  const tag = etag(stat);
  const headers = { "Content-Type": MIME[path.extname(file).toLowerCase()] || "application/octet-stream",
                    "Accept-Ranges": "bytes", ETag: tag, "Last-Modified": stat.mtime.toUTCString(),
                    "Cache-Control": "no-cache", "X-Content-Type-Options": "nosniff" };
  const ifRange = req.headers["if-range"];
  let range = ifRange && ifRange !== tag ? null : parseRange(req.headers.range, stat.size);
  if (range === "unsatisfiable") {
    res.writeHead(416, { ...headers, "Content-Range": `bytes */${stat.size}` });
    return res.end();
  }
  const status = range ? 206 : 200;
  range = range || { start: 0, end: stat.size - 1 };
  if (status === 206) headers["Content-Range"] = `bytes ${range.start}-${range.end}/${stat.size}`;
  headers["Content-Length"] = String(Math.max(0, range.end - range.start + 1));
  res.writeHead(status, headers);
  if (req.method === "HEAD" || stat.size === 0) return res.end();
  const stream = fs.createReadStream(file, { start: range.start, end: range.end, highWaterMark: 1 << 20 });
  stream.on("error", () => res.destroy());
  stream.pipe(res);
}

function notFound(res) {
  res.writeHead(404, { "Content-Type": "text/plain" });
  res.end("Not Found");
}

export async function serve(options) {
  const worker = new Worker(new URL(import.meta.url), { workerData: { serve: options } });
  const [reply] = await Promise.race([once(worker, "message"), once(worker, "error").then(([e]) => { throw e; })]);
  if (reply.error) throw new Error(reply.error);
  const close = async () => { worker.postMessage("close"); await once(worker, "exit"); };
  const cpu = async () => { worker.postMessage("cpu"); return (await once(worker, "message"))[0].cpu; };
  return { origin: reply.origin, entry: reply.entry, close, cpu };
}

if (!isMainThread && workerData?.serve) {  // the server's thread
  listen(workerData.serve).then(({ origin, entry, close }) => {
    parentPort.postMessage({ origin, entry });
    parentPort.on("message", (m) => {
      if (m === "cpu") parentPort.postMessage({ cpu: threadCpu() });
      else close().then(() => process.exit(0));
    });
  }, (e) => parentPort.postMessage({ error: e.message }));
}

async function listen({ model, root, web = path.join(root, "build", "web") }) {
  const { entry, files } = modelEntry(model);
  const trees = { worker: path.join(root, "worker"), pyodide: path.join(web, "pyodide"),
                  wheels: path.join(web, "wheels") };
  const server = http.createServer((req, res) => {
    if (req.method !== "GET" && req.method !== "HEAD") { res.writeHead(405); return res.end(); }
    let url;
    try { url = decodeURIComponent(new URL(req.url, "http://x").pathname); } catch { return notFound(res); }
    if (url === "/api/models") {
      res.writeHead(200, { "Content-Type": "application/json", "Cache-Control": "no-store" });
      return res.end(JSON.stringify([entry]));
    }
    if (url === "/wisp-lock.json") return sendFile(req, res, path.join(web, "wisp-lock.json"));
    const prefix = `/models/${entry.id}/`;
    if (url.startsWith(prefix)) {  // exact names from the list only
      const rel = url.slice(prefix.length), file = Object.hasOwn(files, rel) ? files[rel] : null;
      return file ? sendFile(req, res, file) : notFound(res);
    }
    const m = /^\/(worker|pyodide|wheels)\/(.+)$/.exec(url);
    const file = m ? safePath(trees[m[1]], m[2]) : null;
    return file ? sendFile(req, res, file) : notFound(res);
  });
  await new Promise((resolve, reject) => { server.once("error", reject); server.listen(0, "127.0.0.1", resolve); });
  const origin = `http://127.0.0.1:${server.address().port}`;
  const close = () => new Promise((resolve) => { server.closeAllConnections(); server.close(resolve); });
  return { origin, entry, close };
}
