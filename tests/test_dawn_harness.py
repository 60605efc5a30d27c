"""The Dawn harness's stand-ins for the browser (benchmarks/dawn/), in Node without Dawn or a GPU.

What would break silently (a benchmark that measures a different store path, or none): the disk
OPFS (opfs.mjs) under the real weight store (worker/store.js + store_backends.js: OPFS backend picked,
a download stored and checked, a cut download resumed by Range + If-Range from the bytes that were
recorded, a second sync access handle refused as in Chrome, across threads too), the download's
pipeline (stored and hashed on the store's writer thread, a nested worker: worker_shim.mjs; at most
RING blocks in flight while that thread lags; a sha256 mismatch one typed error naming the file, with
nothing kept; the right sha256 recorded), a re-open read back and checked on that thread alone (at
most RING blocks ahead; a flipped stored byte caught there, the file fetched again), the Node server's
Range answers and /api/models entry (serve.mjs), and the page + worker boot (page.mjs: the loader
hook, Pyodide from build/web, the store answering `store_list`, a load without WebGPU failing as
`no-webgpu`).
"""

import random
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DAWN = ROOT / "benchmarks" / "dawn"
FIXTURE = ROOT / "tests" / "fixtures" / "llama-f32"

pytestmark = pytest.mark.skipif(shutil.which("node") is None, reason="needs node")

STORE_AND_SERVER = """
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import fs from "node:fs";
const [dawn, worker, model, storeDir] = process.argv.slice(2);
const { serve } = await import(`${dawn}/serve.mjs`);
const { diskStorage, installOpfsGlobals } = await import(`${dawn}/opfs.mjs`);
const { installWorkerScope } = await import(`${dawn}/worker_shim.mjs`);
const server = await serve({ model, root: `${dawn}/../..` });
installOpfsGlobals();
installWorkerScope({ url: `${server.origin}/worker/worker.js`, gpu: undefined, storage: diskStorage(storeDir) });
globalThis.postMessage = () => {};
const bytes = fs.readFileSync(model), size = bytes.length, name = "x.gguf";
const entry = server.entry, url = `${server.origin}/models/${entry.id}/${name}`;

// /api/models: app/models.py's entry, the ETag the file is served with as its hash
const listed = await (await fetch(`${server.origin}/api/models`)).json();
assert.deepEqual(listed, [entry]);
assert.equal(entry.kind, "gguf"); assert.equal(entry.name, "x"); assert.deepEqual(entry.files, { [name]: size });
const get = async (headers = {}, method = "GET") => {
  const r = await fetch(url, { method, headers });
  return { status: r.status, range: r.headers.get("content-range"), etag: r.headers.get("etag"),
           length: r.headers.get("content-length"), body: Buffer.from(await r.arrayBuffer()) };
};
const whole = await get();
assert.equal(whole.status, 200); assert.ok(whole.body.equals(bytes)); assert.equal(entry.hashes[name].etag, whole.etag);
let r = await get({ Range: "bytes=10-19" });
assert.equal(r.status, 206); assert.equal(r.range, `bytes 10-19/${size}`); assert.ok(r.body.equals(bytes.subarray(10, 20)));
r = await get({ Range: `bytes=${size - 3}-` });
assert.equal(r.status, 206); assert.ok(r.body.equals(bytes.subarray(size - 3)));
r = await get({ Range: "bytes=-5" });
assert.equal(r.status, 206); assert.ok(r.body.equals(bytes.subarray(size - 5)));
r = await get({ Range: `bytes=${size}-` });
assert.equal(r.status, 416); assert.equal(r.range, `bytes */${size}`);
r = await get({ Range: "bytes=10-19", "If-Range": '"another"' });
assert.equal(r.status, 200); assert.equal(r.body.length, size);
r = await get({ Range: "bytes=10-19", "If-Range": whole.etag });
assert.equal(r.status, 206);
r = await get({}, "HEAD");
assert.equal(r.status, 200); assert.equal(r.length, String(size)); assert.equal(r.body.length, 0);
assert.equal((await fetch(`${server.origin}/models/${entry.id}/other.gguf`)).status, 404);
assert.equal((await fetch(`${server.origin}/worker/.hidden`)).status, 404);
assert.equal((await fetch(`${server.origin}/worker/worker.js`)).status, 200);

// the weight store on the disk OPFS: a download cut at the second of its 4 MiB blocks, then resumed
const requests = [];
const fetchBefore = globalThis.fetch;
globalThis.fetch = (input, init) => { requests.push(init?.headers?.Range ?? null); return fetchBefore(input, init); };
const store = await import(`${worker}/store.js`);
const begun = await store.begin({ id: entry.id, name: entry.name, kind: "gguf", base: `/models/${entry.id}/`,
                                  files: entry.files, hashes: entry.hashes });
assert.deepEqual(begun, { missing: size, backend: "opfs" });
const got = Buffer.alloc(size);
let pieces = 0;
const cut = (at, b) => { if (++pieces === 2) throw new Error("cut"); got.set(b, at); };
await assert.rejects(store.streamFile(url, cut), { name: "StoreError" });
const partial = (await store.list())[0].files[0];
assert.equal(partial.written, 4 << 20); assert.equal(partial.complete, false);  // the block that landed
requests.length = 0;
assert.equal(await store.streamFile(url, (at, b) => got.set(b, at)), true);
assert.deepEqual(requests, [`bytes=${4 << 20}-`]);  // only the missing bytes
assert.ok(got.equals(bytes));
assert.equal(store.loadReport().writer, "thread");  // stored and hashed on the writer's thread
assert.ok(fs.readFileSync(`${storeDir}/wisp-models/${entry.id}/${name}`).equals(bytes));
const stored = (await store.list())[0];
assert.equal(stored.files[0].complete, true); assert.equal(stored.bytes, size);
requests.length = 0;
assert.ok((await store.read(url, 100, 50)).every((b, i) => b === bytes[100 + i]));
assert.deepEqual(requests, []);  // from the store, not the network
const { usage, quota } = await store.estimate();
assert.ok(usage >= size && quota > usage);

// Chrome allows one sync access handle per file; the store's records round-trip
const root = await navigator.storage.getDirectory();
const dir = await (await root.getDirectoryHandle("wisp-models")).getDirectoryHandle(entry.id);
const handle = await (await dir.getFileHandle(name)).createSyncAccessHandle();
await assert.rejects((await dir.getFileHandle(name)).createSyncAccessHandle(), { name: "NoModificationAllowedError" });
await assert.rejects(dir.removeEntry(name), { name: "NoModificationAllowedError" });
handle.close();
await assert.rejects(dir.getFileHandle("none"), { name: "NotFoundError" });
await assert.rejects(root.removeEntry("wisp-models"), { name: "InvalidModificationError" });
await store.remove(entry.id);
assert.deepEqual(await store.list(), []);
assert.deepEqual(fs.readdirSync(`${storeDir}/wisp-models`), []);

// The download's pipeline, its writer thread slowed down: at most RING (8) blocks out at once.
// Served with a wrong sha256: one typed error naming the file, nothing of it kept.
const Thread = globalThis.Worker;
let out = 0, most = 0;
globalThis.Worker = class SlowWriter extends Thread {
  set onmessage(f) { this.handler = f; }
  get onmessage() {
    return this.handler && ((e) => setTimeout(() => { if (e.data?.bytes) out--; this.handler(e); }, 3));
  }
  postMessage(m, transfer) {
    if (m?.op === "put" || m?.op === "read") most = Math.max(most, ++out);
    return super.postMessage(m, transfer);
  }
};
const sha256 = createHash("sha256").update(bytes).digest("hex");
const named = (hex) => ({ id: entry.id, name: entry.name, kind: "gguf", base: `/models/${entry.id}/`,
                          files: entry.files, hashes: { [name]: { sha256: hex } } });
await store.begin(named("0".repeat(64)));
await assert.rejects(store.streamFile(url, () => {}),
                     (e) => e.name === "StoreError" && e.kind === "hash" && e.message.includes(`${name}: the downloaded file does not match its sha256`));
assert.ok(!(await store.list()).some((m) => m.files.some((f) => f.complete)));  // nothing kept as valid
assert.ok(!fs.existsSync(`${storeDir}/wisp-models/${entry.id}/${name}`));
await store.begin(named(sha256));
got.fill(0); out = 0; most = 0;
assert.equal(await store.streamFile(url, (at, b) => got.set(b, at)), true);
assert.ok(got.equals(bytes));
assert.ok(most <= 8 && most >= 4, `blocks in flight: ${most}`);  // the ring bounds them, and it filled
const record = JSON.parse(fs.readFileSync(`${storeDir}/wisp-models/${entry.id}/${name}.json`, "utf8"));
assert.equal(record.digest, sha256); assert.equal(record.complete, true);
assert.equal(record.blocks.sha256.length, Math.ceil(size / (4 << 20)));

// Re-opened: the writer's thread reads every block back and takes its digest, this thread reads no
// stored byte (its access handles are counted), at most RING blocks out; a byte flipped on disk is
// caught there, and the file is fetched again.
const readHere = FileSystemSyncAccessHandle.prototype.read;
let readsHere = 0;
FileSystemSyncAccessHandle.prototype.read = function (...a) { readsHere++; return readHere.apply(this, a); };
const reopen = async () => {
  await store.begin(named(sha256));
  got.fill(0); out = 0; most = 0; readsHere = 0; requests.length = 0;
  assert.equal(await store.streamFile(url, (at, b) => got.set(b, at)), true);
  assert.ok(got.equals(bytes));
};
await reopen();
assert.deepEqual(requests, []); assert.equal(readsHere, 0); assert.equal(store.loadReport().writer, "thread");
assert.ok(most <= 8 && most >= 4, `blocks read ahead: ${most}`);
const onDisk = `${storeDir}/wisp-models/${entry.id}/${name}`, flip = 5 * (4 << 20) + 99;
const fd = fs.openSync(onDisk, "r+");
fs.writeSync(fd, Buffer.from([bytes[flip] ^ 1]), 0, 1, flip);
fs.closeSync(fd);
await reopen();
assert.deepEqual(requests, [null]);  // the damaged copy dropped, the whole file fetched again
assert.ok(fs.readFileSync(onDisk).equals(bytes));
await store.remove(entry.id);
await server.close();
console.log("ok");
"""

WORKER_BOOT = """
import assert from "node:assert/strict";
const [dawn, model, storeDir] = process.argv.slice(2);
const { openPage } = await import(`${dawn}/page.mjs`);
const page = await openPage({ model, gpu: undefined, storeDir });
const report = await page.client.storeList();
assert.equal(report.backend, "opfs"); assert.deepEqual(report.models, []);
assert.ok(page.client.booted.pyodide_ms > 0);
await assert.rejects(page.client.load(page.modelRef(page.model), { context: 64 }), { kind: "no-webgpu" });
await page.close();
console.log("ok");
process.exit(0);
"""


def node(script: str, tmp_path: Path, *args) -> subprocess.CompletedProcess:
    path = tmp_path / "check.mjs"
    path.write_text(script)
    return subprocess.run(["node", str(path), *map(str, args)], capture_output=True, text=True, timeout=120)


def test_store_on_disk_opfs_and_range_server(tmp_path):
    model = tmp_path / "x.gguf"
    model.write_bytes(random.Random(7).randbytes(12 * (4 << 20) + 1_234_567))  # 12.3 blocks of 4 MiB
    out = node(STORE_AND_SERVER, tmp_path, DAWN, ROOT / "worker", model, tmp_path / "opfs")
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr


@pytest.mark.slow  # Pyodide boots in Node
def test_worker_boots_on_the_harness(tmp_path):
    build = subprocess.run([sys.executable, str(ROOT / "tools" / "build_web.py")], capture_output=True, text=True)
    assert build.returncode == 0, build.stderr
    out = node(WORKER_BOOT, tmp_path, DAWN, FIXTURE, tmp_path / "opfs")
    assert out.returncode == 0 and out.stdout.strip().endswith("ok"), out.stderr
