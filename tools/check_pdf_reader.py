"""Compare Wisp's PDF reader (py_engine/memory) with pypdf's text extraction, page by page, as an
independent reference: the share of words the two agree on (difflib over word lists) and the time each
takes. pypdf is not a dependency of Wisp: run this with an environment that has it, e.g.

    /work/refenv/bin/pip install pypdf
    /work/refenv/bin/python tools/check_pdf_reader.py some.pdf other.pdf [--tests] [--show N]

--tests adds the PDFs tests/test_memory_pdf.py builds (those pypdf can read)."""

import argparse
import difflib
import io
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from py_engine.errors import DocumentError  # noqa: E402
from py_engine.memory.documents import read_document  # noqa: E402


def pypdf_pages(data: bytes) -> list[str]:
    import pypdf

    return [page.extract_text() or "" for page in pypdf.PdfReader(io.BytesIO(data)).pages]


def agreement(ours: str, theirs: str) -> float:
    a, b = ours.split(), theirs.split()
    return difflib.SequenceMatcher(None, a, b, autojunk=False).ratio() if a or b else 1.0


def test_pdfs() -> dict[str, bytes]:
    """PDFs like the ones tests/test_memory_pdf.py builds (without importing pytest)."""
    from pdf_writer import COURIER, document

    lines = b"BT /F1 12 Tf 72 700 Td (First line) Tj 0 -14 Td (Second \\(line\\)) Tj 14 TL T* (Third) Tj (line) ' ET"
    return {
        "lines": document([lines], flate=True),
        "object-stream": document([lines], flate=True, xref_stream=True, packed=True),
        "kerning": document([b"BT /F1 10 Tf 72 700 Td [(W) 80 (ord) -30 (s) -300 (apart) -120 (ly)] TJ ET"]),
        "positions": document(
            [b"BT /F1 10 Tf 72 700 Td (Hel) Tj 18 0 Td (lo) Tj 1 0 0 1 132 700 Tm (you) Tj ET"], COURIER
        ),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("paths", nargs="*", type=Path)
    parser.add_argument("--tests", action="store_true")
    parser.add_argument("--show", type=int, default=0, help="print the first N characters of both texts per page")
    args = parser.parse_args()
    files = {str(p): p.read_bytes() for p in args.paths} | (test_pdfs() if args.tests else {})
    for name, data in files.items():
        start = time.perf_counter()
        try:
            doc = read_document(name, data)
        except DocumentError as e:
            print(f"{name}: ours refused it: {e.problem}")
            continue
        ours_s = time.perf_counter() - start
        ours = [doc.text[s.start : s.end] for s in doc.sections]
        start = time.perf_counter()
        theirs = pypdf_pages(data)
        theirs_s = time.perf_counter() - start
        scores = [agreement(a, b) for a, b in zip(ours, theirs)]
        low = sorted(range(len(scores)), key=scores.__getitem__)[:3]
        print(
            f"{name}: {len(ours)} pages (pypdf {len(theirs)}), words agree {sum(scores) / max(len(scores), 1):.3f}"
            f" (lowest pages {[(i + 1, round(scores[i], 3)) for i in low]}), ours {ours_s:.2f} s, pypdf {theirs_s:.2f} s"
        )
        for i in range(len(ours) if args.show else 0):
            print(f"--- page {i + 1} ours:\n{ours[i][: args.show]}\n--- pypdf:\n{theirs[i][: args.show]}")


if __name__ == "__main__":
    main()
