"""Write tests/fixtures/documents/*.pdf: a one-page PDF from tests/pdf_writer.py encrypted by pypdf, an
independent writer, with RC4 40 and 128 bits and an empty user password (which Wisp's reader opens),
and with a user password (which it refuses). pypdf is not a dependency of Wisp; run this with an
environment that has it:

    /work/refenv/bin/pip install pypdf
    /work/refenv/bin/python tools/make_encrypted_pdf_fixtures.py"""

import io
import sys
from pathlib import Path

import pypdf

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from pdf_writer import document  # noqa: E402

OUT = ROOT / "tests" / "fixtures" / "documents"


def main() -> None:
    plain = document([b"BT /F1 12 Tf 72 700 Td (Secret words) Tj ET"], flate=True)
    OUT.mkdir(parents=True, exist_ok=True)
    for name, algorithm, user in (
        ("rc4-40-empty.pdf", "RC4-40", ""),
        ("rc4-128-empty.pdf", "RC4-128", ""),
        ("rc4-128-password.pdf", "RC4-128", "secret"),
    ):
        writer = pypdf.PdfWriter(clone_from=pypdf.PdfReader(io.BytesIO(plain)))
        writer.add_metadata({"/Title": "Locked notes"})
        writer.encrypt(user, "owner", algorithm=algorithm)
        out = io.BytesIO()
        writer.write(out)
        (OUT / name).write_bytes(out.getvalue())
        print(f"{name}: {len(out.getvalue())} bytes")


if __name__ == "__main__":
    main()
