"""A user's document read to text for on-device memory (issue 31): read_document(name, data, media_type)
gives a Document with the text, its kind, title and sections (a PDF's pages, a Markdown or HTML file's
headings) at character offsets, so a passage can be cited as "page 3" or by the heading it sits under.

The kind comes from a specific media type (text/markdown, text/html, application/pdf), else the name's
suffix, else a generic media type (text/plain), else the content (an HTML page by its doctype or
<html>); a PDF is known by its %PDF- header whatever it is called. Text is UTF-8 (a BOM is dropped),
UTF-16 behind its BOM, a declared charset (the media type's, an HTML <meta>), or for old files
Windows-1252 when it is not UTF-8. Tolerances, each one in a thousand bytes: invalid UTF-8 sequences
read as U+FFFD (more: Windows-1252), NUL bytes are dropped, control characters other than tab, line and
page breaks and escape (ANSI colours in logs) are kept; more NULs or control characters is binary data,
refused. Every refusal is one DocumentError naming the document (limits.py has the caps)."""

import codecs
import re
from dataclasses import dataclass

from ..errors import DocumentError
from .html_text import html_text
from .limits import DEFAULT_LIMITS, ReadLimits, size_text
from .markdown import markdown_headings
from .pdf import read_pdf

KINDS = ("text", "markdown", "html", "pdf")
_MEDIA_TYPES = {
    "application/pdf": "pdf",
    "text/markdown": "markdown",
    "text/x-markdown": "markdown",
    "text/html": "html",
    "application/xhtml+xml": "html",
}
_SUFFIXES = {
    **dict.fromkeys((".md", ".markdown", ".mdown", ".mkd"), "markdown"),
    **dict.fromkeys((".html", ".htm", ".xhtml"), "html"),
    ".pdf": "pdf",
}
_HTML_START = re.compile(rb"\s*(?:<!--.*?-->\s*)*<(?:!doctype\s+html|html)\b", re.I | re.S)
_META_CHARSET = re.compile(rb"<meta[^>]+charset\s*=\s*[\"']?([A-Za-z0-9._:-]+)", re.I)
_BLANK = re.compile(rb"[\s\x00]*\Z")  # stops at the first other byte: no copy of a large file
_BLANK_TEXT = re.compile(r"\s*\Z")
_CONTROL = re.compile(r"[\x01-\x08\x0b\x0e-\x1a\x1c-\x1f\x7f]")


@dataclass(frozen=True)
class Section:
    title: str  # "page 3", or a heading's text
    level: int  # 0 for a page, 1-6 for a heading
    start: int  # offsets into Document.text; a heading's section runs to the next heading of its level or above
    end: int
    page: int | None = None


@dataclass(frozen=True)
class Document:
    name: str
    kind: str  # one of KINDS
    text: str
    title: str | None
    sections: tuple[Section, ...]

    def sections_at(self, offset: int) -> list[Section]:
        """The sections holding character `offset`, outermost first: [page 3] in a PDF, the
        headings a passage sits under in Markdown or HTML."""
        return [s for s in self.sections if s.start <= offset < s.end]

    def place_at(self, offset: int) -> str:
        """Where `offset` lies as a citation says it: "page 3", "Garden > Tomatoes" ("": nowhere
        named). Collection.add(places=document.place_at)."""
        return " > ".join(s.title for s in self.sections_at(offset))


def read_document(
    name: str, data: bytes, media_type: str | None = None, limits: ReadLimits = DEFAULT_LIMITS
) -> Document:
    kind = document_kind(name, data, media_type)
    cap = limits.max_pdf_bytes if kind == "pdf" else limits.max_text_bytes
    if len(data) > cap:
        raise DocumentError(name, f"is {size_text(len(data))}; {kind} documents over {size_text(cap)} are not read")
    if _BLANK.match(data):
        raise DocumentError(name, "is empty")
    if kind == "pdf":
        return _pdf_document(name, data, limits)
    text = decode_text(name, data, _declared_charset(data, media_type, kind))
    if "\r" in text:  # one line end, \n, for offsets and headings (a copy only for files that need it)
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    if _BLANK_TEXT.match(text):
        raise DocumentError(name, "has no text")
    if kind == "html":
        text, title, headings = html_text(text)
        if _BLANK_TEXT.match(text):
            raise DocumentError(name, "has no text (an HTML page with nothing but markup and scripts)")
        title = title or next((t for level, t, _ in headings if level == 1), None)
    else:
        headings = markdown_headings(text) if kind == "markdown" else []
        title = next((t for level, t, _ in headings if level == 1), None)
    return Document(name, kind, text, title, _heading_sections(headings, len(text)))


def document_kind(name: str, data: bytes, media_type: str | None) -> str:
    if data.startswith(b"%PDF-"):
        return "pdf"
    media = (media_type or "").split(";")[0].strip().lower()
    if media in _MEDIA_TYPES:
        return _MEDIA_TYPES[media]
    suffix = name[name.rfind(".") :].lower() if "." in name else ""
    if suffix in _SUFFIXES:  # over a generic text/plain, which some systems give Markdown files
        return _SUFFIXES[suffix]
    if media.startswith("text/"):
        return "text"
    return "html" if _HTML_START.match(data, 0, 4096) else "text"


def decode_text(name: str, data: bytes, charset: str | None = None) -> str:
    if data.startswith(codecs.BOM_UTF8):
        return data[3:].decode("utf-8", "replace")
    if data.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        return data.decode("utf-16", "replace")
    if charset:
        return data.decode(charset, "replace")
    tolerance = len(data) // 1000
    nuls = data.count(b"\x00")
    if nuls > tolerance:
        raise DocumentError(name, "is binary data, not text (NUL bytes; UTF-16 text needs its byte-order mark)")
    if nuls:
        data = data.replace(b"\x00", b"")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        text = data.decode("utf-8", "replace")
        if text.count("\ufffd") - data.count("\ufffd".encode()) > tolerance:
            text = data.decode("cp1252", "replace")  # Windows' old default for text files
    if _CONTROL.search(text) and len(_CONTROL.findall(text)) > tolerance:
        raise DocumentError(name, "is binary data, not text (control characters)")
    return text


def _declared_charset(data: bytes, media_type: str | None, kind: str) -> str | None:
    found = re.search(r"charset\s*=\s*[\"']?([A-Za-z0-9._:-]+)", media_type or "", re.I)
    if found is None and kind == "html":
        found = _META_CHARSET.search(data, 0, 4096)
    if found is None:
        return None
    label = found[1].decode("ascii") if isinstance(found[1], bytes) else found[1]
    try:
        return codecs.lookup(label).name
    except LookupError:
        return None  # a charset Python does not know: read as if none were declared


def _heading_sections(headings: list[tuple[int, str, int]], length: int) -> tuple[Section, ...]:
    sections = []
    for i, (level, title, start) in enumerate(headings):
        end = next((s for lv, _, s in headings[i + 1 :] if lv <= level), length)
        sections.append(Section(title, level, start, end))
    return tuple(sections)


def _pdf_document(name: str, data: bytes, limits: ReadLimits) -> Document:
    pdf = read_pdf(name, data, limits)
    if not any(page.strip() for page in pdf.pages):
        raise DocumentError(
            name, f"has no text to extract in its {len(pdf.pages)} page(s) (a scanned PDF? it would need OCR)"
        )
    sections, offset = [], 0
    for number, page in enumerate(pdf.pages, 1):
        sections.append(Section(f"page {number}", 0, offset, offset + len(page), page=number))
        offset += len(page) + 2
    return Document(name, "pdf", "\n\n".join(pdf.pages), pdf.title, tuple(sections))
