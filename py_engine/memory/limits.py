"""How much a document reader takes on before it refuses a document. A refused document gets one
DocumentError; nothing is half-read into the store.

Defaults: a text, Markdown or HTML file up to 64 MiB (a long book is ~2 MiB; more is almost certainly a
log or a dump, and embedding it would take hours on a laptop GPU), a PDF up to 256 MiB (scanned pictures
make PDFs large without adding text). A PDF's streams are inflated at most 64 MiB each and 512 MiB in all
(pictures are never inflated, only text, fonts' maps and the file's own index streams), so a Flate bomb
costs at most the cap before it is refused. Objects nest at most 64 deep (real files stay under ~10; the
reader's recursion must stay well inside Pyodide's stack), a file holds at most 2 million objects, and its
pages draw forms (Form XObjects) at most 100,000 times in all."""

from dataclasses import dataclass

MIB = 1 << 20


@dataclass(frozen=True)
class ReadLimits:
    max_text_bytes: int = 64 * MIB  # a text/Markdown/HTML file, and the text extracted from a PDF
    max_pdf_bytes: int = 256 * MIB
    max_stream_bytes: int = 64 * MIB  # one PDF stream, decoded
    max_decoded_bytes: int = 512 * MIB  # all of one PDF's decoded streams together
    max_depth: int = 64  # arrays and dictionaries inside each other; page tree levels; forms inside forms
    max_objects: int = 2_000_000
    max_form_draws: int = 100_000  # Form XObjects run, all pages together: forms drawing forms tenfold, 9 deep, is 10^9


def size_text(n: int) -> str:
    """A byte count as people read it: 1.5 GiB, 64 MiB, 12 KiB, 300 bytes."""
    for unit, size in (("GiB", 1 << 30), ("MiB", MIB), ("KiB", 1 << 10)):
        if n >= size:
            return f"{n / size:.3g} {unit}"
    return f"{n} bytes"


DEFAULT_LIMITS = ReadLimits()
