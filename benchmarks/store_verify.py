"""Re-opening a stored model file: how long the weight store's check takes. Prints one JSON object.

    python benchmarks/store_verify.py [--size-mb 1024] [--repeats 3] [--rev HEAD] [--variants before,js,wasm]
                                      [--chromium /usr/bin/chromium]

A synthetic file of random bytes (--size-mb MiB, served as a GGUF model with its sha256, as a catalog
model is) goes into the store of a fresh headless Chromium profile through worker/store.js, run on
its own in a module worker (OPFS, as in the app; no Pyodide, no GPU), then is re-opened --repeats
times. A re-open is streamFile() with no sink: the stored bytes read back and checked, the verify
phase of a load without the upload that overlaps it. Variants, one server and profile each:

  before  worker/ as of --rev (git archive): the whole-file SHA-256 in JavaScript on every re-open
  js      this tree's store, /vendor/ not served: block digests on re-open, worker/sha256.js's hasher
          for the whole-file hash (at download, and for a record without block digests)
  wasm    this tree's store with build/web/vendor/ served at /vendor/ (hash-wasm's SHA-256)

Per variant: download_s (first load: download, store, whole-file hash), reopen_s (each re-open) and
reopen_mb_s (the median's rate), read_s (the bare read-back of the same bytes from OPFS in the store's
4 MiB pieces: the floor a re-open cannot beat), hash_mb_s (the incremental SHA-256 and the block
digests on 256 MiB in memory, in that worker) and, for this tree's store, legacy_s: one re-open of a
record written before block digests existed (hashed whole, then given its digests).
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FLAGS = ["--no-sandbox", "--disable-background-networking", "--disable-component-update", "--no-first-run"]
PAGE = b"<!doctype html><title>store_verify</title>"

# In a module worker (a blob: URL keeps the page's origin): the store's own functions, timed.
WORKER = """
const ms = (t) => (performance.now() - t) / 1000;
self.onmessage = async ({ data: { model, repeats, after } }) => {
  const origin = self.location.origin, name = Object.keys(model.files)[0], url = `${origin}${model.base}${name}`;
  const store = await import(`${origin}/worker/store.js`);
  const out = {};
  await store.remove(model.id);
  await store.begin(model);
  let t = performance.now();
  await store.streamFile(url, null);
  out.download_s = ms(t);
  out.reopen_s = [];
  for (let i = 0; i < repeats; i++) {
    await store.begin(model);
    t = performance.now();
    await store.streamFile(url, null);
    out.reopen_s.push(ms(t));
  }
  const { pickBackend } = await import(`${origin}/worker/store_backends.js`);
  const backend = pickBackend(), file = await backend.open(model.id, name), size = model.files[name];
  t = performance.now();
  for (let pos = 0; pos < size; pos += 4 << 20) await file.read(pos, Math.min(4 << 20, size - pos));
  out.read_s = ms(t);
  await file.close();
  const sha = await import(`${origin}/worker/sha256.js`);
  const data = new Uint8Array(256 << 20);
  for (let i = 0; i < data.length; i += 65536) crypto.getRandomValues(data.subarray(i, i + 65536));
  const rate = async (hash) => { const t0 = performance.now(); await hash(); return Math.round(data.length / ms(t0) / 1e6); };
  out.hash_mb_s = { js: await rate(() => new sha.Sha256().update(data).hex()) };
  if (after) {
    const h = await sha.createSha256();
    out.hasher = h.kind;
    out.hash_mb_s[`whole_file_${h.kind}`] = await rate(() => h.update(data).hex());
    out.hash_mb_s.blocks_webcrypto = await rate(async () => { const b = new sha.BlockHashes(data.length); await b.push(data); await b.settle(); });
    await backend.putMeta(model.id, name, { ...(await backend.getMeta(model.id, name)), blocks: null });
    await store.begin(model);
    t = performance.now();
    await store.streamFile(url, null);
    out.legacy_s = ms(t);
    out.upgraded = !!(await backend.getMeta(model.id, name)).blocks;
  }
  await store.remove(model.id);
  self.postMessage({ type: "result", ...out });
};
"""

# A stall (once, here, a store write that never returned, in Chromium's OPFS) ends the variant with an
# error after `limit_s` instead of hanging the benchmark.
RUN = """async ({src, model, repeats, after, limit_s}) => {
  const worker = new Worker(URL.createObjectURL(new Blob([src], {type: "text/javascript"})), {type: "module"});
  let last = null;
  try {
    return await new Promise((resolve) => {
      worker.onmessage = ({data}) => { if (data.type === "result") resolve(data); else last = data; };
      worker.onerror = (e) => resolve({error: e.message});
      setTimeout(() => resolve({error: `no result within ${limit_s} s; last progress ${JSON.stringify(last)}`}), limit_s * 1000);
      worker.postMessage({model, repeats, after});
    });
  } finally { worker.terminate(); }
}"""


def synthetic(path: Path, size: int) -> str:
    """Random bytes (incompressible, like weights) written to `path`; their sha256."""
    digest = hashlib.sha256()
    with open(path, "wb") as out:
        for at in range(0, size, 64 << 20):
            piece = os.urandom(min(64 << 20, size - at))
            digest.update(piece)
            out.write(piece)
    return digest.hexdigest()


def tree_at(rev: str, into: Path) -> Path:
    """worker/ and static/ as of `rev`, for the server's root."""
    archive = subprocess.run(["git", "archive", rev, "worker", "static"], cwd=ROOT, capture_output=True, check=True)
    into.mkdir(parents=True, exist_ok=True)
    tar_path = into / "tree.tar"
    tar_path.write_bytes(archive.stdout)
    with tarfile.open(tar_path) as tar:
        tar.extractall(into, filter="data")
    return into


def serving(app, vendor: Path | None):
    """The app, plus /bench.html (a blank page of its origin) and /vendor/* from `vendor` (404 without one)."""
    from starlette.responses import FileResponse, Response

    async def wrapped(scope, receive, send):
        path = scope.get("path", "")
        if scope["type"] == "http" and path == "/bench.html":
            return await Response(PAGE, media_type="text/html")(scope, receive, send)
        if scope["type"] == "http" and path.startswith("/vendor/"):
            file = vendor / path[len("/vendor/") :] if vendor else None
            ok = file is not None and file.resolve().is_relative_to(vendor.resolve()) and file.is_file()
            response = FileResponse(file, media_type="text/javascript") if ok else Response(status_code=404)
            return await response(scope, receive, send)
        return await app(scope, receive, send)

    return wrapped


def run_variant(p, args, variant: str, model_path: Path, sha256: str, work: Path) -> dict:
    from app.models import ModelRegistry
    from app.server import create_app

    root = tree_at(args.rev, work / "before") if variant == "before" else ROOT
    web = ROOT / "build" / "web"
    app = create_app(ModelRegistry([model_path], include_cache=False), root=root, web_dir=web)
    vendor = web / "vendor" if variant == "wasm" else None
    if vendor is not None and not (vendor / "hash-wasm").is_dir():
        raise SystemExit("build/web/vendor/hash-wasm is missing: run python tools/build_web.py")
    with running(serving(app, vendor)) as port:
        base = f"http://127.0.0.1:{port}"
        entry = json.loads(_get(base + "/api/models"))[0]
        model = {**entry, "base": f"/models/{entry['id']}/", "hashes": {model_path.name: {"sha256": sha256}}}
        profile = tempfile.mkdtemp(dir=work, prefix=f"profile-{variant}-")
        context = p.chromium.launch_persistent_context(
            profile, headless=True, executable_path=args.chromium, args=FLAGS
        )
        try:
            page = context.new_page()
            page.goto(base + "/bench.html")
            result = page.evaluate(
                RUN,
                {
                    "src": WORKER,
                    "model": model,
                    "repeats": args.repeats,
                    "after": variant != "before",
                    "limit_s": args.limit_s,
                },
            )
        finally:
            context.close()
    if "error" in result:
        return {"error": result["error"]}  # the other variants still run
    result.pop("type", None)
    median = statistics.median(result["reopen_s"])
    size_mb = model_path.stat().st_size / 1e6
    rounded = {k: (round(v, 3) if isinstance(v, float) else v) for k, v in result.items()}
    rounded["reopen_s"] = [round(s, 3) for s in result["reopen_s"]]
    return {**rounded, "reopen_mb_s": round(size_mb / median), "read_mb_s": round(size_mb / result["read_s"])}


@contextlib.contextmanager
def running(app):
    """`app` on uvicorn in a thread, on a free loopback port (as tests/test_server.py does)."""
    import uvicorn

    from app.__main__ import bind

    sock = bind("127.0.0.1", 0)
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="off"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.01)
    try:
        yield sock.getsockname()[1]
    finally:
        server.should_exit = True
        thread.join(10)


def _get(url: str) -> str:
    import urllib.request

    with urllib.request.urlopen(url) as response:
        return response.read().decode()


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size-mb", type=int, default=1024, help="the file's size in MiB")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--rev", default="HEAD", help="the commit whose store is 'before'")
    parser.add_argument("--variants", default="before,js,wasm")
    parser.add_argument("--chromium", default="/usr/bin/chromium")
    parser.add_argument("--limit-s", type=int, default=900, help="give up on a variant after this long")
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT))
    from playwright.sync_api import sync_playwright

    out = {"browser": "chromium (headless)", "size_bytes": args.size_mb << 20, "rev_before": args.rev, "variants": {}}
    with tempfile.TemporaryDirectory(prefix="store_verify-") as tmp:
        work = Path(tmp)
        model_path = work / "synthetic.gguf"
        sha256 = synthetic(model_path, args.size_mb << 20)
        with sync_playwright() as p:
            for variant in args.variants.split(","):
                out["variants"][variant] = run_variant(p, args, variant, model_path, sha256, work)
                shutil.rmtree(next(work.glob(f"profile-{variant}-*")), ignore_errors=True)  # its 1 GB copy
                print(f"store_verify: {variant}: {out['variants'][variant]}", file=sys.stderr, flush=True)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
