// Where the weight store's bytes come from: our server, another origin, or the user's own files.
//
// A model the user brought (static/byo.js) is fetched like a hosted one: base + name. Another
// origin's files are plain cross-origin fetches (CORS; Range; redirects followed by fetch itself).
// The user's files have no URL a fetch could reach: the page sends their File handles with the load
// (model.blobs), worker.js attaches them here, and a "local:<model id>/<name>" URL is answered with
// a Response over File.slice(): the browser streams it from disk in chunks, never the whole file
// into memory.
//
//   attach(modelId, blobs)       {name: File} of a local model (kept for the worker's life: a reload
//                                after a GPU reset reads them again)
//   source(url, init)            fetch(url, init), or for a local file a Response of the Range asked
//                                (206 for a Range, as a server would answer)
//   readRange(url, start, length) exactly those bytes: a Range request whose body is read only that
//                                far (a server that ignores Range is not downloaded whole)

const local = new Map();  // model id -> Map(name -> File)

export class SourceError extends Error {
  constructor(message) { super(message); this.name = "SourceError"; }
}

export function attach(modelId, blobs) {
  local.set(String(modelId), new Map(Object.entries(blobs || {})));
}

const LOCAL = /^local:([^/]+)\/(.+)$/;

function localFile(url) {
  const m = LOCAL.exec(url);
  if (!m) return null;
  const file = local.get(m[1])?.get(m[2]);
  if (!file) {
    throw new SourceError(`${m[2]} of ${m[1]} is not on this device any more and the page no longer holds the file: choose it again (Load from URL or file…)`);
  }
  return file;
}

/** fetch(url, init), or a local file's bytes as the Response a server would give. */
export async function source(url, init = {}) {
  const file = localFile(url);
  if (!file) return fetch(url, init);
  const range = /^bytes=(\d+)-(\d*)$/.exec(new Headers(init.headers).get("Range") || "");
  if (!range) return new Response(file.slice(0), { status: 200 });
  const start = Number(range[1]), end = range[2] ? Number(range[2]) + 1 : file.size;
  return new Response(file.slice(start, end), { status: 206 });
}

/** Bytes [start, start + length) of a file, read no further than that. */
export async function readRange(url, start, length, init = {}) {
  const file = localFile(url);
  if (file) return new Uint8Array(await file.slice(start, start + length).arrayBuffer());
  const res = await fetch(url, { ...init, headers: { Range: `bytes=${start}-${start + length - 1}` } });
  if (!res.ok) throw new SourceError(`${url}: HTTP ${res.status} ${res.statusText}`);
  if (res.status !== 206 && start > 0) {
    await res.body?.cancel();
    throw new SourceError(`${url}: the server ignored the Range request (HTTP ${res.status}); Wisp reads model files in parts`);
  }
  const out = new Uint8Array(length);
  let filled = 0;
  const reader = res.body.getReader();
  while (filled < length) {
    const { done, value } = await reader.read();
    if (done) break;
    const take = Math.min(value.length, length - filled);
    out.set(value.subarray(0, take), filled);
    filled += take;
  }
  await reader.cancel().catch(() => {});  // a 200 for a Range: the rest of the file is not wanted
  return out.subarray(0, filled);
}
