// Incremental SHA-256 (FIPS 180-4). WebCrypto's digest() needs the whole input at once, and the
// store hashes files of gigabytes as they stream past, so this keeps the running state instead.
//   const h = new Sha256(); h.update(bytes); ...; h.hex() -> "e3b0c442..."
// createSha256() is the same through hash-wasm when it loads; BlockHashes are per-block digests.

const K = new Uint32Array([
  0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
  0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
  0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
  0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
  0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
  0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
  0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
  0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
]);

export class Sha256 {
  constructor() {
    this.h = new Uint32Array([0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                              0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19]);
    this.w = new Uint32Array(64);
    this.block = new Uint8Array(64);  // a partial block carried between update() calls
    this.fill = 0;
    this.length = 0;                  // bytes hashed so far (a Number: exact up to 2^53)
  }

  update(bytes) {
    let i = 0;
    const n = bytes.length;
    this.length += n;
    if (this.fill) {
      const take = Math.min(64 - this.fill, n);
      this.block.set(bytes.subarray(0, take), this.fill);
      this.fill += take;
      i = take;
      if (this.fill < 64) return this;
      this.compress(this.block, 0);
      this.fill = 0;
    }
    for (; i + 64 <= n; i += 64) this.compress(bytes, i);
    if (i < n) { this.block.set(bytes.subarray(i), 0); this.fill = n - i; }
    return this;
  }

  compress(b, o) {
    const w = this.w, h = this.h;
    for (let t = 0; t < 16; t++, o += 4) w[t] = (b[o] << 24) | (b[o + 1] << 16) | (b[o + 2] << 8) | b[o + 3];
    for (let t = 16; t < 64; t++) {
      const x = w[t - 15], y = w[t - 2];
      const s0 = ((x >>> 7) | (x << 25)) ^ ((x >>> 18) | (x << 14)) ^ (x >>> 3);
      const s1 = ((y >>> 17) | (y << 15)) ^ ((y >>> 19) | (y << 13)) ^ (y >>> 10);
      w[t] = (w[t - 16] + s0 + w[t - 7] + s1) | 0;
    }
    let a = h[0], bb = h[1], c = h[2], d = h[3], e = h[4], f = h[5], g = h[6], hh = h[7];
    for (let t = 0; t < 64; t++) {
      const S1 = ((e >>> 6) | (e << 26)) ^ ((e >>> 11) | (e << 21)) ^ ((e >>> 25) | (e << 7));
      const t1 = (hh + S1 + ((e & f) ^ (~e & g)) + K[t] + w[t]) | 0;
      const S0 = ((a >>> 2) | (a << 30)) ^ ((a >>> 13) | (a << 19)) ^ ((a >>> 22) | (a << 10));
      const t2 = (S0 + ((a & bb) ^ (a & c) ^ (bb & c))) | 0;
      hh = g; g = f; f = e; e = (d + t1) | 0; d = c; c = bb; bb = a; a = (t1 + t2) | 0;
    }
    h[0] += a; h[1] += bb; h[2] += c; h[3] += d; h[4] += e; h[5] += f; h[6] += g; h[7] += hh;
  }

  /** The digest as 64 hex digits; the hash is finished (update() after this is an error). */
  hex() {
    const bits = this.length * 8;
    const pad = new Uint8Array(((this.fill < 56) ? 56 : 120) - this.fill + 8);
    pad[0] = 0x80;
    const view = new DataView(pad.buffer);
    view.setUint32(pad.length - 8, Math.floor(bits / 2 ** 32));
    view.setUint32(pad.length - 4, bits >>> 0);
    this.update(pad);
    return [...this.h].map((x) => x.toString(16).padStart(8, "0")).join("");
  }
}

// ---- the fast incremental hasher: hash-wasm's SHA-256 (WASM, 2-4x the speed of the class above) ----
// tools/build_web.py vendors it from npm (pinned) into build/web/vendor/, served at /vendor/. When it
// cannot load (an older server without that route, offline before the app shell cached it, a host
// without WebAssembly) or gets "abc" wrong, the class above does the work: same digests, slower.
const HASH_WASM = "/vendor/hash-wasm/sha256.umd.min.js";
const ABC = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad";
let wasm = null;  // Promise<createSHA256 | null>, settled once per worker

function loadWasm() {
  wasm ??= (async () => {
    try {
      await import(new URL(HASH_WASM, self.location.origin).href);  // UMD: sets globalThis.hashwasm
      const create = globalThis.hashwasm?.createSHA256;
      const probe = await create();
      probe.init();
      probe.update(new Uint8Array([0x61, 0x62, 0x63]));
      return probe.digest("hex") === ABC ? create : null;
    } catch { return null; }
  })();
  return wasm;
}

/** An incremental SHA-256 with Sha256's interface (update(bytes), hex()) and `kind`: "wasm" or "js". */
export async function createSha256() {
  const create = await loadWasm();
  if (!create) return Object.assign(new Sha256(), { kind: "js" });
  const h = await create();
  h.init();
  return { kind: "wasm", update(bytes) { h.update(bytes); return this; }, hex: () => h.digest("hex") };
}

// ---- per-block digests: the stored file's checksums, checked on every read-back ----
// WebCrypto's SHA-256 is native (SHA-NI / ARMv8 where the CPU has them), runs off this thread in
// Chromium, WebKit and Node, and hashes several times faster than either incremental hasher; it takes
// one buffer per call, so a file is hashed as BLOCK-sized blocks. Without crypto.subtle (an insecure
// context, which has no OPFS or Cache API either) Sha256 stands in: the same digests, slower.
export const BLOCK = 4 << 20;
const IN_FLIGHT = 4;  // digests pending at once: each holds a copy of its block until it is done
const HEX = /^[0-9a-f]{64}$/;

const hex = (buf) => Array.from(new Uint8Array(buf), (b) => b.toString(16).padStart(2, "0")).join("");
export async function blockDigest(bytes) {
  try {
    if (globalThis.crypto?.subtle) return hex(await crypto.subtle.digest("SHA-256", bytes));
  } catch { /* a WebCrypto failure is no verdict on the bytes: hash them here */ }
  return new Sha256().update(bytes).hex();
}

/** `list` is a usable block list for a file of `size` bytes: {block, sha256: [hex, ...]} with at most
 *  one digest per block of the file (a partial file's list covers its complete leading blocks). */
export function blockList(list, size) {
  return list?.block === BLOCK && Array.isArray(list.sha256) && list.sha256.length <= Math.ceil(size / BLOCK)
    && list.sha256.every((d) => HEX.test(d));
}

/** Digests of a file's BLOCK-sized blocks, fed its bytes in order (push); each block that `expected`
 *  has a digest for is compared with it, and `bad` is the first block that differed (-1: none yet). */
export class BlockHashes {
  constructor(size, expected = []) {
    this.size = size;
    this.expected = expected;
    this.sha256 = [];     // digests so far, by block
    this.pending = [];    // in order of block
    this.part = null;     // a block that straddles push()es, gathered (a fresh buffer each: never reused)
    this.fill = 0;
    this.at = 0;          // bytes pushed
    this.bad = -1;
  }

  /** Feeds the next bytes of the file; waits while IN_FLIGHT digests are pending. */
  async push(bytes) {
    for (let i = 0; i < bytes.length;) {
      const want = Math.min(BLOCK, this.size - (this.at - this.fill)) - this.fill;  // to the block's end
      if (want <= 0) throw new Error(`BlockHashes: more than the ${this.size} bytes of the file`);
      if (!this.fill && bytes.length - i >= want) {  // a whole block in hand: no copy
        this.start(bytes.subarray(i, i + want));
        i += want; this.at += want;
      } else {
        const take = Math.min(want, bytes.length - i);
        this.part ??= new Uint8Array(want);
        this.part.set(bytes.subarray(i, i + take), this.fill);
        this.fill += take; i += take; this.at += take;
        if (this.fill === this.part.length) { const whole = this.part; this.part = null; this.fill = 0; this.start(whole); }
      }
      while (this.pending.length >= IN_FLIGHT) await this.pending.shift();
    }
  }

  start(block) { this.record(blockDigest(block)); }

  /** The next block, whole (at a block boundary: none gathered in part), `length` bytes long, hashed
   *  elsewhere (the store's writer): its digest, a Promise of the hex. Nothing waits for it here. */
  adopt(length, digest) {
    if (this.fill || this.at % BLOCK) throw new Error("BlockHashes: adopt() between blocks only");
    this.at += length;
    this.record(digest);
  }

  record(digest) {
    const n = this.sha256.length;
    this.sha256.push(null);
    const done = digest.then((d) => {
      this.sha256[n] = d;
      if (this.expected[n] && this.expected[n] !== d && (this.bad < 0 || n < this.bad)) this.bad = n;
    });
    done.catch(() => {});  // a writer's failure: settle() throws it, no stray rejection meanwhile
    this.pending.push(done);
  }

  /** How many leading blocks have their digest now (a record may name them without waiting). */
  ready() {
    let n = this.readyN || 0;
    while (n < this.sha256.length && this.sha256[n]) n++;
    this.readyN = n;
    return n;
  }

  /** Settles once the digests pending now are done: bytes pushed before it may be reused then. */
  idle() { return Promise.all(this.pending); }

  /** Waits for every pending digest; the list of those done, as a record keeps it. */
  async settle() {
    while (this.pending.length) await this.pending.shift();
    return { block: BLOCK, sha256: this.sha256.slice() };
  }
}

/** Bytes s..s+n of a stored file (a backend handle), the blocks they touch read whole and checked
 *  against `digests` unless in `checked` (those already checked this load; they join it); null when
 *  one is damaged or cut short. Blocks without a digest (a partial record) are read as stored. */
export async function readChecked(file, size, digests, checked, s, n) {
  const first = Math.floor(s / BLOCK), last = Math.floor((s + n - 1) / BLOCK);
  const todo = [];
  for (let b = first; b <= last && n > 0; b++) if (!checked.has(b)) todo.push(b);
  if (!todo.length || last >= digests.length) return file.read(s, n);
  try {
    const from = first * BLOCK, bytes = await file.read(from, Math.min(size, (last + 1) * BLOCK) - from);
    for (const b of todo) {
      const at = (b - first) * BLOCK;
      if ((await blockDigest(bytes.subarray(at, at + BLOCK))) !== digests[b]) return null;
      checked.add(b);
    }
    return bytes.slice(s - from, s - from + n);
  } catch { return null; }
}
