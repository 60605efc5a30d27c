"""A PDF's text, page by page, in pure Python (it runs in Pyodide). The modules beside this one do the
parts: pdf_syntax (tokens and objects), pdf_filters (stream decoding under caps), pdf_objects (the
file's cross-reference data and objects), pdf_fonts with pdf_cmap and pdf_encodings (codes to text) and
pdf_text (content streams). Here: the page tree (with inherited resources), the title, and the errors.
Encrypted PDFs are read only with an empty user password and RC4 (pdf_crypt.py); others are refused."""

from dataclasses import dataclass

from ..errors import DocumentError
from .limits import ReadLimits
from .pdf_crypt import empty_password_key
from .pdf_objects import PdfFile
from .pdf_syntax import PdfLimit, PdfProblem, Ref, Stream
from .pdf_text import PageText, Quota


@dataclass(frozen=True)
class PdfText:
    pages: list[str]  # page i + 1's text; '' for a page with none
    title: str | None


def read_pdf(name: str, data: bytes, limits: ReadLimits) -> PdfText:
    try:
        return _read(name, data, limits)
    except PdfLimit as e:
        raise DocumentError(name, f"refused: {e}") from None
    except PdfProblem as e:
        raise DocumentError(name, f"is not a readable PDF: {e}") from None
    # Damaged files reach corners the checks above do not foresee; they are still one clear error.
    except (RecursionError, ValueError, IndexError, KeyError, TypeError, OverflowError) as e:
        raise DocumentError(name, f"is not a readable PDF (damaged: {type(e).__name__})") from None


def _read(name: str, data: bytes, limits: ReadLimits) -> PdfText:
    if data.find(b"%PDF-", 0, 1024) < 0:
        raise PdfProblem("no %PDF- header")
    pdf = PdfFile(data, limits)
    if "Encrypt" in pdf.trailer:
        _decrypt(name, pdf, pdf.trailer["Encrypt"])
    root = pdf.resolve(pdf.trailer.get("Root"))
    if not isinstance(root, dict):
        raise PdfProblem("it has no document catalog")
    pages, fonts, quota = [], {}, Quota(limits)
    for page, resources in _pages(pdf, root.get("Pages")):
        reader = PageText(pdf, fonts, quota)
        reader.run(_content(pdf, page), resources)
        pages.append(reader.text())
    info = pdf.resolve(pdf.trailer.get("Info"))
    title = pdf.resolve(info.get("Title")) if isinstance(info, dict) else None
    return PdfText(pages, _text_string(title).strip() or None if isinstance(title, bytes) else None)


def _decrypt(name: str, pdf: PdfFile, encrypt_ref) -> None:
    encrypt, ids = pdf.resolve(encrypt_ref), pdf.resolve(pdf.trailer.get("ID"))
    file_id = ids[0] if isinstance(ids, list) and ids and isinstance(ids[0], bytes) else b""
    filters = pdf.get(encrypt, "CF", {}) if isinstance(encrypt, dict) else {}
    standard = pdf.resolve(filters.get("StdCF")) if isinstance(filters, dict) else None
    key = (
        empty_password_key(encrypt, standard if isinstance(standard, dict) else {}, file_id)
        if isinstance(encrypt, dict)
        else None
    )
    if key is None:
        raise DocumentError(name, "is encrypted (with a password, or AES): such PDFs are not read")
    pdf.decrypt_with(key, encrypt_ref)


def _pages(pdf: PdfFile, tree):
    """(page, its resources) in document order; a node's /Resources is inherited by what is under it.
    A node met twice (a cycle in /Kids) is read once."""
    stack, seen = [(tree, {}, 0)], set()
    while stack:
        ref, inherited, depth = stack.pop()
        if isinstance(ref, Ref):
            if ref in seen:
                continue
            seen.add(ref)
        node = pdf.resolve(ref)
        if not isinstance(node, dict):
            continue
        resources = pdf.get(node, "Resources")
        resources = resources if isinstance(resources, dict) else inherited
        kids = pdf.get(node, "Kids")
        if isinstance(kids, list) and node.get("Type") != "Page":
            if depth >= pdf.limits.max_depth:
                raise PdfLimit(f"its page tree is more than {pdf.limits.max_depth} levels deep")
            stack.extend((kid, resources, depth + 1) for kid in reversed(kids))
        else:
            yield node, resources


def _content(pdf: PdfFile, page: dict) -> bytes:
    contents = pdf.get(page, "Contents")
    streams = [pdf.resolve(s) for s in contents] if isinstance(contents, list) else [contents]
    # A page's content may be split over streams, at token boundaries.
    return b"\n".join(pdf.decode(s) for s in streams if isinstance(s, Stream))


def _text_string(raw: bytes) -> str:
    """A PDF text string (§7.9.2.2): UTF-16BE or UTF-8 behind a byte-order mark, else PDFDocEncoding,
    which is Latin-1 where text is."""
    if raw.startswith(b"\xfe\xff"):
        return raw[2:].decode("utf-16-be", "replace")
    if raw.startswith(b"\xef\xbb\xbf"):
        return raw[3:].decode("utf-8", "replace")
    return raw.decode("latin-1")
