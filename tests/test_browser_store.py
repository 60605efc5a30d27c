"""The browser's weight store (worker/store.js) in headless Chromium: OPFS and the Cache API.

The store's checks of stored bytes (a whole-file SHA-256 once, every block's digest on each
read-back) run on a synthetic 3-block file loaded by store.js alone, in a worker (OPFS) or the page
(Cache API): no Pyodide, so each step takes a moment. The app runs in-process behind a tap (an ASGI wrapper) that logs every /models/* request — its
Range header and the body bytes sent — and can end a response after N bytes, as an interrupted
download does (a short body: no Content-Length, a clean end, so the browser hands the worker every
byte sent; a dropped connection's unread bytes may be discarded, which made the test depend on the
machine's speed). The tiny Qwen3 fixture with the made-up tokenizer (test_chat.py) keeps each
load a few seconds on SwiftShader; its greedy tokens (reference.json) are the desktop's."""

import hashlib
import json
import random
import shutil

import pytest
from browser_harness import CHROMIUM, FLAGS
from test_chat import FIXTURE, write_tiny_tokenizer
from test_server import running

playwright_api = pytest.importorskip("playwright.sync_api")
pytestmark = pytest.mark.browser
MODEL = "qwen3-tiny"
REF = json.loads((FIXTURE / "reference.json").read_text())
N = 6  # greedy tokens compared
PHASES = ["boot", "store", "download", "verify", "upload", "compile"]
BLOCK = 4 << 20  # worker/sha256.js BLOCK
BLOB_SIZE = 2 * BLOCK + 1_234_567

RUN = """async ({modelId, ids, n, url, code}) => {
  const {WispClient, fetchModels} = await import("/static/client.js");
  const model = (await fetchModels()).find((m) => m.id === modelId);
  const client = new WispClient(url ? {url} : {});
  const phases = [];  // each phase as it begins: one that comes back after a later one is out of order
  try {
    if (code) {  // test hook (worker.js?test): Python run in the worker before the load
      client.start();
      const answer = new Promise((r) => client.addEventListener("test_result", (e) => r(e.detail), {once: true}));
      client._post({type: "test_exec", id: "hook", code});
      const r = await answer;
      if (r.error) throw new Error(r.error);
    }
    await client.load(model, {context: 64}, {onProgress: (p) => { if (phases.at(-1) !== p.phase) phases.push(p.phase); }});
    const generation = client.generate({ids, sampling: {temperature: 0, max_new_tokens: n}});
    for await (const _ of generation) { /* text pieces */ }
    const done = await generation.done;
    const tokens = done.stop === "eos" ? done.tokens.slice(0, -1) : done.tokens;  // a final stop id is no answer token
    const store = await client.storeList();
    return {tokens, phases, store};
  } catch (e) {
    return {error: {kind: e.kind, message: e.message}, phases};
  } finally { client.terminate(); }
}"""

# The stored copy of one file, read from the page (OPFS): {size, sha256} or null.
STORED = """async ([model, name]) => {
  try {
    const root = await navigator.storage.getDirectory();
    const dir = await (await root.getDirectoryHandle("wisp-models")).getDirectoryHandle(model);
    const file = await (await dir.getFileHandle(name)).getFile();
    const digest = await crypto.subtle.digest("SHA-256", await file.arrayBuffer());
    const meta = JSON.parse(await (await (await dir.getFileHandle(name + ".json")).getFile()).text());
    return {size: file.size, meta, sha256: [...new Uint8Array(digest)].map((b) => b.toString(16).padStart(2, "0")).join("")};
  } catch (e) { return null; }
}"""

ENTRIES = """async (model) => {
  try {
    const root = await navigator.storage.getDirectory();
    const dir = await (await root.getDirectoryHandle("wisp-models")).getDirectoryHandle(model);
    const names = [];
    for await (const name of dir.keys()) names.push(name);
    return names;
  } catch (e) { return []; }
}"""


# Test hook (worker.js?test): the weights' upload starts only once the loader waits for it, so every
# byte lands while the load narrates it (a tiny model's would all land while its kernels compile).
LIVE_UPLOAD = """import asyncio
from py_engine.web import files

early = files.RemoteModel._upload


async def live(self, device):
    while self.progress is None:
        await asyncio.sleep(0.005)
    await early(self, device)


files.RemoteModel._upload = live
'ok'"""


class Tap:
    """Logs /models/* responses ({path, range, bytes}); `cut = (file name, n)` ends the next such
    response after n body bytes (sent chunked, without its Content-Length, so the short body ends
    cleanly and reaches the worker whole)."""

    def __init__(self, app):
        self.app, self.log, self.cut = app, [], None

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http" or not scope["path"].startswith("/models/"):
            return await self.app(scope, receive, send)
        entry = {"path": scope["path"], "range": dict(scope["headers"]).get(b"range", b"").decode(), "bytes": 0}
        self.log.append(entry)
        cut = self.cut if self.cut and scope["path"].endswith("/" + self.cut[0]) else None

        ended = False

        async def tapped(message):
            nonlocal ended
            if ended:
                return  # the rest of a cut response
            if cut and message["type"] == "http.response.start":
                message = {
                    **message,
                    "headers": [(k, v) for k, v in message["headers"] if k.lower() != b"content-length"],
                }
            if message["type"] == "http.response.body":
                body = message.get("body", b"")
                if cut and entry["bytes"] + len(body) > cut[1]:
                    self.cut = None
                    keep = cut[1] - entry["bytes"]
                    await send({"type": "http.response.body", "body": body[:keep], "more_body": False})
                    entry["bytes"] += keep
                    ended = True
                    return
                entry["bytes"] += len(body)
            await send(message)

        await self.app(scope, receive, tapped)

    def weight_bytes(self):
        return sum(e["bytes"] for e in self.log)


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    model = tmp_path_factory.mktemp("store") / MODEL
    shutil.copytree(FIXTURE, model)
    (model / "reference.json").unlink()
    write_tiny_tokenizer(model)
    return model


@pytest.fixture(scope="module")
def blob(tmp_path_factory):
    """Random bytes served as a model "blob": three 4 MiB blocks, the last one short."""
    path = tmp_path_factory.mktemp("blob") / "blob.gguf"
    path.write_bytes(random.Random(16).randbytes(BLOB_SIZE))
    return path


@pytest.fixture(scope="module")
def tap(model_dir, blob):
    from app.models import ModelRegistry
    from app.server import create_app

    tap = Tap(create_app(ModelRegistry([model_dir, blob], include_cache=False)))
    with running(tap) as port:
        tap.url = f"http://127.0.0.1:{port}"
        yield tap


@pytest.fixture(scope="module")
def page(tap, tmp_path_factory):
    with playwright_api.sync_playwright() as p:
        context = p.chromium.launch_persistent_context(
            str(tmp_path_factory.mktemp("chromium")), headless=True, executable_path=CHROMIUM, args=FLAGS
        )
        page = context.new_page()
        page.goto(tap.url + "/")
        yield page
        context.close()


def run(page, **kw):
    return page.evaluate(RUN, {"modelId": MODEL, "ids": REF["prompt_ids"], "n": N, "url": None, "code": None, **kw})


def remove(page, url=None):
    page.evaluate(
        """async ([model, url]) => {
      const {WispClient} = await import("/static/client.js");
      const c = new WispClient(url ? {url} : {});
      try { return await c.storeRemove(model); } finally { c.terminate(); }
    }""",
        [MODEL, url],
    )


def test_second_load_reads_no_weight_bytes(page, tap, model_dir):
    tap.log.clear()
    first = run(page)
    assert "error" not in first, first
    assert first["tokens"] == REF["greedy"][:N]
    sizes = {p.name: p.stat().st_size for p in model_dir.iterdir()}
    assert tap.weight_bytes() == sum(sizes.values())  # every file exactly once
    assert first["phases"] == PHASES  # the page's steps, each once, in order
    listed = next(m for m in first["store"]["models"] if m["model"]["id"] == MODEL)
    assert all(f["complete"] and f["written"] == sizes[f["name"]] for f in listed["files"]), [
        f for f in listed["files"] if not (f["complete"] and f["written"] == sizes[f["name"]])
    ]
    assert first["store"]["backend"] == "opfs"

    page.reload()
    tap.log.clear()
    second = run(page, url="/worker/worker.js?test", code=LIVE_UPLOAD)
    assert second["tokens"] == first["tokens"]
    assert tap.log == []  # config, tokenizer, header and weights all came from the store
    assert second["phases"] == ["store", "verify", "upload", "compile"]  # the last block's check first (booted before)


def test_interrupted_download_resumes_from_the_stored_offset(page, tap, model_dir):
    remove(page)
    weights = model_dir / "model.safetensors"
    tap.log.clear()
    tap.cut = ("model.safetensors", 300_000)
    failed = run(page)
    assert failed.get("error"), [e for e in tap.log if "safetensors" in e["path"]]
    partial = page.evaluate(STORED, [MODEL, "model.safetensors"])
    assert partial and 0 < partial["meta"]["written"] <= 300_000 and not partial["meta"]["complete"], (failed, tap.log)

    tap.log.clear()
    resumed = run(page)
    assert resumed.get("tokens") == REF["greedy"][:N], resumed
    ranges = [e["range"] for e in tap.log if e["path"].endswith("/model.safetensors")]
    assert ranges == [f"bytes={partial['meta']['written']}-"], tap.log  # only the rest was fetched
    stored = page.evaluate(STORED, [MODEL, "model.safetensors"])
    assert stored["meta"]["complete"] and stored["size"] == weights.stat().st_size
    assert stored["sha256"] == hashlib.sha256(weights.read_bytes()).hexdigest()


def test_corrupt_stored_file_is_discarded_and_fetched_again(page, tap, model_dir):
    stored = page.evaluate(STORED, [MODEL, "model.safetensors"])
    if not (stored and stored["meta"]["complete"]):  # the resume test left it complete; on its own: load it
        assert run(page).get("tokens") == REF["greedy"][:N]
    page.evaluate(
        """async (model) => {
      const root = await navigator.storage.getDirectory();
      const dir = await (await root.getDirectoryHandle("wisp-models")).getDirectoryHandle(model);
      const w = await (await dir.getFileHandle("model.safetensors")).createWritable({keepExistingData: true});
      await w.write({type: "write", position: 200000, data: new Uint8Array(64).fill(0x55)});
      await w.close();
    }""",
        MODEL,
    )
    weights = model_dir / "model.safetensors"
    tap.log.clear()
    again = run(page)
    assert again.get("tokens") == REF["greedy"][:N], again  # the desktop's tokens: no corrupt weight was used
    fetched = [e for e in tap.log if e["path"].endswith("/model.safetensors")]
    assert [(e["range"], e["bytes"]) for e in fetched] == [("", weights.stat().st_size)]
    stored = page.evaluate(STORED, [MODEL, "model.safetensors"])
    assert stored["sha256"] == hashlib.sha256(weights.read_bytes()).hexdigest()


def test_quota_error_writes_nothing(page, tap):
    remove(page)
    code = (
        "from js import eval as js_eval\n"
        "js_eval('navigator.storage.estimate = async () => ({usage: 1000000, quota: 1100000})')\n'ok'"
    )
    result = run(page, url="/worker/worker.js?test", code=code)
    assert result.get("error", {}).get("kind") == "quota", result
    assert "needs" in result["error"]["message"] and "MB available" in result["error"]["message"]
    assert page.evaluate(ENTRIES, MODEL) == []


def test_cache_api_fallback(page, tap):
    url = "/worker/worker.js?store=cache"
    remove(page, url)
    tap.log.clear()
    first = run(page, url=url)
    assert first.get("tokens") == REF["greedy"][:N], first
    assert first["store"]["backend"] == "cache" and tap.log
    tap.log.clear()
    second = run(page, url=url)
    assert second["tokens"] == first["tokens"] and tap.log == []


# The Cache API backend on its own, in the page (a window has no sync access handles, so
# pickBackend() takes the Cache API): a 80 MB file must land as entries of at most 64 MB each —
# WebKit has failed larger Cache API writes — and read back intact.
CACHE_PUTS = """async () => {
  const {pickBackend} = await import("/worker/store_backends.js");
  const backend = pickBackend();
  const file = await backend.open("big-model", "weights.bin");
  const piece = new Uint8Array(4 << 20);
  for (let i = 0; i < 20; i++) { piece.fill(i + 1); await file.write(i * piece.length, piece); }
  await file.close();
  const cache = await caches.open("wisp-models-v1");
  const sizes = [];
  for (const req of await cache.keys()) {
    if (req.url.includes("/big-model/")) sizes.push((await (await cache.match(req)).arrayBuffer()).byteLength);
  }
  const probes = [];
  for (const at of [0, (4 << 20) - 1, 4 << 20, (64 << 20) + 5, (80 << 20) - 1]) probes.push((await file.read(at, 1))[0]);
  await backend.removeModel("big-model");
  return {kind: backend.kind, sizes, probes};
}"""


def test_cache_api_writes_stay_under_64_mb(page):
    result = page.evaluate(CACHE_PUTS)
    assert result["kind"] == "cache"
    assert sum(result["sizes"]) == 80 << 20 and max(result["sizes"]) <= 64 << 20, result["sizes"]
    assert result["probes"] == [1, 1, 2, 17, 20]


# store.js alone: begin() the "blob" model, streamFile() its file, then read() 16 bytes in block 1,
# in a module worker (OPFS; a blob: worker keeps the page's origin) or in the page (Cache API).
STREAM = """async ({model, inPage}) => {
  const run = async (model) => {
    const store = await import(`${self.location.origin}/worker/store.js`);
    await store.begin(model, "t");
    const name = Object.keys(model.files)[0], url = `${self.location.origin}${model.base}${name}`;
    const out = new Uint8Array(model.files[name]);
    try {
      const readFirst = model.readFirst ? [...(await store.read(url, (4 << 20) + 3, 16))] : null;
      await store.streamFile(url, (at, b) => out.set(b, at));
      const writer = store.loadReport().writer ?? null;  // where the store's writer had the file (download, read-back)
      const range = [...(await store.read(url, (4 << 20) + 3, 16))];
      const digest = new Uint8Array(await crypto.subtle.digest("SHA-256", out));
      return {sha256: Array.from(digest, (b) => b.toString(16).padStart(2, "0")).join(""), readFirst, range, writer};
    } catch (e) { return {error: `${e.name}: ${e.message}`, kind: e.kind}; }
  };
  const phases = new Set();
  if (inPage) {
    const seen = (e) => { if (e.data?.type === "progress") phases.add(e.data.phase); };
    self.addEventListener("message", seen);
    try { return {...(await run(model)), phases: [...phases]}; } finally { self.removeEventListener("message", seen); }
  }
  const src = `const run = ${run}; self.onmessage = async (e) => self.postMessage({type: "result", ...(await run(e.data))});`;
  const worker = new Worker(URL.createObjectURL(new Blob([src], {type: "text/javascript"})), {type: "module"});
  try {
    const result = await new Promise((resolve) => {
      worker.onmessage = ({data}) => (data.type === "progress" ? phases.add(data.phase) : resolve(data));
      worker.onerror = (e) => resolve({error: e.message});
      worker.postMessage(model);
    });
    return {...result, phases: [...phases]};
  } finally { worker.terminate(); }
}"""

# Damage to the stored blob, from the page: bytes written over at `at`, the file cut to `cut` bytes,
# record fields replaced (OPFS); or a Cache API chunk dropped.
DAMAGE = """async ({at, cut, record, chunk}) => {
  if (chunk !== null) {
    const cache = await caches.open("wisp-models-v1");
    return cache.delete(`${location.origin}/wisp-store/blob/blob.gguf?chunk=${chunk}`);
  }
  const dir = await (await (await navigator.storage.getDirectory()).getDirectoryHandle("wisp-models")).getDirectoryHandle("blob");
  if (at !== null || cut !== null) {
    const w = await (await dir.getFileHandle("blob.gguf")).createWritable({keepExistingData: true});
    if (at !== null) await w.write({type: "write", position: at, data: new Uint8Array(3).fill(0xa5)});
    if (cut !== null) await w.truncate(cut);
    await w.close();
  }
  if (record) {
    const handle = await dir.getFileHandle("blob.gguf.json");
    const meta = {...JSON.parse(await (await handle.getFile()).text()), ...record};
    const w = await handle.createWritable();
    await w.write(JSON.stringify(meta));
    await w.close();
  }
  return true;
}"""


def test_stored_file_is_checked_block_by_block(page, tap, blob):
    """Every corruption the store must catch on a re-open, caught wherever it lands: a damaged byte in a
    middle block (no sample would have to hit it), a file cut short, a lost Cache API chunk, damage
    in a partial file's prefix (no whole-file hash yet); a record without block digests (an older
    store) is hashed whole and gains them. A download is stored and hashed on the store's writer
    thread (a nested worker), and a re-open read back and checked there: a file that does not match
    the sha256 it was served with is one typed error naming it, and nothing of it is kept."""
    data = blob.read_bytes()
    want = hashlib.sha256(data).hexdigest()
    digests = [hashlib.sha256(data[i : i + BLOCK]).hexdigest() for i in range(0, BLOB_SIZE, BLOCK)]
    model = next(
        m for m in json.loads(page.evaluate("fetch('/api/models').then((r) => r.text())")) if m["id"] == "blob"
    )
    model["base"] = "/models/blob/"
    remove_blob = """async () => {  // both stores: the page's store.js has the Cache API, the worker's OPFS
      await (await import('/worker/store.js')).remove('blob');
      const top = await (await navigator.storage.getDirectory()).getDirectoryHandle('wisp-models', {create: true});
      await top.removeEntry('blob', {recursive: true}).catch(() => {});
    }"""

    def stream(read_first=False, in_page=False):
        tap.log.clear()
        result = page.evaluate(STREAM, {"model": {**model, "readFirst": read_first}, "inPage": in_page})
        assert result.get("sha256") == want, result
        assert result["range"] == list(data[BLOCK + 3 : BLOCK + 19]), result
        return result, [(e["range"], e["bytes"]) for e in tap.log]

    def damage(at=None, cut=None, record=None, chunk=None):
        assert page.evaluate(DAMAGE, {"at": at, "cut": cut, "record": record, "chunk": chunk})

    page.evaluate(remove_blob)
    first, fetched = stream()
    assert fetched == [("", BLOB_SIZE)] and first["writer"] == "thread"
    meta = page.evaluate(STORED, ["blob", "blob.gguf"])["meta"]
    assert meta["complete"] and meta["verified_at"] and meta["digest"] is None  # served by ETag: no sha256 to check
    assert meta["blocks"] == {"block": BLOCK, "sha256": digests}

    # Served with a sha256 the bytes do not match: one clear error naming the file, nothing kept; with
    # the right one, the writer's whole-file hash is recorded.
    page.evaluate(remove_blob)
    tap.log.clear()
    wrong = page.evaluate(STREAM, {"model": {**model, "hashes": {"blob.gguf": {"sha256": "0" * 64}}}, "inPage": False})
    assert (
        wrong.get("kind") == "hash" and "blob.gguf" in wrong["error"] and "does not match its sha256" in wrong["error"]
    )
    assert [(e["range"], e["bytes"]) for e in tap.log] == [("", BLOB_SIZE)]  # a fresh download: not tried twice
    assert page.evaluate(STORED, ["blob", "blob.gguf"]) is None
    named = page.evaluate(STREAM, {"model": {**model, "hashes": {"blob.gguf": {"sha256": want}}}, "inPage": False})
    assert named.get("sha256") == want and named["writer"] == "thread", named
    assert page.evaluate(STORED, ["blob", "blob.gguf"])["meta"]["digest"] == want

    again, fetched = stream()  # re-opened: by the blocks' digests, nothing fetched
    assert fetched == [] and again["phases"] == ["verify"]
    assert again["writer"] == "thread"  # read back and checked on the writer's thread (the damage below too)

    damage(at=BLOCK + BLOCK // 2 + 12_345)  # the middle block
    assert stream()[1] == [("", BLOB_SIZE)]
    damage(cut=BLOCK + 5)  # cut short
    assert stream()[1] == [("", BLOB_SIZE)]

    damage(at=BLOCK + 3)  # read() of a damaged header range: from the network, and the file goes
    result, fetched = stream(read_first=True)
    assert result["readFirst"] == list(data[BLOCK + 3 : BLOCK + 19])
    assert fetched == [(f"bytes={BLOCK + 3}-{BLOCK + 18}", 16), ("", BLOB_SIZE)]

    older = {"blocks": None, "digest": want}  # an older record: hashed whole once, then it has the digests
    damage(record=older)
    assert stream()[1] == []
    assert page.evaluate(STORED, ["blob", "blob.gguf"])["meta"]["blocks"]["sha256"] == digests
    damage(record=older, at=100)
    assert stream()[1] == [("", BLOB_SIZE)]
    damage(record={"blocks": None})  # neither digest nor blocks: nothing to check it by, fetched again
    assert stream()[1] == [("", BLOB_SIZE)]

    # A partial file (no whole-file digest yet) whose kept prefix was damaged: not resumed on top of it.
    partial = {"complete": False, "written": 2 * BLOCK, "digest": None, "verified_at": None}
    damage(record={**partial, "blocks": {"block": BLOCK, "sha256": digests[:2]}}, at=7)
    assert stream()[1] == [("", BLOB_SIZE)]
    damage(record={**partial, "blocks": {"block": BLOCK, "sha256": digests[:2]}})  # intact: resumed
    assert stream()[1] == [(f"bytes={2 * BLOCK}-", BLOB_SIZE - 2 * BLOCK)]

    # The Cache API (the page has no sync access handles): re-opened by the digests; a lost chunk refetched.
    page.evaluate(remove_blob)
    cached, fetched = stream(in_page=True)
    assert fetched == [("", BLOB_SIZE)] and cached["writer"] == "here"
    assert stream(in_page=True)[1] == []
    damage(chunk=0)
    assert stream(in_page=True)[1] == [("", BLOB_SIZE)]
    page.evaluate(remove_blob)
