"""Wisp's memory over the desktop's /v1 (app/memory_api.py, py_engine/api/memory.py), driven by the
real `openai` package: documents added to a collection (all-MiniLM-L6-v2 embeds them), listed,
recalled, cited in a chat answer (SmolLM2; its words are not checked, the recalled passages are),
removed; kept in the memory folder across a restart; bad requests get OpenAI's error object. Two
of the three documents are sent as their files' bytes, a PDF (tests/pdf_writer.py) and a Markdown
file: the answer's passage comes from the PDF, and citations say the page and the heading."""

import base64

import pytest
from pdf_writer import document
from server_harness import app_server

from py_engine.model_cache import ensure_model

openai = pytest.importorskip("openai")
pytestmark = pytest.mark.slow

SMOL = "smollm2-135m-instruct.q4_1"
MINILM = "all-minilm-l6-v2"
DOCUMENTS = {
    "garden.md": b"# Garden\n\nTomatoes need six hours of sun a day and water at the roots.",
    "trains.pdf": document(
        [b"BT /F1 12 Tf 72 700 Td (The night train to Vienna leaves from platform 4 at 22:15.) Tj ET"]
    ),
    "recipes.txt": "Bread needs flour, water, salt and yeast; knead it for ten minutes.",
}


def server(folder):
    models = [str(ensure_model("smollm2-135m-instruct")), str(ensure_model(MINILM))]
    return app_server("--no-default", "--model", *models, "--memory-dir", str(folder), "--memory-model", MINILM)


def api(url):
    return openai.OpenAI(base_url=url + "/v1", api_key="unused", max_retries=0, timeout=600)


def test_documents_recalled_and_cited_across_a_restart(tmp_path):
    with server(tmp_path) as (url, _):
        client = api(url)
        ids = {}
        for name, text in DOCUMENTS.items():
            body = (
                {"name": name, "text": text}
                if isinstance(text, str)
                else {"name": name, "data": base64.b64encode(text).decode()}
            )
            added = client.post("/memory/notes/documents", body=body, cast_to=object)
            assert added["source"] == name and added["passages"] >= 1
            ids[name] = added["id"]
        hits = client.post(
            "/memory/notes/recall", body={"query": "When does the train to Vienna leave?", "k": 2}, cast_to=object
        )
        assert hits["data"][0]["source"] == "trains.pdf" and "22:15" in hits["data"][0]["text"]
        answer = client.chat.completions.create(
            model=SMOL,
            messages=[{"role": "user", "content": "When does the night train to Vienna leave?"}],
            max_tokens=4,
            temperature=0,
            extra_body={"memory": {"collection": "notes", "k": 2}},
        )
        cited = answer.model_extra["memory"]
        assert cited["collection"] == "notes" and cited["citations"][0]["source"] == "trains.pdf"
        assert cited["citations"][0]["n"] == 1 and answer.usage.prompt_tokens > 40  # the passages went in
        assert cited["citations"][0]["place"] == "page 1"  # where in the PDF
        garden = client.post("/memory/notes/recall", body={"query": "tomatoes sun water"}, cast_to=object)["data"][0]
        assert (garden["source"], garden["place"]) == ("garden.md", "Garden")  # under its heading
        with pytest.raises(openai.BadRequestError, match="memory.k"):
            client.chat.completions.create(
                model=SMOL,
                messages=[{"role": "user", "content": "hi"}],
                extra_body={"memory": {"collection": "notes", "k": 0}},
            )
        with pytest.raises(openai.BadRequestError, match="letters, digits"):
            client.post("/memory/.hidden/documents", body={"name": "x", "text": "y"}, cast_to=object)
        with pytest.raises(openai.UnprocessableEntityError, match="empty.txt: the document has no text"):
            client.post("/memory/notes/documents", body={"name": "empty.txt", "text": "  "}, cast_to=object)
        client.delete(f"/memory/notes/documents/{ids['recipes.txt']}", cast_to=object)

    with server(tmp_path) as (url, _):  # the collection is in the folder's SQLite file
        client = api(url)
        listed = client.get("/memory/notes/documents", cast_to=object)["data"]
        assert [d["source"] for d in listed] == ["garden.md", "trains.pdf"]
        exported = client.get("/memory/notes/export", cast_to=str)
        imported = client.post("/memory/copy/import", content=exported.encode(), cast_to=object)
        assert imported == {"imported": 2}
        assert client.get("/memory/copy/documents", cast_to=object)["data"] == listed
