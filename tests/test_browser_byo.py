"""Bring your own model (static/byo.js, static/byo_source.js, worker/remote.js) in headless Chromium.

The page comes from our server with no model of its own; a second local server on another port
is the "hub": CORS headers, Range requests, and every resolve URL redirected to the file's real
place, as Hugging Face's are to its CDN. Through the page's "Load from URL or file…" dialog:
  - a tiny GGUF (a random llama with test_chat.py's made-up byte-level tokenizer and ChatML
    template) loads from the hub's URL and answers; the same file chosen from disk (the file
    input) is that stored model (stored and listed once) and gives the same greedy tokens, while
    a file of the same name and size with other bytes is no such twin;
  - a sharded HF repository URL and a picked folder become the models a load would carry (sizes by
    HEAD, the index's shards), and bad ones are refused with what is wrong;
  - models over the budget (?gpu_budget_mb=8) are refused by the footprint check before a weight
    byte: a GGUF with ~26 MB of weights behind a ~600 KB header is read only in growing header
    probes (none past twice the header), a sharded HF model only its safetensors headers, and
    nothing of either stays stored.
One Pyodide boot serves them all; loads and answers are SwiftShader's, so 3 tokens each."""

import base64
import json
import re
import tempfile
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import gguf
import numpy as np
import pytest
from browser_harness import app_server, check_protocol, launch, record_protocol
from gguf_synthetic import write_gguf
from safetensors.numpy import load_file, save_file
from test_chat import FIXTURE, TEMPLATE, write_tiny_tokenizer

playwright_api = pytest.importorskip("playwright.sync_api")
pytestmark = [pytest.mark.browser, pytest.mark.slow]
BUDGET_MB = 8  # the tiny model needs ~1 MB of GPU memory, the big one ~39 MB (12 of them activations: 512-row prefills)
TOKENS = 3  # greedy tokens per answer (SwiftShader)
BROUGHT_FIRST_PREFIX = 256 << 10  # py_engine/web/files.py: a brought GGUF's first header read


def tokenizer_metadata() -> dict:
    """test_chat.py's byte-level BPE (256 bytes, <|im_start|>, <|im_end|>, letter merges) as GGUF keys."""
    folder = Path(tempfile.mkdtemp())
    write_tiny_tokenizer(folder)
    data = json.loads((folder / "tokenizer.json").read_text())
    vocab = dict(data["model"]["vocab"]) | {t["content"]: t["id"] for t in data["added_tokens"]}
    tokens = sorted(vocab, key=vocab.get)
    specials = {t["content"] for t in data["added_tokens"]}
    end = vocab["<|im_end|>"]
    return dict(
        tokenizer_model="gpt2",
        tokens=tokens,
        types=[3 if t in specials else 1 for t in tokens],
        merges=data["model"]["merges"],
        pre="qwen2",
        eos_token_id=end,
        bos_token_id=end,
        chat_template=TEMPLATE,
    )


def write_llama(
    path: Path, dim: int, ffn: int, layers: int = 2, random: bool = True, pad: int = 0, seed: int = 1
) -> Path:
    """A llama GGUF with the tiny tokenizer: random f32 weights of `seed` (or zeros), and `pad` bytes
    of description in its header."""
    tokenizer = tokenizer_metadata()
    vocab, heads, kv_heads = len(tokenizer["tokens"]), 4, 2
    rng = np.random.default_rng(seed)

    def w(*shape):
        if not random:
            return np.zeros(shape, np.float32)
        return (rng.standard_normal(shape) * 0.3 / np.sqrt(shape[-1])).astype(np.float32)

    kv = dim // heads * kv_heads
    tensors = {"token_embd.weight": 10 * w(vocab, dim)}
    for i in range(layers):
        b = f"blk.{i}."
        shapes = {"attn_q": (dim, dim), "attn_k": (kv, dim), "attn_v": (kv, dim), "attn_output": (dim, dim)}
        shapes |= {"ffn_gate": (ffn, dim), "ffn_up": (ffn, dim), "ffn_down": (dim, ffn)}
        for name, shape in shapes.items():
            tensors[f"{b}{name}.weight"] = w(*shape)
        tensors[f"{b}attn_norm.weight"] = tensors[f"{b}ffn_norm.weight"] = np.ones(dim, np.float32)
    tensors |= {"output_norm.weight": np.ones(dim, np.float32), "output.weight": w(vocab, dim)}
    metadata = [
        ("add_block_count", layers),
        ("add_context_length", 256),
        ("add_embedding_length", dim),
        ("add_feed_forward_length", ffn),
        ("add_head_count", heads),
        ("add_head_count_kv", kv_heads),
    ] + ([("add_description", "x" * pad)] if pad else [])
    return write_gguf(path, "llama", metadata, tensors, tokenizer)


class Hub(BaseHTTPRequestHandler):
    """/<org>/<repo>/resolve/main/<name> redirects (302) to /cdn/<repo>/<name>, which serves the
    file with Range; CORS throughout. Files in NO_HEAD refuse HEAD (405), as some CDNs do."""

    files: dict = {}  # "repo/name" -> Path
    no_head: set = set()
    log: list = []  # {method, path, range, sent}

    def log_message(self, *args):  # quiet
        pass

    def cors(self, status, headers=()):
        self.send_response(status)
        self.send_header("Access-Control-Allow-Origin", "*")
        self.send_header("Access-Control-Expose-Headers", "Content-Range, Content-Length, ETag, Accept-Ranges")
        for key, value in headers:
            self.send_header(key, value)

    def do_OPTIONS(self):  # the preflight of a Range / If-Range request
        self.log.append({"method": "OPTIONS", "path": self.path, "range": "", "sent": 0})
        self.cors(
            204, [("Access-Control-Allow-Methods", "GET, HEAD"), ("Access-Control-Allow-Headers", "Range, If-Range")]
        )
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_HEAD(self):
        self.serve(head=True)

    def do_GET(self):
        self.serve(head=False)

    def serve(self, head):
        entry = {"method": self.command, "path": self.path, "range": self.headers.get("Range", ""), "sent": 0}
        self.log.append(entry)
        resolve = re.fullmatch(r"/[\w.-]+/([\w.-]+)/resolve/main/([\w.-]+)", self.path)
        if resolve:
            self.cors(302, [("Location", f"/cdn/{resolve[1]}/{resolve[2]}"), ("Content-Length", "0")])
            return self.end_headers()
        key = self.path.removeprefix("/cdn/")
        path = self.files.get(key)
        if path is None or (head and key in self.no_head):
            self.cors(404 if path is None else 405, [("Content-Length", "0")])
            return self.end_headers()
        size = path.stat().st_size
        start, end = 0, size
        wanted = re.fullmatch(r"bytes=(\d+)-(\d*)", entry["range"])
        if wanted:
            start, end = int(wanted[1]), min(size, int(wanted[2]) + 1 if wanted[2] else size)
        headers = [("Content-Length", str(end - start)), ("Accept-Ranges", "bytes"), ("ETag", f'"{size}"')]
        if wanted:
            headers.append(("Content-Range", f"bytes {start}-{end - 1}/{size}"))
        self.cors(206 if wanted else 200, headers)
        self.end_headers()
        if head:
            return
        with path.open("rb") as f:
            f.seek(start)
            while entry["sent"] < end - start:
                chunk = f.read(min(1 << 20, end - start - entry["sent"]))
                try:
                    self.wfile.write(chunk)
                except (BrokenPipeError, ConnectionResetError):  # the page read what it wanted
                    return
                entry["sent"] += len(chunk)


def write_sharded(folder: Path, big: bool = False) -> Path:
    """The tiny Qwen3 fixture as an HF repository: config, tokenizer files and two safetensors shards
    with model.safetensors.index.json. big: hidden size 512 and MLP 1536 (zeros), ~21 MB of weights."""
    folder.mkdir()
    config = json.loads((FIXTURE / "config.json").read_text())
    tensors = load_file(FIXTURE / "model.safetensors")
    if big:
        grow = {config["hidden_size"]: 512, config["intermediate_size"]: 1536}
        config |= {"hidden_size": 512, "intermediate_size": 1536}
        tensors = {k: np.zeros([grow.get(n, n) for n in v.shape], np.float32) for k, v in tensors.items()}
    (folder / "config.json").write_text(json.dumps(config))
    (folder / "generation_config.json").write_bytes((FIXTURE / "generation_config.json").read_bytes())
    write_tiny_tokenizer(folder)
    names = sorted(tensors)
    shards = {f"model-0000{i + 1}-of-00002.safetensors": names[i::2] for i in range(2)}
    for shard, keys in shards.items():
        save_file({k: tensors[k] for k in keys}, folder / shard)
    weight_map = {k: shard for shard, keys in shards.items() for k in keys}
    (folder / "model.safetensors.index.json").write_text(json.dumps({"metadata": {}, "weight_map": weight_map}))
    return folder


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    folder = tmp_path_factory.mktemp("byo")
    tiny = write_llama(folder / "tiny.gguf", dim=64, ffn=128)
    (folder / "other").mkdir()
    other = write_llama(folder / "other" / "tiny.gguf", dim=64, ffn=128, seed=2)  # same name and size, other bytes
    big = write_llama(folder / "big.gguf", dim=512, ffn=1536, random=False, pad=600_000)
    return {
        "tiny": tiny,
        "other": other,
        "big": big,
        "qwen": write_sharded(folder / "qwen"),
        "bigqwen": write_sharded(folder / "bigqwen", big=True),
        "notokenizer": write_sharded(folder / "notokenizer"),
    }


@pytest.fixture(scope="module")
def hub(models):
    Hub.files = {"tiny/tiny.gguf": models["tiny"], "big/big.gguf": models["big"]}
    (models["notokenizer"] / "tokenizer.json").unlink()
    repos = ("qwen", "bigqwen", "notokenizer")
    Hub.files |= {f"{repo}/{p.name}": p for repo in repos for p in models[repo].iterdir()}
    Hub.no_head = {"big/big.gguf"}  # its size comes from a one-byte Range's Content-Range
    server = ThreadingHTTPServer(("127.0.0.1", 0), Hub)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


@pytest.fixture(scope="module")
def session(hub, tmp_path_factory):
    """One page of our server (no model of its own) in one browser, its worker traffic recorded."""
    with app_server("--no-default") as (url, _), playwright_api.sync_playwright() as p:
        context = launch(p, tmp_path_factory.mktemp("profile"))
        traffic = record_protocol(context)
        sampling = json.dumps({"temperature": 0, "max_new_tokens": TOKENS})
        context.add_init_script(f"localStorage.setItem('wisp.sampling', {json.dumps(sampling)})")
        page = context.new_page()
        page.goto(f"{url}/?gpu_budget_mb={BUDGET_MB}")
        playwright_api.expect(page.locator("body")).to_have_attribute("data-models", "ready")
        yield page, traffic
        context.close()


def ask(page, traffic):
    """Ask one question in a new chat; the stats of the answer (its `response` event's)."""
    playwright_api.expect(page.get_by_test_id("prompt-input")).to_be_enabled(timeout=120_000)
    page.get_by_test_id("new-chat").click()  # each answer to the same one question
    page.get_by_test_id("prompt-input").fill("hello there")
    return wait_for(page, traffic, "response", lambda: page.get_by_test_id("send-button").click())["stats"]


def events(traffic, kind):
    return [data for to, data in traffic if to == "page" and data.get("type") == kind]


def wait_for(page, traffic, kind, act):
    """Do act(); the next event of this kind."""
    before = len(events(traffic, kind))
    act()
    for _ in range(480):  # the recorder's events arrive while Playwright waits
        if len(events(traffic, kind)) > before:
            return events(traffic, kind)[-1]
        page.wait_for_timeout(250)
    raise AssertionError(f"no {kind} event: {[d.get('type') for _, d in traffic[-20:]]}")


def bring(page, traffic, choose, answer="loaded"):
    """Open "Load from URL or file…" and choose: a URL string, or a callable on the page (a file);
    the worker's next `loaded` event (or `error`)."""

    def act():
        page.get_by_test_id("byo-open").click()
        if callable(choose):
            choose(page)
        else:
            page.get_by_test_id("byo-url").fill(choose)
            page.get_by_test_id("byo-url-load").click()

    return wait_for(page, traffic, answer, act)


def last_load(traffic):
    return [d for to, d in traffic if to == "worker" and d.get("type") == "load"][-1]


def test_a_gguf_from_another_origin_loads_and_answers(session, hub, models):
    page, traffic = session
    Hub.log.clear()
    loaded = bring(page, traffic, f"{hub}/org/tiny/resolve/main/tiny.gguf")
    model = last_load(traffic)["model"]
    assert loaded["model"] == model["id"] and model["source"] == "url" and model["base"].startswith(hub)
    playwright_api.expect(page.get_by_test_id("model-select")).to_contain_text("tiny")  # now in the picker
    done = ask(page, traffic)
    assert done["stop"] == "length" and len(done["tokens"]) == TOKENS, done
    gets = [e for e in Hub.log if e["method"] == "GET" and e["path"] == "/cdn/tiny/tiny.gguf"]
    assert [e["sent"] for e in gets if not e["range"]] == [models["tiny"].stat().st_size], gets  # stored whole, once
    assert any(e["method"] == "GET" and "/resolve/main/" in e["path"] for e in Hub.log)  # followed the redirect
    check_session_traffic(traffic)


# The page's twin check (worker/store.js twin()) of a file made here from `bytes` (base64), named tiny.gguf.
TWIN_OF = """async (b64) => {
  const {sharedClient} = await import("/static/client.js");
  const {fromFiles} = await import("/static/byo_source.js");
  const file = new File([Uint8Array.from(atob(b64), (c) => c.charCodeAt(0))], "tiny.gguf");
  const model = await fromFiles([{path: "tiny.gguf", file}]);
  return {twin: (await sharedClient().storeTwin(model)).twin, name: model.name};
}"""


def test_the_same_file_from_disk_is_stored_once_and_listed_once(session, models):
    """tiny.gguf chosen from disk is byte for byte the model brought by URL before: that stored model
    loads (nothing downloaded or stored again, one entry in the picker and in Storage) and answers
    alike. A tiny.gguf of the same size with other bytes is no twin; brought models are named by
    where they came from, and Storage's figures add up."""
    page, traffic = session
    first = events(traffic, "response")[-1]["stats"]
    by_url = last_load(traffic)["model"]
    Hub.log.clear()
    bring(page, traffic, lambda page: page.get_by_test_id("byo-file-input").set_input_files(str(models["tiny"])))
    twin = [d for d in events(traffic, "store") if "twin" in d][-1]
    assert twin["twin"] == by_url["id"] and last_load(traffic)["model"]["id"] == by_url["id"], twin
    assert ask(page, traffic)["tokens"] == first["tokens"]  # the same file, the same greedy answer
    assert not [e for e in Hub.log if e["method"] == "GET"]  # read from the store: nothing fetched again
    other = page.evaluate(TWIN_OF, base64.b64encode(models["other"].read_bytes()).decode())
    assert other == {"twin": None, "name": "tiny (your file)"}, other
    assert by_url["name"] == f"tiny ({by_url['base'].split('/')[2]})"  # told apart by where it came from

    store = wait_for(page, traffic, "store", lambda: page.get_by_test_id("storage-button").click())
    assert store["usage"] >= sum(m["bytes"] for m in store["models"]), store  # what is used holds the models
    tiny_size = models["tiny"].stat().st_size
    assert [m["model"]["id"] for m in store["models"] if m["bytes"] == tiny_size] == [by_url["id"]], store
    playwright_api.expect(page.get_by_test_id("storage-model")).to_have_count(len(store["models"]))
    picker = [o.split(" · ")[0] for o in page.get_by_test_id("model-select").locator("option").all_inner_texts()]
    assert [o for o in picker if o.startswith("tiny")] == [by_url["name"]], picker
    page.keyboard.press("Escape")
    check_session_traffic(traffic)


# byo_source.js on its own, in the page: what a repository URL and a picked folder become, and
# what they are refused for (a load is not needed: the HF load itself is the refusal test's).
RESOLVE = """async (hub) => {
  const {fromFiles, fromUrl} = await import("/static/byo_source.js");
  const repo = await fromUrl(`${hub}/org/qwen/resolve/main/`);
  const files = (entries) => entries.map(([path, text]) => ({path, file: new File([text], path.split("/").pop())}));
  const index = (map) => JSON.stringify({weight_map: map});
  const folder = await fromFiles(files([["m/config.json", "{}"], ["m/tokenizer.json", "{}"], ["m/notes/a.md", "z"],
    ["m/model.safetensors.index.json", index({x: "a.safetensors", y: "b.safetensors"})],
    ["m/a.safetensors", "aaa"], ["m/b.safetensors", "bb"], ["m/c.safetensors", "unlisted"]]));
  const refused = async (make) => { try { await make(); return null; } catch (e) { return `${e.kind}: ${e.message}`; } };
  const errors = {
    notUrl: await refused(() => fromUrl("model.gguf")),
    scheme: await refused(() => fromUrl("file:///tmp/model.gguf")),
    noRepo: await refused(() => fromUrl(`${hub}/org/none/resolve/main/`)),
    missingShard: await refused(() => fromFiles(files([["m/config.json", "{}"],
      ["m/model.safetensors.index.json", index({x: "a.safetensors", y: "b.safetensors"})], ["m/a.safetensors", "a"]]))),
    escape: await refused(() => fromFiles(files([["m/config.json", "{}"], ["m/../x.safetensors", "a"],
      ["m/model.safetensors.index.json", index({x: "../x.safetensors"})]]))),
    twoGguf: await refused(() => fromFiles(files([["m/a.gguf", "a"], ["m/b.gguf", "b"]]))),
  };
  return {repo, folder: {...folder, blobs: Object.keys(folder.blobs)}, errors};
}"""


def test_a_repository_url_and_a_folder_become_models(session, hub, models):
    page, _ = session
    result = page.evaluate(RESOLVE, hub)
    repo = result["repo"]
    assert repo["kind"] == "hf" and repo["source"] == "url" and repo["name"] == f"org/qwen ({hub.split('/')[2]})"
    assert repo["base"] == f"{hub}/org/qwen/resolve/main/" and re.fullmatch(r"byo-org-qwen-[0-9a-f]{8}", repo["id"])
    assert repo["files"] == {p.name: p.stat().st_size for p in models["qwen"].iterdir()}  # sizes by HEAD
    folder = result["folder"]
    assert folder["kind"] == "hf" and folder["source"] == "local" and folder["base"] == f"local:{folder['id']}/"
    assert folder["files"] == {
        "config.json": 2,
        "tokenizer.json": 2,
        "model.safetensors.index.json": len('{"weight_map":{"x":"a.safetensors","y":"b.safetensors"}}'),
        "a.safetensors": 3,
        "b.safetensors": 2,
    }  # the index's shards only; nothing from a subfolder
    assert sorted(folder["blobs"]) == sorted(folder["files"])
    errors = result["errors"]
    assert all(e and e.startswith("load: ") for e in errors.values()), errors
    assert "not a URL" in errors["notUrl"] and "file:" in errors["scheme"]
    assert "has no config.json" in errors["noRepo"] and "lacks b.safetensors" in errors["missingShard"]
    assert "plain names" in errors["escape"] and "choose one" in errors["twoGguf"]


def test_a_model_over_the_budget_is_refused_before_its_weights(session, hub, models):
    page, traffic = session
    Hub.log.clear()
    error = bring(page, traffic, f"{hub}/org/big/resolve/main/big.gguf", answer="error")
    assert error["kind"] == "load" and "big" in error["message"], error
    assert f"budget of {BUDGET_MB}.0 MB" in error["message"], error
    # the plan's numbers (on a CPU adapter one attention split a layer: 36 MB)
    assert re.search(r"needs (3[6-9]|40) MB \(weights 26 MB", error["message"]), error
    playwright_api.expect(page.get_by_test_id("error-banner")).to_contain_text("budget")
    header = gguf.GGUFReader(models["big"]).data_offset
    reads = [e for e in Hub.log if e["path"] == "/cdn/big/big.gguf" and e["method"] == "GET"]
    ranges = [tuple(map(int, re.fullmatch(r"bytes=(\d+)-(\d+)", e["range"]).groups())) for e in reads]
    assert ranges[0] == (0, 0), ranges  # its size (HEAD is refused here)
    probes = ranges[1:]  # the header, in reads of growing size, none of a byte twice
    assert probes[0] == (0, BROUGHT_FIRST_PREFIX - 1) and len(probes) > 1, ranges
    assert all(b[0] == a[1] + 1 for a, b in zip(probes, probes[1:])), ranges
    # never past twice the header: of 27 MB, the weights start at ~600 KB
    assert header <= probes[-1][1] + 1 <= 2 * header < models["big"].stat().st_size // 10, (ranges, header)
    entries = page.evaluate("""async () => {
      const top = await (await navigator.storage.getDirectory()).getDirectoryHandle("wisp-models");
      const out = [];
      for await (const [name, dir] of top.entries()) for await (const file of dir.keys()) out.push(`${name}/${file}`);
      return out;
    }""")
    assert entries and not [e for e in entries if "big" in e], entries  # nothing of it was stored
    check_session_traffic(traffic)


def test_an_hf_model_over_the_budget_is_refused_after_its_headers(session, hub, models):
    page, traffic = session
    Hub.log.clear()
    error = bring(page, traffic, f"{hub}/org/bigqwen/resolve/main/", answer="error")
    assert error["kind"] == "load" and "org/bigqwen" in error["message"] and "budget" in error["message"], error
    for shard in sorted(models["bigqwen"].glob("*.safetensors")):
        header = int.from_bytes(shard.read_bytes()[:8], "little")
        reads = [e["range"] for e in Hub.log if e["path"] == f"/cdn/bigqwen/{shard.name}" and e["method"] == "GET"]
        assert reads == ["bytes=0-7", f"bytes=8-{8 + header - 1}"], reads  # its header, not a byte more
    model_id = last_load(traffic)["model"]["id"]
    gone = """async (id) => {
      const top = await (await navigator.storage.getDirectory()).getDirectoryHandle("wisp-models");
      try { await top.getDirectoryHandle(id); return false; } catch { return true; }
    }"""
    page.wait_for_function(gone, arg=model_id, timeout=10_000)  # its config and tokenizer went too
    check_session_traffic(traffic)


def test_a_model_without_a_tokenizer_is_refused_at_load(session, hub, models):
    """The chat sends text: a repository with no tokenizer.json is refused with one sentence once
    its headers are read, before a weight byte (the API could still give it token ids)."""
    page, traffic = session
    Hub.log.clear()
    error = bring(page, traffic, f"{hub}/org/notokenizer/resolve/main/", answer="error")
    assert error["kind"] == "load" and "has no tokenizer (tokenizer.json), so it cannot chat" in error["message"]
    playwright_api.expect(page.get_by_test_id("error-banner")).to_contain_text("has no tokenizer")
    for shard in sorted(models["notokenizer"].glob("*.safetensors")):
        header = int.from_bytes(shard.read_bytes()[:8], "little")
        reads = [e["range"] for e in Hub.log if e["path"] == f"/cdn/notokenizer/{shard.name}" and e["method"] == "GET"]
        assert reads == ["bytes=0-7", f"bytes=8-{8 + header - 1}"], reads  # its header, no weights
    check_session_traffic(traffic)


def check_session_traffic(traffic):
    """Every message and event so far fits py_engine/web/protocol.py's table, brought models' included."""
    seen = check_protocol(traffic)
    assert seen.get("load") and seen.get("loaded"), seen
