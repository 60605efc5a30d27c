"""An HTML page's readable text, by the standard library's html.parser: entities decoded, scripts,
styles and other non-text elements dropped, block elements on lines of their own (list items with a
`- `, table cells apart by a tab), runs of whitespace collapsed outside <pre>, and each heading
(h1-h6) recorded with its offset. The <title> is kept apart, not in the text."""

import re
from html.parser import HTMLParser

_DROPPED = {"script", "style", "noscript", "template", "svg", "math", "iframe", "object", "select"}
_BLOCKS = {
    "address", "article", "aside", "blockquote", "body", "br", "dd", "details", "div", "dl", "dt", "fieldset",
    "figcaption", "figure", "footer", "form", "h1", "h2", "h3", "h4", "h5", "h6", "header", "hr", "li", "main",
    "nav", "ol", "p", "pre", "section", "summary", "table", "tbody", "thead", "tfoot", "tr", "ul",
}  # fmt: skip
_BULLET = "- "
_SPACES = re.compile(r"[ \t\n\r\f]+")


class _TextParser(HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self.length = 0
        self.dropping: list[str] = []  # open dropped elements (they nest: <noscript><style>)
        self.pre = 0
        self.title: list[str] | None = None
        self.titles: list[str] = []
        self.heading: tuple[int, int, list[str]] | None = None  # (level, offset, words) of an open heading
        self.headings: list[tuple[int, str, int]] = []

    def handle_starttag(self, tag, attrs):
        if tag == "title":
            self.title = []
        elif tag in _DROPPED:
            self.dropping.append(tag)
        elif self.dropping:
            return
        if tag in _BLOCKS:
            self._line()
        if tag == "li":
            self._add(_BULLET)
        elif tag in ("td", "th") and self.parts and not self.parts[-1].endswith("\n"):  # between cells
            self._add("\t")
        elif tag == "pre":
            self.pre += 1
        elif len(tag) == 2 and tag[0] == "h" and tag[1] in "123456":
            self.heading = (int(tag[1]), self.length, [])

    def handle_endtag(self, tag):
        if tag == "title" and self.title is not None:
            self.titles.append(_SPACES.sub(" ", "".join(self.title)).strip())
            self.title = None
        elif self.dropping:
            if tag == self.dropping[-1]:
                self.dropping.pop()
            return
        if tag == "pre" and self.pre:
            self.pre -= 1
        if self.heading and tag == f"h{self.heading[0]}":
            level, offset, words = self.heading
            title = _SPACES.sub(" ", "".join(words)).strip()
            if title:
                self.headings.append((level, title, offset))
            self.heading = None
        if tag in _BLOCKS:
            self._line()

    def handle_data(self, data):
        if self.title is not None:
            self.title.append(data)
        elif not self.dropping:
            if not self.pre:
                data = _SPACES.sub(" ", data)
                if data.startswith(" ") and (not self.parts or self.parts[-1][-1:] in (" ", "\n", "\t")):
                    data = data[1:]
            if self.heading:
                self.heading[2].append(data)
            self._add(data)

    def _add(self, text: str) -> None:
        if text:
            self.parts.append(text)
            self.length += len(text)

    def _line(self) -> None:
        """End the current line, unless it is empty: a block starts on a line of its own."""
        if not self.parts or self.parts[-1].endswith("\n") or self.parts[-1] is _BULLET:  # <li><p>: one line
            return
        if not self.pre:  # no space at a line's end
            trimmed = self.parts[-1].rstrip(" ")
            self.length -= len(self.parts[-1]) - len(trimmed)
            self.parts[-1] = trimmed
        self._add("\n")


def html_text(html: str) -> tuple[str, str | None, list[tuple[int, str, int]]]:
    """(text, title, headings as (level, title, offset in the text))."""
    parser = _TextParser()
    parser.feed(html)
    parser.close()
    text = "".join(parser.parts)
    return text, (parser.titles[0] if parser.titles and parser.titles[0] else None), parser.headings
