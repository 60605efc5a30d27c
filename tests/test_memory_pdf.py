"""The PDF reader (py_engine/memory/pdf.py and the pdf_* modules beside it) on PDFs built here by
tests/pdf_writer.py: each file layout (xref table, xref stream with an object stream, an incremental
update, wrong offsets), the text operators and fonts, and the bad files the issue names, each refused
with one DocumentError."""

import random
import shutil
import subprocess
import tracemalloc
import zlib
from pathlib import Path

import pytest
from pdf_writer import COURIER, HELVETICA, PdfWriter, append_update, document, stream

from py_engine.errors import DocumentError
from py_engine.memory.documents import read_document
from py_engine.memory.limits import ReadLimits

FIXTURES = Path(__file__).parent / "fixtures" / "documents"


def pages_of(data: bytes, limits: ReadLimits = ReadLimits()) -> list[str]:
    doc = read_document("test.pdf", data, limits=limits)
    return [doc.text[s.start : s.end] for s in doc.sections]


def refusal(data: bytes, limits: ReadLimits = ReadLimits()) -> str:
    with pytest.raises(DocumentError) as caught:
        read_document("test.pdf", data, limits=limits)
    assert caught.value.name == "test.pdf" and str(caught.value).startswith("test.pdf: ")
    return caught.value.problem


def one_page(content: bytes, font: str = HELVETICA, trailer: str = "") -> bytes:
    """A one-page PDF whose content object is `content` as written (a stream object's whole body)."""
    w = PdfWriter()
    catalog, tree, font_num, content_num = w.add(), w.add(), w.add(font), w.add(content)
    page = w.add(f"<< /Type /Page /Contents {content_num} 0 R /Resources << /Font << /F1 {font_num} 0 R >> >> >>")
    w.set(tree, f"<< /Type /Pages /Kids [{page} 0 R] /Count 1 >>")
    w.set(catalog, f"<< /Type /Catalog /Pages {tree} 0 R >>")
    return w.build(catalog, trailer=trailer)


LINES = b"BT /F1 12 Tf 72 700 Td (First line) Tj 0 -14 Td (Second \\(line\\)) Tj 14 TL T* (Third) Tj (line) ' ET"


@pytest.mark.parametrize(
    "layout",
    [
        {},
        {"flate": True},
        {"xref_stream": True},
        {"xref_stream": True, "packed": True, "flate": True},
        {"hybrid": True, "packed": True},
    ],
    ids=["table", "flate", "xref-stream", "object-stream", "hybrid"],
)
def test_each_file_layout_gives_the_lines_of_its_page(layout):
    assert pages_of(document([LINES], **layout)) == ["First line\nSecond (line)\nThird\nline"]


def test_tj_kerning_gaps_wider_than_a_fraction_of_an_em_are_spaces():
    content = b"BT /F1 10 Tf 72 700 Td [(W) 80 (ord) -30 (s) -300 (apart) -120 (ly) -250 (kerned)] TJ ET"
    assert pages_of(document([content])) == ["Words apartly kerned"]


def test_strings_placed_apart_by_position_are_spaced_and_adjacent_ones_joined():
    # Courier 10: each glyph 6 units wide. "Hel" ends at 90; "lo" starts there; "you" 30 units later.
    content = b"BT /F1 10 Tf 72 700 Td (Hel) Tj 18 0 Td (lo) Tj 1 0 0 1 132 700 Tm (you) Tj 1 0 0 1 72 500 Tm (x) Tj ET"
    assert pages_of(document([content], font=COURIER)) == ["Hello you\nx"]


def test_the_text_matrix_scale_and_the_graphics_matrix_place_strings():
    # "Left" at size 1 scaled 12 by Tm ends at 72 + 4 * 0.6 * 12 = 100.8; "Same" is moved there by cm.
    content = (
        b"BT /F1 1 Tf 12 0 0 12 72 700 Tm (Left) Tj ET q 1 0 0 1 0 -100 cm BT /F1 12 Tf 100.8 800 Td (Same) Tj ET Q"
    )
    assert pages_of(document([content], font=COURIER)) == ["LeftSame"]


def test_an_incremental_update_replaces_the_objects_it_revises():
    w = PdfWriter()
    catalog, tree, font, page = w.add(), w.add(), w.add(HELVETICA), w.add()
    content = w.add(stream(b"BT /F1 12 Tf 72 700 Td (Old text) Tj ET"))
    w.set(
        page,
        f"<< /Type /Page /Parent {tree} 0 R /Contents {content} 0 R /Resources << /Font << /F1 {font} 0 R >> >> >>",
    )
    w.set(tree, f"<< /Type /Pages /Kids [{page} 0 R] /Count 1 >>")
    w.set(catalog, f"<< /Type /Catalog /Pages {tree} 0 R >>")
    base = w.build(catalog, trailer="/Info << /Title (Draft) >>")
    new = stream(b"BT /F1 12 Tf 72 700 Td (New text) Tj ET", flate=True)
    updated = append_update(base, {content: new}, catalog, trailer="/Info << /Title (Final) >>")
    assert pages_of(base) == ["Old text"] and read_document("a.pdf", base).title == "Draft"
    assert pages_of(updated) == ["New text"] and read_document("a.pdf", updated).title == "Final"


def test_wrong_offsets_and_a_missing_xref_are_read_by_scanning_the_file():
    data = document([b"BT /F1 12 Tf 72 700 Td (Found anyway) Tj ET"])
    shifted = data.replace(b"%PDF-1.7\n", b"%PDF-1.7\n% a comment that moves every object\n", 1)
    assert pages_of(shifted) == ["Found anyway"]
    assert pages_of(data[: data.index(b"xref")]) == ["Found anyway"]


def test_pages_inherit_resources_through_a_nested_page_tree_in_order():
    w = PdfWriter()
    catalog, root, middle, font = w.add(), w.add(), w.add(), w.add(COURIER)
    contents = [w.add(stream(b"BT /F1 12 Tf 72 700 Td (Page %d) Tj ET" % n)) for n in (1, 2, 3)]
    pages = [w.add(f"<< /Type /Page /Contents {c} 0 R >>") for c in contents]
    w.set(middle, f"<< /Type /Pages /Kids [{pages[0]} 0 R {pages[1]} 0 R] /Count 2 >>")
    w.set(
        root,
        f"<< /Type /Pages /Kids [{middle} 0 R {pages[2]} 0 R] /Count 3 /Resources << /Font << /F1 {font} 0 R >> >> >>",
    )
    w.set(catalog, f"<< /Type /Catalog /Pages {root} 0 R >>")
    doc = read_document("book.pdf", w.build(catalog))
    assert doc.text == "Page 1\n\nPage 2\n\nPage 3"
    assert [(s.title, s.page) for s in doc.sections] == [("page 1", 1), ("page 2", 2), ("page 3", 3)]
    assert [s.title for s in doc.sections_at(doc.text.index("3"))] == ["page 3"]


def to_unicode(pairs: str) -> bytes:
    return stream(
        b"/CIDInit /ProcSet findresource begin 12 dict begin begincmap 1 begincodespacerange <0000> <FFFF>"
        b" endcodespacerange " + pairs.encode() + b" endcmap CMapName currentdict /CMap defineresource pop end end"
    )


def test_identity_h_font_reads_two_byte_codes_through_its_to_unicode_cmap():
    w = PdfWriter()
    cmap = w.add(
        to_unicode(
            "6 beginbfchar <0001> <041F> <0002> <0440> <0004> <0432> <0005> <0435> <0006> <0442> <0010> <0020>"
            " endbfchar 3 beginbfrange <0003> <0003> <0438> <0040> <0042> <0430> <0020> <0021> [<4E16> <754C>]"
            " endbfrange 1 beginbfchar <0030> <00660069> endbfchar"
        )
    )
    cid = w.add("<< /Type /Font /Subtype /CIDFontType2 /BaseFont /Noto /DW 1000 /W [1 [500 500] 3 6 500] >>")
    font = w.add(
        f"<< /Type /Font /Subtype /Type0 /BaseFont /Noto /Encoding /Identity-H /DescendantFonts [{cid} 0 R]"
        f" /ToUnicode {cmap} 0 R >>"
    )
    content = w.add(
        stream(
            b"BT /F1 12 Tf 72 700 Td <00010002000300040005000600100040004100420010> Tj [<0020>-50<0021>] TJ 0 -20 Td <0030> Tj ET"
        )
    )
    catalog, tree = w.add(), w.add()
    page = w.add(f"<< /Type /Page /Parent {tree} 0 R /Contents {content} 0 R >>")
    w.set(tree, f"<< /Type /Pages /Kids [{page} 0 R] /Count 1 /Resources << /Font << /F1 {font} 0 R >> >> >>")
    w.set(catalog, f"<< /Type /Catalog /Pages {tree} 0 R >>")
    assert pages_of(w.build(catalog, xref_stream=True)) == ["Привет абв 世界\nfi"]


def test_simple_font_with_differences_over_win_ansi():
    font = (
        "<< /Type /Font /Subtype /Type1 /BaseFont /Times-Roman /Encoding << /Type /Encoding"
        " /BaseEncoding /WinAnsiEncoding /Differences [1 /Eacute /f_i 65 /uni20AC /quoteright] >> >>"
    )
    content = b"BT /F1 12 Tf 72 700 Td (\\001t\\002 \\223B\\224 \\200 AB) Tj ET"
    assert pages_of(document([content], font=font)) == ["\u00c9tfi \u201c\u2019\u201d \u20ac \u20ac\u2019"]


def test_standard_encoding_and_mac_roman_differ_from_ascii_where_they_should():
    # No /Encoding: StandardEncoding, where \256 is the fi ligature, read as its two letters.
    standard = "<< /Type /Font /Subtype /Type1 /BaseFont /Times-Roman >>"
    assert pages_of(document([b"BT /F1 12 Tf 1 1 Td (it\\047s \\256) Tj ET"], font=standard)) == ["it\u2019s fi"]
    mac = "<< /Type /Font /Subtype /TrueType /BaseFont /Arial /Encoding /MacRomanEncoding >>"
    assert pages_of(document([b"BT /F1 12 Tf 1 1 Td (\\212 \\216) Tj ET"], font=mac)) == ["\u00e4 \u00e9"]


def test_a_type1_font_without_an_encoding_uses_its_programs_own():
    # TeX's math fonts put the period at 58, where ASCII has the colon.
    program = b"%!PS-AdobeFont-1.0: CMMI10\n/Encoding 256 array\n0 1 255 {1 index exch /.notdef put} for\ndup 58 /period put\nreadonly def\ncurrentfile eexec\n"
    w = PdfWriter()
    catalog, tree, text_font, file = (
        w.add(),
        w.add(),
        w.add(HELVETICA),
        w.add(stream(program + b"\x80\x01", f"/Length1 {len(program)}", flate=True)),
    )
    descriptor = w.add(f"<< /Type /FontDescriptor /FontName /CMMI10 /Flags 4 /FontFile {file} 0 R >>")
    math_font = w.add(f"<< /Type /Font /Subtype /Type1 /BaseFont /CMMI10 /FontDescriptor {descriptor} 0 R >>")
    content = w.add(stream(b"BT /F1 12 Tf 72 700 Td (Dots) Tj /F2 12 Tf 30 0 Td [(:) -200 (:)] TJ ET"))
    page = w.add(
        f"<< /Type /Page /Contents {content} 0 R /Resources << /Font << /F1 {text_font} 0 R /F2 {math_font} 0 R >> >> >>"
    )
    w.set(tree, f"<< /Type /Pages /Kids [{page} 0 R] /Count 1 >>")
    w.set(catalog, f"<< /Type /Catalog /Pages {tree} 0 R >>")
    assert pages_of(w.build(catalog)) == ["Dots . ."]


def test_form_xobjects_are_drawn_and_a_form_drawing_itself_is_drawn_once():
    w = PdfWriter()
    catalog, tree, font, form = w.add(), w.add(), w.add(COURIER), w.add()
    w.set(
        form,
        stream(
            b"BT /F1 12 Tf 0 0 Td (In a form) Tj ET /Me Do",
            f"/Type /XObject /Subtype /Form /BBox [0 0 500 500] /Resources << /Font << /F1 {font} 0 R >>"
            f" /XObject << /Me {form} 0 R >> >>",
        ),
    )
    content = w.add(stream(b"BT /F1 12 Tf 72 700 Td (Page) Tj ET q 1 0 0 1 72 600 cm /Fm Do Q"))
    page = w.add(f"<< /Type /Page /Parent {tree} 0 R /Contents {content} 0 R >>")
    w.set(
        tree,
        f"<< /Type /Pages /Kids [{page} 0 R] /Count 1 /Resources << /Font << /F1 {font} 0 R >> /XObject << /Fm {form} 0 R >> >> >>",
    )
    w.set(catalog, f"<< /Type /Catalog /Pages {tree} 0 R >>")
    assert pages_of(w.build(catalog)) == ["Page\nIn a form"]


def test_every_filter_a_text_stream_may_carry():
    text = b"BT /F1 12 Tf 72 700 Td (Filtered) Tj ET"
    hexed = text.hex().encode() + b">"
    a85 = b"<~" + __import__("base64").a85encode(text) + b"~>"
    run = bytes([len(text) - 1]) + text + b"\x80"
    for data, filters in (
        (hexed, "/ASCIIHexDecode"),
        (a85, "/ASCII85Decode"),
        (run, "/RunLengthDecode"),
        (lzw(text), "/LZWDecode"),
        (zlib.compress(text).hex().encode(), "[/AHx /Fl]"),
        (zlib.compress(text)[2:-4], "/FlateDecode"),  # raw deflate, no zlib header
    ):
        body = f"<< /Length {len(data)} /Filter {filters} >>\nstream\n".encode() + data + b"\nendstream"
        assert pages_of(one_page(body)) == ["Filtered"], filters


def lzw(data: bytes) -> bytes:
    """LZW with 9-bit codes (enough for a short test string): clear, codes, end of data."""
    table, codes, current = {bytes([i]): i for i in range(256)}, [256], b""
    for byte in data:
        if current + bytes([byte]) in table:
            current += bytes([byte])
        else:
            codes.append(table[current])
            table[current + bytes([byte])] = len(table) + 2
            current = bytes([byte])
    codes += [table[current], 257]
    bits = "".join(format(c, "09b") for c in codes)
    bits += "0" * (-len(bits) % 8)
    return int(bits, 2).to_bytes(len(bits) // 8, "big")


def test_the_info_title_is_the_documents_title():
    data = one_page(
        stream(b"BT /F1 12 Tf 72 700 Td (Body) Tj ET"), trailer="/Info << /Title <FEFF005200e9007000740020> >>"
    )
    assert read_document("r.pdf", data).title == "R\u00e9pt"


def test_rc4_with_an_empty_user_password_is_read_and_a_real_password_refused():
    # Encrypted by pypdf (tools/make_encrypted_pdf_fixtures.py): the content stream and the title string.
    for name in ("rc4-40-empty.pdf", "rc4-128-empty.pdf"):
        doc = read_document(name, (FIXTURES / name).read_bytes())
        assert (doc.text, doc.title) == ("Secret words", "Locked notes")
    # The same file and key under a V4 crypt filter (its objects moved: read by scanning).
    v4 = (
        (FIXTURES / "rc4-128-empty.pdf")
        .read_bytes()
        .replace(b"/V 2\n/R 3\n", b"/V 4\n/R 4\n/CF << /StdCF << /CFM /V2 /Length 16 >> >> /StmF /StdCF /StrF /StdCF\n")
    )
    assert pages_of(v4) == ["Secret words"]
    locked = (FIXTURES / "rc4-128-password.pdf").read_bytes()
    assert refusal(locked) == "is encrypted (with a password, or AES): such PDFs are not read"


# Bad files: one DocumentError each.


def bomb(kib64: int) -> bytes:
    """A one-page PDF whose content inflates to its text and then kib64 times 64 KiB of zeros: one
    deflate block repeated (a full flush resets the packer, so each 64 KiB of zeros packs alike), so a
    gigabyte is built in a millisecond. The stream has no end: a reader never gets there."""
    packer = zlib.compressobj(9)
    data = packer.compress(b"BT /F1 12 Tf (x) Tj ET ") + packer.flush(zlib.Z_FULL_FLUSH)
    data += (packer.compress(bytes(64 << 10)) + packer.flush(zlib.Z_FULL_FLUSH)) * kib64
    return one_page(f"<< /Length {len(data)} /Filter /FlateDecode >>\nstream\n".encode() + data + b"\nendstream")


def test_a_flate_bomb_is_refused_at_the_cap_without_inflating_it_all():
    small = ReadLimits(max_stream_bytes=1 << 20)
    assert refusal(bomb(1 << 14), small) == "refused: a stream decodes to more than 1 MiB (a compression bomb?)"
    assert pages_of(bomb(8), small) == ["x"]
    in_all = ReadLimits(max_stream_bytes=1 << 20, max_decoded_bytes=1 << 20)
    pages = [b"BT /F1 12 Tf (y) Tj ET" + bytes(600 << 10)] * 2
    assert pages_of(document(pages[:1], flate=True), in_all) == ["y"]
    assert "decode to more than 1 MiB in all" in refusal(document(pages, flate=True), in_all)


def test_the_default_stream_cap_refuses_a_bomb_of_a_gigabyte():
    assert "more than 64 MiB" in refusal(bomb(1 << 14))


def test_a_bomb_is_refused_having_inflated_no_more_than_the_cap():
    data, small = bomb(1 << 14), ReadLimits(max_stream_bytes=1 << 20)
    tracemalloc.start()
    try:
        refusal(data, small)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 8 << 20


def test_forms_drawing_forms_tenfold_are_refused_at_the_draw_cap():
    w = PdfWriter()
    catalog, tree, font = w.add(), w.add(), w.add(HELVETICA)
    forms = [w.add() for _ in range(9)]
    for level, form in enumerate(forms):
        inner = forms[level + 1] if level + 1 < len(forms) else None
        content = b"/Next Do " * 10 if inner else b"BT /F1 12 Tf (lol) Tj ET"
        extra = f"/Resources << /Font << /F1 {font} 0 R >> /XObject << /Next {inner} 0 R >> >>" if inner else ""
        w.set(form, stream(content, f"/Type /XObject /Subtype /Form /BBox [0 0 9 9] {extra}"))
    content = w.add(stream(b"/Top Do"))
    page = w.add(f"<< /Type /Page /Contents {content} 0 R /Resources << /XObject << /Top {forms[0]} 0 R >> >> >>")
    w.set(tree, f"<< /Type /Pages /Kids [{page} 0 R] /Count 1 >>")
    w.set(catalog, f"<< /Type /Catalog /Pages {tree} 0 R >>")
    assert (
        refusal(w.build(catalog), ReadLimits(max_form_draws=1000))
        == "refused: its pages draw forms more than 1,000 times"
    )


def test_text_past_the_cap_is_refused():
    pages = [b"BT /F1 12 Tf 72 700 Td (%s) Tj ET" % (b"word " * 12)] * 2
    assert len(pages_of(document(pages), ReadLimits(max_text_bytes=120))[0]) == 59
    assert refusal(document(pages), ReadLimits(max_text_bytes=100)) == "refused: its text passes 100 bytes"


def test_deep_nesting_is_refused():
    content = b"BT /F1 12 Tf " + b"[" * 200 + b"]" * 200 + b" TJ ET"
    assert "nested more than 64 deep" in refusal(document([content]))
    assert pages_of(document([b"BT /F1 12 Tf " + b"[" * 60 + b"]" * 60 + b" pop (ok) Tj ET"])) == ["ok"]


def test_reference_cycles_are_refused_or_read_once():
    w = PdfWriter()
    catalog, tree, loop = w.add(), w.add(), w.add()
    w.set(loop, f"{loop} 0 R")  # an object that is a reference to itself
    w.set(tree, f"<< /Type /Pages /Kids [{loop} 0 R] /Count 1 >>")
    w.set(catalog, f"<< /Type /Catalog /Pages {tree} 0 R >>")
    assert "cycle" in refusal(w.build(catalog))
    # A page tree whose node lists its own parent: every page is still read once.
    w = PdfWriter()
    catalog, tree, font = w.add(), w.add(), w.add(HELVETICA)
    content = w.add(stream(b"BT /F1 12 Tf 72 700 Td (Once) Tj ET"))
    page = w.add(f"<< /Type /Page /Contents {content} 0 R /Resources << /Font << /F1 {font} 0 R >> >> >>")
    w.set(tree, f"<< /Type /Pages /Kids [{page} 0 R {tree} 0 R] /Count 1 >>")
    w.set(catalog, f"<< /Type /Catalog /Pages {tree} 0 R >>")
    assert pages_of(w.build(catalog)) == ["Once"]
    # A cross-reference section whose /Prev is itself: read once, not followed forever.
    data = w.build(catalog)
    looped = data.replace(b"trailer\n<< ", b"trailer\n<< /Prev %d " % (data.rindex(b"\nxref\n") + 1))
    assert pages_of(looped) == ["Once"] and b"/Prev" in looped


def test_encrypted_scanned_empty_and_garbage_files_each_get_their_own_error():
    encrypted = document([b"BT /F1 12 Tf (x) Tj ET"]).replace(b"/Root", b"/Encrypt << /Filter /Standard /V 2 >> /Root")
    assert refusal(encrypted) == "is encrypted (with a password, or AES): such PDFs are not read"
    scanned = document([b"q 612 0 0 792 0 0 cm /Im0 Do Q"])
    assert refusal(scanned) == "has no text to extract in its 1 page(s) (a scanned PDF? it would need OCR)"
    assert refusal(b"") == "is empty"
    assert refusal(b"%PDF-1.4\n" + bytes(range(256)) * 4).startswith("is not a readable PDF")
    assert refusal(b"just text in a file called .pdf") == "is not a readable PDF: no %PDF- header"
    assert refusal(document([b"(x) Tj"]), ReadLimits(max_pdf_bytes=100)).endswith(
        "pdf documents over 100 bytes are not read"
    )


def test_truncated_and_corrupted_files_never_escape_as_other_errors():
    data = document([LINES, b"BT /F1 9 Tf 1 1 Td [(b) -500 (c)] TJ ET"], flate=True, xref_stream=True, packed=True)
    rng = random.Random(31)
    cuts = [data[:n] for n in range(0, len(data), max(1, len(data) // 60))]
    flips = []
    for _ in range(150):
        broken = bytearray(data)
        for _ in range(rng.randint(1, 4)):
            broken[rng.randrange(len(broken))] = rng.randrange(256)
        flips.append(bytes(broken))
    for broken in cuts + flips:
        try:
            read_document("broken.pdf", broken)
        except DocumentError as e:
            assert e.name == "broken.pdf"


PYODIDE = Path(__file__).parent.parent / "build" / "web" / "pyodide"
NODE_READ = """
const [pyodide, root] = process.argv.slice(2);
const { loadPyodide } = await import(`${pyodide}/pyodide.mjs`);
const py = await loadPyodide({ indexURL: `${pyodide}/` });
py.mountNodeFS("/src", root);
console.log(py.runPython(`
import sys
sys.dont_write_bytecode = True
sys.path[:0] = ["/src", "/src/tests"]
from pdf_writer import document
from py_engine.errors import DocumentError
from py_engine.memory.documents import read_document
from py_engine.memory.limits import ReadLimits
made = document([b"BT /F1 12 Tf 72 700 Td [(In) -400 (Pyodide)] TJ ET"], flate=True, xref_stream=True, packed=True)
locked = open("/src/tests/fixtures/documents/rc4-128-empty.pdf", "rb").read()
deep = document([b"BT " + b"[" * 63 + b"]" * 63 + b" pop (deep) Tj ET"])
try:
    read_document("deeper.pdf", document([b"BT " + b"[" * 99 + b"]" * 99 + b" TJ ET"]))
except DocumentError as e:
    refused = e.problem
"|".join([sys.version.split()[0], read_document("a.pdf", made).text, read_document("b.pdf", locked).text, read_document("c.pdf", deep).text, refused])
`));
"""


@pytest.mark.slow  # Pyodide boots in Node (~4 s)
@pytest.mark.skipif(
    shutil.which("node") is None or not (PYODIDE / "pyodide.mjs").is_file(), reason="needs node and `make web`"
)
def test_the_reader_runs_in_pyodide(tmp_path):
    """Python 3.14 in WebAssembly: a stack for 64 levels of nesting, zlib, hashlib's MD5 for RC4."""
    script = tmp_path / "read.mjs"
    script.write_text(NODE_READ)
    root = Path(__file__).parent.parent
    out = subprocess.run(["node", str(script), str(PYODIDE), str(root)], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    version, *texts = out.stdout.strip().splitlines()[-1].split("|")
    assert version.startswith("3.14.")
    assert texts == ["In Pyodide", "Secret words", "deep", "refused: objects are nested more than 64 deep"]
