// Where the weight store keeps bytes: OPFS when the worker has createSyncAccessHandle (fast,
// synchronous, in-place writes), else the Cache API. Both give worker/store.js the same shape:
//   open(model, name) -> {read(pos, len, into?), write(pos, bytes), truncate(n), durable, close()}, and
//                        size() where the bytes on disk are known without reading them, flush() (OPFS)
//   getMeta/putMeta(model, name[, meta]), removeFile(model, name), removeModel(model), models()
// read() fills `into` (a Uint8Array of at least len bytes) when given, so a caller can reuse one.
// `durable` is the contiguous prefix that survives a crash of the page right now (OPFS: bytes written
// are in the OS's cache; the Cache API: chunks put); flush() also takes it through a crash of the OS.
// The store records `durable` as meta.written: flushed, or block-aligned (every block it names has a
// digest, checked when it is read back, so a write the OS lost is caught, never trusted).

const ROOT = "wisp-models";
// The Cache API backend stores a file as entries of this size: one put of a whole model file
// has failed on WebKit above ~64 MB, and a crash loses only the chunk in hand.
export const CACHE_CHUNK = 16 << 20;
const CACHE_NAME = "wisp-models-v1";

// File names of HF models are relative paths; one OPFS directory per model keeps them flat.
const key = (name) => encodeURIComponent(name);
const unkey = (k) => decodeURIComponent(k);

class OpfsBackend {
  constructor() { this.kind = "opfs"; }

  async dir(model, create) {
    const root = await navigator.storage.getDirectory();
    const top = await root.getDirectoryHandle(ROOT, { create });
    return top.getDirectoryHandle(key(model), { create });
  }

  async open(model, name) {
    const dir = await this.dir(model, true);
    const handle = await (await dir.getFileHandle(key(name), { create: true })).createSyncAccessHandle();
    return {
      durable: 0,
      async read(pos, len, into = null) {
        const out = into ? into.subarray(0, len) : new Uint8Array(len);
        const n = handle.read(out, { at: pos });
        if (n !== len) throw new Error(`store: short read of ${name} at ${pos} (${n} of ${len} bytes)`);
        return out;
      },
      async write(pos, bytes) {  // no flush: one per write (an fsync) made a download disk-bound
        let done = 0;
        while (done < bytes.length) done += handle.write(bytes.subarray(done), { at: pos + done });
        this.durable = pos + bytes.length;
      },
      async flush() { handle.flush(); },
      async truncate(n) { handle.truncate(n); handle.flush(); this.durable = n; },
      async size() { return handle.getSize(); },  // a file cut short shows here before any read
      async close() { handle.close(); },
    };
  }

  async getMeta(model, name) {
    try {
      const file = await (await (await this.dir(model, false)).getFileHandle(key(name) + ".json")).getFile();
      return JSON.parse(await file.text());
    } catch { return null; }  // none yet, or unreadable: either way the file starts afresh
  }

  async putMeta(model, name, meta) {
    const dir = await this.dir(model, true);
    const h = await (await dir.getFileHandle(key(name) + ".json", { create: true })).createSyncAccessHandle();
    try {
      const bytes = new TextEncoder().encode(JSON.stringify(meta));
      h.truncate(0);
      h.write(bytes, { at: 0 });
      h.flush();
    } finally { h.close(); }
  }

  async removeFile(model, name) {
    let dir;
    try { dir = await this.dir(model, false); } catch { return; }
    for (const k of [key(name) + ".json", key(name)]) {  // meta first: no meta, no claim on the bytes
      try { await dir.removeEntry(k); } catch (e) { if (e.name !== "NotFoundError") throw e; }
    }
  }

  async removeModel(model) {
    try {
      const root = await (await navigator.storage.getDirectory()).getDirectoryHandle(ROOT);
      await root.removeEntry(key(model), { recursive: true });
    } catch (e) { if (e.name !== "NotFoundError") throw e; }
  }

  /** [{id, files: [meta, ...]}] from the .json records. */
  async models() {
    const out = [];
    let root;
    try { root = await (await navigator.storage.getDirectory()).getDirectoryHandle(ROOT); } catch { return out; }
    for await (const [k, dir] of root.entries()) {
      if (dir.kind !== "directory") continue;
      const files = [], entries = new Map();
      for await (const [fk, fh] of dir.entries()) entries.set(fk, fh);
      for (const [fk, fh] of entries) {  // a record is "<name>.json" next to "<name>" ("config.json" is data)
        if (!fk.endsWith(".json") || !entries.has(fk.slice(0, -5))) continue;
        try { files.push({ name: unkey(fk.slice(0, -5)), ...JSON.parse(await (await fh.getFile()).text()) }); } catch { /* skip */ }
      }
      out.push({ id: unkey(k), files });
    }
    return out;
  }
}

// Cache API: entries "/wisp-store/<model>/<name>?chunk=<n>" (16 MiB each) and "...?meta". (Not
// "#chunk=n": Cache matching ignores URL fragments, so those would all be one entry.)
class CacheBackend {
  constructor() { this.kind = "cache"; }

  url(model, name, suffix) { return `${self.location.origin}/wisp-store/${key(model)}/${key(name)}?${suffix}`; }

  async open(model, name) {
    const cache = await caches.open(CACHE_NAME);
    const url = (n) => this.url(model, name, `chunk=${n}`);
    let pending = null, pendingAt = 0;  // the chunk being filled; stored once full (or at close)
    let last = { n: -1, bytes: null };
    const backend = this;
    return {
      durable: 0,
      async read(pos, len, into = null) {
        const out = into ? into.subarray(0, len) : new Uint8Array(len);
        for (let done = 0; done < len;) {
          const n = Math.floor((pos + done) / CACHE_CHUNK);
          if (last.n !== n) {
            const res = await cache.match(url(n));
            if (!res) throw new Error(`store: chunk ${n} of ${name} is missing`);
            last = { n, bytes: new Uint8Array(await res.arrayBuffer()) };
          }
          const from = pos + done - n * CACHE_CHUNK;
          const take = Math.min(len - done, last.bytes.length - from);
          if (take <= 0) throw new Error(`store: short chunk ${n} of ${name}`);
          out.set(last.bytes.subarray(from, from + take), done);
          done += take;
        }
        return out;
      },
      async write(pos, bytes) {  // sequential appends only (the store never writes otherwise)
        for (let done = 0; done < bytes.length;) {
          if (!pending) { pendingAt = pos + done; pending = []; pending.size = 0; }
          const take = Math.min(bytes.length - done, CACHE_CHUNK - pending.size);
          pending.push(bytes.slice(done, done + take));
          pending.size += take;
          done += take;
          if (pending.size === CACHE_CHUNK) await this.seal();
        }
      },
      async seal() {  // store the chunk in hand (full, or the file's last one)
        if (!pending) return;
        await cache.put(url(Math.floor(pendingAt / CACHE_CHUNK)), new Response(new Blob(pending)));
        this.durable = pendingAt + pending.size;
        pending = null;
      },
      async truncate(_n) {  // only to 0 (a restart): the chunks go
        for (const req of await cache.keys()) if (req.url.startsWith(url(""))) await cache.delete(req);
        pending = null; this.durable = 0;
      },
      async close() { await this.seal(); backend.touched = true; },
    };
  }

  async getMeta(model, name) {
    const res = await (await caches.open(CACHE_NAME)).match(this.url(model, name, "meta"));
    try { return res ? await res.json() : null; } catch { return null; }
  }

  async putMeta(model, name, meta) {
    await (await caches.open(CACHE_NAME)).put(this.url(model, name, "meta"), new Response(JSON.stringify({ name, ...meta })));
  }

  async removeFile(model, name) {
    const cache = await caches.open(CACHE_NAME);
    const prefix = this.url(model, name, "");
    await cache.delete(this.url(model, name, "meta"));
    for (const req of await cache.keys()) if (req.url.startsWith(prefix)) await cache.delete(req);
  }

  async removeModel(model) {
    const cache = await caches.open(CACHE_NAME);
    const prefix = `${self.location.origin}/wisp-store/${key(model)}/`;
    for (const req of await cache.keys()) if (req.url.startsWith(prefix)) await cache.delete(req);
  }

  async models() {
    const cache = await caches.open(CACHE_NAME);
    const byModel = new Map();
    for (const req of await cache.keys()) {
      const m = req.url.match(/\/wisp-store\/([^/]+)\/[^/?]+\?meta$/);
      if (!m) continue;
      const meta = await (await cache.match(req)).json();
      const id = unkey(m[1]);
      if (!byModel.has(id)) byModel.set(id, []);
      byModel.get(id).push(meta);
    }
    return [...byModel].map(([id, files]) => ({ id, files }));
  }
}

/** OPFS with sync access handles when this worker has them (test hook: ?store=cache forces the fallback). */
export function pickBackend() {
  const forced = new URL(self.location.href).searchParams.get("store");
  const opfs = typeof FileSystemFileHandle !== "undefined" && "createSyncAccessHandle" in FileSystemFileHandle.prototype
    && navigator.storage?.getDirectory;
  return opfs && forced !== "cache" ? new OpfsBackend() : new CacheBackend();
}

/** The backend of that kind ("opfs" or "cache"): the store's writer (store_writer.js) takes the store's. */
export function backendOf(kind) {
  return kind === "opfs" ? new OpfsBackend() : new CacheBackend();
}
