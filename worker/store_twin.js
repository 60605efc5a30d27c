// Identical bytes are stored once: before a model the user brought is loaded (static/byo.js, through
// the store_twin message), the weight store looks for a stored model with the very same bytes, and
// the page loads that one instead of storing a copy. worker/store.js exports it as twin(model).

import { BLOCK, BlockHashes, blockList } from "./sha256.js";
import { source } from "./remote.js";

const NO_STORE = { cache: "no-store" };  // read to compare, never kept in the HTTP cache

/** The stored model whose files hold exactly the bytes of `model`'s (a model the user brought), or
 *  null. Identical bytes are stored once: the page loads that model instead of storing a copy. Each
 *  file is matched by its size, then read from its source (the user's disk, or the network) and its
 *  blocks' digests compared with the stored file's as they come: a different file is told by its
 *  first different block, and nothing is stored. Names play no part (the same name may be two files). */
export async function findTwin(backend, model) {
  const wanted = Object.entries(model.files || {}).map(([name, size]) => (
    { name, size: Number(size), url: new URL(model.base + name, self.location.origin).href }));
  const sizes = (list) => list.map((f) => f.size).sort((a, b) => a - b).join();
  for (const { id, files: metas } of await backend.models()) {
    if (id === model.id || !metas.length || !metas.every(whole) || sizes(metas) !== sizes(wanted)) continue;
    if (await sameFiles(wanted, metas)) return id;
  }
  return null;
}

/** A stored file fit to be a twin: complete, with a digest for every block. */
const whole = (meta) => !!(meta.complete && meta.written === meta.size && blockList(meta.blocks, meta.size)
  && meta.blocks.sha256.length === Math.ceil(meta.size / BLOCK));

async function sameFiles(wanted, metas) {
  const left = [...metas];
  for (const file of wanted) {
    const candidates = left.filter((m) => m.size === file.size).sort((a, b) => (b.name === file.name) - (a.name === file.name));
    let match = null;
    for (const meta of candidates) if (await sameBytes(file.url, meta)) { match = meta; break; }
    if (!match) return false;
    left.splice(left.indexOf(match), 1);
  }
  return true;
}

async function sameBytes(url, meta) {
  const res = await source(url, NO_STORE);
  if (!res.ok) throw new Error(`${url}: HTTP ${res.status} ${res.statusText}`);
  const blocks = new BlockHashes(meta.size, meta.blocks.sha256);
  const reader = res.body.getReader();
  let at = 0;
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      at += value.length;
      if (at > meta.size) return false;
      await blocks.push(value);
      if (blocks.bad >= 0) return false;
    }
    await blocks.settle();
    return at === meta.size && blocks.bad < 0;
  } finally {
    reader.cancel().catch(() => {});  // a difference found: the rest of the file is not wanted
  }
}
