"""Memory in the page, end to end in headless Chromium (SwiftShader): the Documents panel takes six
dropped files, a PDF (tests/pdf_writer.py), Markdown, HTML and text files, an empty file and a binary
one; the good four are read, embedded by a tiny random BERT (tests/fixtures/embed_bert_tiny with a
made-up WordPiece vocabulary, served by `python -m app` as an embedding model) and kept in OPFS
(py_engine/memory/log_store.py), while the bad two fail on their own rows with the reader's
DocumentError; a folder chosen with the folder picker adds its readable files. One document is
removed. After a reload the other four are listed again (the removed one is not), and the tiny chat
model (test_openai_server's) answers a question about the PDF with "Use my documents" on, its index
built again from the stored vectors: its words are noise (a random model), so the answer is held to
a few tokens and the test checks its citations (the PDF's passage among them, "page 1") and the
passage a click on its citation shows. Then static/openai.js's memory
methods on the same page: a list, a recall, a chat completion with `memory`, an export imported into
another collection (and again: every document already there); then the panel's Export downloads the
documents, one is removed, and its Import brings it back. One page session (two Pyodide boots: the
reload); screenshots of the panel and of a cited passage in tests/artifacts/."""

import base64
import json
import re
import shutil

import pytest
from browser_harness import ROOT, app_server, check_protocol, launch, record_protocol
from pdf_writer import document
from test_openai_server import TINY, tiny_tool_model

playwright_api = pytest.importorskip("playwright.sync_api")
pytestmark = [pytest.mark.browser, pytest.mark.slow]
expect = playwright_api.expect

ARTIFACTS = ROOT / "tests" / "artifacts"
EMBEDDER = ROOT / "tests" / "fixtures" / "embed_bert_tiny"
TRAIN = "The night train to Vienna leaves from platform 4 at 22:15."
FILES = {  # name: (media type, bytes); the last two are refused, each with its own error
    "trains.pdf": ("application/pdf", document([f"BT /F1 12 Tf 72 700 Td ({TRAIN}) Tj ET".encode()])),
    "garden.md": ("text/markdown", b"# Garden\n\nTomatoes need six hours of sun a day and water at the roots."),
    "recipes.txt": ("text/plain", b"Bread needs flour, water, salt and yeast; knead it for ten minutes."),
    "birds.html": ("text/html", b"<html><body><h1>Birds</h1><p>Swifts sleep while they fly.</p></body></html>"),
    "empty.txt": ("text/plain", b""),
    "noise.bin": ("application/octet-stream", bytes(range(256)) * 8),
}
# Greedy and short: the page's sampling settings, before its scripts read them.
SAMPLING = (
    'localStorage.setItem("wisp.sampling", JSON.stringify('
    "{temperature: 0, top_p: 1, repetition_penalty: 1, max_new_tokens: 4}))"
)
DROP = """({files}) => {
  const dt = new DataTransfer();
  for (const f of files) {
    const bytes = Uint8Array.from(atob(f.b64), (c) => c.charCodeAt(0));
    dt.items.add(new File([bytes], f.name, {type: f.type}));
  }
  const zone = document.querySelector("#documents-drop");
  for (const type of ["dragenter", "dragover", "drop"]) {
    zone.dispatchEvent(new DragEvent(type, {dataTransfer: dt, bubbles: true, cancelable: true}));
  }
}"""


def tiny_embedder(directory):
    """The tiny random BERT with a WordPiece vocabulary of its 256 ids: letters and digits (as word
    starts and ## pieces), punctuation, and whole words, so every text encodes (to noise, as a random
    model's vectors are)."""
    folder = directory / "tiny-embedder"
    shutil.copytree(EMBEDDER, folder)
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *".,:;!?'\"-()/#"]
    for ch in "abcdefghijklmnopqrstuvwxyz0123456789":
        vocab += [ch, "##" + ch]
    words = "the a to at of and from for in on is it night train vienna leaves platform tomatoes bread garden"
    vocab += [w for w in words.split() if w not in vocab]
    vocab += [f"[unused{i}]" for i in range(256 - len(vocab))]
    special = {"single_word": False, "lstrip": False, "rstrip": False, "normalized": False, "special": True}
    tokenizer = {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": [{"id": i, "content": vocab[i], **special} for i in range(5)],
        "normalizer": {
            "type": "BertNormalizer",
            "clean_text": True,
            "handle_chinese_chars": True,
            "strip_accents": None,
            "lowercase": True,
        },  # fmt: skip
        "pre_tokenizer": {"type": "BertPreTokenizer"},
        "post_processor": {
            "type": "TemplateProcessing",
            "single": [
                {"SpecialToken": {"id": "[CLS]", "type_id": 0}},
                {"Sequence": {"id": "A", "type_id": 0}},
                {"SpecialToken": {"id": "[SEP]", "type_id": 0}},
            ],
            "pair": [],
            "special_tokens": {
                "[CLS]": {"id": "[CLS]", "ids": [2], "tokens": ["[CLS]"]},
                "[SEP]": {"id": "[SEP]", "ids": [3], "tokens": ["[SEP]"]},
            },
        },
        "decoder": {"type": "WordPiece", "prefix": "##", "cleanup": True},
        "model": {
            "type": "WordPiece",
            "unk_token": "[UNK]",
            "continuing_subword_prefix": "##",
            "max_input_chars_per_word": 100,
            "vocab": {token: i for i, token in enumerate(vocab)},
        },
    }
    (folder / "tokenizer.json").write_text(json.dumps(tokenizer))
    (folder / "tokenizer_config.json").write_text(
        json.dumps({"tokenizer_class": "BertTokenizer", "do_lower_case": True})
    )
    return folder


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    root = tmp_path_factory.mktemp("memory")
    chat = tiny_tool_model(root)
    config = json.loads((chat / "config.json").read_text())  # room for the passages before the question
    (chat / "config.json").write_text(json.dumps({**config, "max_position_embeddings": 1024}))
    with app_server("--no-default", "--model", str(chat), str(tiny_embedder(root))) as (url, _):
        yield url


def tid(page, name):
    return page.get_by_test_id(name)


def open_documents(page, server):
    page.goto(server + "/")
    tid(page, "documents-button").click()
    expect(tid(page, "documents-usage")).to_contain_text("Your documents take", timeout=60_000)


def listed(page) -> list[str]:
    return tid(page, "documents-item").locator(".store-name").all_text_contents()


API = """async ({tiny}) => {
  const {Wisp} = await import("/static/openai.js");
  const wisp = new Wisp();
  const listed = await wisp.memory.documents.list();
  const recalled = await wisp.memory.recall({query: "night train to Vienna", k: 5});
  const answer = await wisp.chat.completions.create({model: tiny, max_tokens: 2, temperature: 0, memory: {collection: "documents", k: 5},
    messages: [{role: "user", content: "When does the train leave?"}]});
  const lines = await wisp.memory.export();  // a Blob of JSON lines, into another collection
  const copied = await wisp.memory.import({collection: "copy", data: lines});
  const again = await wisp.memory.import({collection: "copy", data: await lines.text()});
  const copy = await wisp.memory.documents.list({collection: "copy"});
  return {listed: listed.data.map((d) => d.source), recalled: recalled.data, answer, copied, again,
          copy: copy.data.map((d) => d.source)};
}"""


def test_documents_are_kept_recalled_and_cited(server, tmp_path):
    with playwright_api.sync_playwright() as p:
        context = launch(p, tmp_path / "profile", viewport={"width": 1280, "height": 860})
        traffic = record_protocol(context)
        context.add_init_script(SAMPLING)
        page = context.new_page()
        errors = []
        page.on("pageerror", lambda exc: errors.append(str(exc)))

        open_documents(page, server)
        expect(tid(page, "documents-list")).to_contain_text("No documents yet")
        files = [{"name": n, "type": t, "b64": base64.b64encode(b).decode()} for n, (t, b) in FILES.items()]
        page.evaluate(DROP, {"files": files})
        expect(tid(page, "documents-job")).to_have_count(6)  # a row each, until it is listed
        expect(tid(page, "documents-item")).to_have_count(4, timeout=120_000)
        failed = tid(page, "documents-job")
        expect(failed).to_have_count(2)  # each with its own error; the others went in
        expect(failed.locator(".doc-status")).to_have_text(["is empty", re.compile("^is binary data, not text")])
        assert failed.locator(".doc-name").all_text_contents() == ["empty.txt", "noise.bin"]
        assert listed(page) == ["trains.pdf", "garden.md", "recipes.txt", "birds.html"]
        folder = tmp_path / "notes"  # the folder picker: its readable files, by their paths in it
        (folder / "deeper").mkdir(parents=True)
        (folder / "deeper" / "swifts.txt").write_text("Swifts can stay in the air for ten months.")
        (folder / "photo.png").write_bytes(b"\x89PNG\r\n\x1a\n")
        tid(page, "documents-folder-input").set_input_files(folder)
        expect(tid(page, "documents-item")).to_have_count(5)
        assert listed(page)[-1] == "notes/deeper/swifts.txt"
        ARTIFACTS.mkdir(exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / "memory-documents.png"))
        tid(page, "documents-item").filter(has_text="recipes.txt").get_by_test_id("documents-remove").click()
        expect(tid(page, "documents-item")).to_have_count(4)

        page.reload()  # the store is in OPFS: the documents are still there, the removed one is not
        open_documents(page, server)
        expect(tid(page, "documents-item")).to_have_count(4)
        assert listed(page) == ["trains.pdf", "garden.md", "birds.html", "notes/deeper/swifts.txt"]
        expect(tid(page, "documents-item").first).to_contain_text("1 passage")
        page.keyboard.press("Escape")

        tid(page, "load-button").click()
        expect(tid(page, "load-button")).to_contain_text("Loaded", timeout=120_000)
        tid(page, "use-documents").check()
        tid(page, "prompt-input").fill("When does the night train to Vienna leave?")
        tid(page, "send-button").click()
        chips = tid(page, "citation")
        expect(chips.first).to_be_visible(timeout=120_000)
        cited = chips.all_text_contents()
        assert any(text.endswith("trains.pdf · page 1") for text in cited), cited
        assert not any("recipes.txt" in text for text in cited), cited  # removed: never recalled
        chips.filter(has_text="trains.pdf").click()
        expect(tid(page, "citation-dialog")).to_be_visible()
        expect(tid(page, "citation-source")).to_have_text("trains.pdf")
        expect(tid(page, "citation-place")).to_have_text("page 1")
        expect(tid(page, "citation-text")).to_have_text(TRAIN)
        page.screenshot(path=str(ARTIFACTS / "memory-citation.png"))
        tid(page, "citation-close").click()
        stats = tid(page, "stats").last.text_content()
        assert stats.split(" token")[0] in ("1", "2", "3", "4"), stats  # held to max_tokens

        api = page.evaluate(API, {"tiny": TINY})  # static/openai.js: the loaded models answer

        tid(page, "documents-button").click()  # the panel's Export, then its Import after a removal
        with page.expect_download() as download:
            tid(page, "documents-export").click()
        exported = tmp_path / download.value.suggested_filename
        download.value.save_as(exported)
        tid(page, "documents-item").filter(has_text="birds.html").get_by_test_id("documents-remove").click()
        expect(tid(page, "documents-item")).to_have_count(3)
        tid(page, "documents-import-input").set_input_files(exported)
        expect(tid(page, "documents-item")).to_have_count(4)
        imported = listed(page)
        context.close()
    assert not errors, errors
    assert api["listed"] == ["trains.pdf", "garden.md", "birds.html", "notes/deeper/swifts.txt"]
    assert {hit["source"] for hit in api["recalled"]} == set(api["listed"])
    train = next(hit for hit in api["recalled"] if hit["source"] == "trains.pdf")
    assert (train["text"], train["place"], train["start"]) == (TRAIN, "page 1", 0)
    citations = api["answer"]["memory"]["citations"]
    assert api["answer"]["memory"]["collection"] == "documents" and len(citations) == 4
    assert [c["n"] for c in citations] == [1, 2, 3, 4] and api["answer"]["usage"]["completion_tokens"] <= 2
    assert (api["copied"], api["again"], api["copy"]) == (
        {"imported": 4, "skipped": 0},
        {"imported": 0, "skipped": 4},
        api["listed"],
    )
    assert exported.name.startswith("documents-") and exported.suffix == ".jsonl"
    assert len(exported.read_text().splitlines()) == 1 + 4  # the header, a document a line
    assert imported == ["trains.pdf", "garden.md", "notes/deeper/swifts.txt", "birds.html"]
    seen = check_protocol(traffic)
    expected = {"memory_add", "memory_list", "memory_delete", "memory", "memory_progress", "memory_export"}
    assert expected | {"memory_lines", "memory_import"} <= set(seen), seen
