"""read_document (py_engine/memory/documents.py) on text, Markdown and HTML: how the kind is chosen, how
bytes become text (UTF-8, BOMs, UTF-16, a declared charset, Windows-1252) and when they are binary
instead, headings as sections with offsets, and the refusals (empty, binary, too large), each one
DocumentError naming the document."""

import pytest

from py_engine.errors import DocumentError, WispError
from py_engine.memory.documents import document_kind, read_document
from py_engine.memory.limits import ReadLimits


def refusal(name: str, data: bytes, **options) -> str:
    with pytest.raises(DocumentError) as caught:
        read_document(name, data, **options)
    assert isinstance(caught.value, WispError) and caught.value.name == name
    assert str(caught.value) == f"{name}: {caught.value.problem}"
    return caught.value.problem


@pytest.mark.parametrize(
    "name, data, media_type, kind",
    [
        ("notes.txt", b"%PDF-1.7 whatever it is called", None, "pdf"),
        ("notes.md", b"# x", "text/html; charset=utf-8", "html"),
        ("notes.md", b"# x", "application/octet-stream", "markdown"),
        ("notes.md", b"# x", "text/plain", "markdown"),
        ("notes.txt", b"<!doctype html>", "text/plain", "text"),
        ("README.MARKDOWN", b"# x", None, "markdown"),
        ("page.htm", b"x", None, "html"),
        ("download", b"\n<!-- saved -->\n<!DOCTYPE html><p>x", None, "html"),
        ("download", b"<p>just a tag</p>", None, "text"),
        ("report.pdf", b"not really", None, "pdf"),
        ("data.csv", b"a,b", "text/csv", "text"),
    ],
)
def test_kind_from_header_media_type_suffix_then_content(name, data, media_type, kind):
    assert document_kind(name, data, media_type) == kind


def test_plain_text_in_utf8_with_or_without_bom_and_any_line_ends():
    for data in (b"caf\xc3\xa9\r\nline two\rthree\n", b"\xef\xbb\xbfcaf\xc3\xa9\nline two\nthree\n"):
        doc = read_document("a.txt", data)
        assert (doc.kind, doc.text, doc.title, doc.sections) == ("text", "café\nline two\nthree\n", None, ())


@pytest.mark.parametrize("codec", ["utf-16-le", "utf-16-be"])
def test_utf16_behind_its_byte_order_mark(codec):
    data = ("\ufeffΓειά σου\nκόσμε").encode(codec)
    assert read_document("greek.txt", data).text == "Γειά σου\nκόσμε"


def test_windows_1252_and_a_few_bad_bytes_are_text_but_binary_data_is_refused():
    assert read_document("old.txt", "Déjà vu – “quoted”".encode("cp1252")).text == "Déjà vu – “quoted”"
    mostly_utf8 = ("é" * 3000).encode() + b"\xff"  # a stray byte in 6 KB: within one in a thousand
    assert read_document("stray.txt", mostly_utf8).text == "é" * 3000 + "\ufffd"
    not_utf8 = ("é" * 300).encode() + b"\xff" * 2  # more bad bytes than one in a thousand: Windows-1252
    assert read_document("mixed.txt", not_utf8).text == "Ã©" * 300 + "ÿÿ"
    assert refusal("image.txt", b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" * 10).startswith("is binary data")
    assert refusal("blob.txt", bytes(range(1, 32)) * 20) == "is binary data, not text (control characters)"
    assert "UTF-16 text needs its byte-order mark" in refusal("u16.txt", "no bom".encode("utf-16-le"))
    assert refusal("random.bin", bytes(range(256)) * 8 + b"\x01" * 100).startswith("is binary data")


def test_a_declared_charset_is_used():
    assert read_document("ru.txt", "Привет".encode("koi8-r"), "text/plain; charset=KOI8-R").text == "Привет"
    page = b'<html><head><meta charset="windows-1251"></head><body><p>' + "Привет".encode("cp1251") + b"</p>"
    assert read_document("ru.html", page).text.strip() == "Привет"


def test_empty_blank_and_oversized_documents_are_refused():
    assert refusal("empty.txt", b"") == "is empty"
    assert refusal("blank.md", b" \n\t\r\n") == "is empty"
    assert refusal("nothing.html", b"<html><script>x()</script><style>p{}</style></html>").startswith("has no text")
    small = ReadLimits(max_text_bytes=1000)
    assert refusal("big.txt", b"a" * 1001, limits=small) == "is 1001 bytes; text documents over 1000 bytes are not read"
    huge = ReadLimits(max_text_bytes=1 << 20)
    assert refusal("log.txt", b"a" * (3 << 20), limits=huge) == "is 3 MiB; text documents over 1 MiB are not read"
    assert read_document("ok.txt", b"a" * 1000, limits=small).text == "a" * 1000


MARKDOWN = """Intro text.

# Guide

Some words.

## Install
```
# not a heading
```
Setext heading
--------------
### Deeper ###
Text under deeper.

# Appendix
"""


def test_markdown_headings_are_sections_that_nest():
    doc = read_document("guide.md", MARKDOWN.encode())
    assert doc.text == MARKDOWN and doc.kind == "markdown" and doc.title == "Guide"
    found = [(s.title, s.level, doc.text[s.start : s.start + 12]) for s in doc.sections]
    assert found == [
        ("Guide", 1, "# Guide\n\nSom"),
        ("Install", 2, "## Install\n`"),
        ("Setext heading", 2, "Setext headi"),
        ("Deeper", 3, "### Deeper #"),
        ("Appendix", 1, "# Appendix\n"),
    ]
    at = doc.text.index("Text under deeper")
    assert [s.title for s in doc.sections_at(at)] == ["Guide", "Setext heading", "Deeper"]
    assert doc.sections_at(0) == [] and doc.sections[-1].end == len(doc.text)
    assert doc.place_at(at) == "Guide > Setext heading > Deeper" and doc.place_at(0) == ""


HTML = b"""<!DOCTYPE html><html><head><title> The  Page </title><style>body { color: red }</style>
<script>var x = "<p>not text</p>";</script></head>
<body><nav>Home</nav><h1>Main &amp; only</h1><p>First   paragraph
spans lines &lt;here&gt; &eacute;&#233;.</p><div>Block<br>broken</div>
<ul><li>one</li><li><p>two</p></li></ul><table><tr><td>a</td><td>b</td></tr></table>
<h2>Code</h2><pre>  keep
    spacing</pre><p>in<b>line</b> <i>tags</i></p></body></html>"""


def test_html_text_drops_scripts_breaks_blocks_and_records_headings():
    doc = read_document("page.html", HTML)
    assert doc.kind == "html" and doc.title == "The Page"
    assert doc.text == (
        "Home\nMain & only\nFirst paragraph spans lines <here> éé.\nBlock\nbroken\n- one\n- two\na\tb\n"
        "Code\n  keep\n    spacing\ninline tags\n"
    )
    assert [(s.title, s.level) for s in doc.sections] == [("Main & only", 1), ("Code", 2)]
    assert all(doc.text[s.start :].startswith(s.title) for s in doc.sections)
    assert [s.title for s in doc.sections_at(doc.text.index("spacing"))] == ["Main & only", "Code"]


def test_html_without_a_title_takes_its_first_h1():
    assert read_document("x.html", b"<h2>Sub</h2><h1>Top</h1><p>t</p>").title == "Top"
