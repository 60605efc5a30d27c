"""Markdown headings (CommonMark's ATX `# Title` and setext `Title` over `===` / `---`), outside fenced
code blocks, with the character offset of the line each starts on. The text itself stays as written."""

import re

_ATX = re.compile(r" {0,3}(#{1,6})(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*")
_SETEXT = re.compile(r" {0,3}(=+|-+)[ \t]*")
_FENCE = re.compile(r" {0,3}(`{3,}|~{3,})")


def markdown_headings(text: str) -> list[tuple[int, str, int]]:
    """(level 1-6, title, offset) for each heading, in order."""
    headings, fence, offset, previous = [], None, 0, None  # previous: (offset, line) of a paragraph line
    for line in text.split("\n"):
        opened = _FENCE.match(line)
        if fence:
            if opened and opened[1][0] == fence[0] and len(opened[1]) >= len(fence) and not line.strip(" `~"):
                fence = None
        elif opened:
            fence, previous = opened[1], None
        elif atx := _ATX.fullmatch(line):
            headings.append((len(atx[1]), (atx[2] or "").strip(), offset))
            previous = None
        elif (setext := _SETEXT.fullmatch(line)) and previous is not None:
            headings.append((1 if setext[1][0] == "=" else 2, previous[1].strip(), previous[0]))
            previous = None
        else:
            previous = (offset, line) if line.strip() else None
        offset += len(line) + 1
    return headings
