"""The text of a simple font's one-byte codes (ISO 32000-1 §9.6.6, Annex D): the standard encodings
(WinAnsi and MacRoman as Python's cp1252 and mac_roman codecs, Standard as ASCII with its own upper half)
and glyph names, for /Differences arrays: the Adobe Glyph List's names for the Latin characters these
encodings hold, uniXXXX / uXXXXX names, and names with a suffix (a.sc) or ligatures of names (f_i)."""

import re

_ASCII_NAMES = (
    "space exclam quotedbl numbersign dollar percent ampersand quotesingle parenleft parenright asterisk plus"
    " comma hyphen period slash zero one two three four five six seven eight nine colon semicolon less equal"
    " greater question at A B C D E F G H I J K L M N O P Q R S T U V W X Y Z bracketleft backslash"
    " bracketright asciicircum underscore grave a b c d e f g h i j k l m n o p q r s t u v w x y z braceleft"
    " bar braceright asciitilde"
).split()
_LATIN1_NAMES = (
    "nbspace exclamdown cent sterling currency yen brokenbar section dieresis copyright ordfeminine"
    " guillemotleft logicalnot sfthyphen registered macron degree plusminus twosuperior threesuperior acute mu"
    " paragraph periodcentered cedilla onesuperior ordmasculine guillemotright onequarter onehalf threequarters"
    " questiondown Agrave Aacute Acircumflex Atilde Adieresis Aring AE Ccedilla Egrave Eacute Ecircumflex"
    " Edieresis Igrave Iacute Icircumflex Idieresis Eth Ntilde Ograve Oacute Ocircumflex Otilde Odieresis"
    " multiply Oslash Ugrave Uacute Ucircumflex Udieresis Yacute Thorn germandbls agrave aacute acircumflex"
    " atilde adieresis aring ae ccedilla egrave eacute ecircumflex edieresis igrave iacute icircumflex"
    " idieresis eth ntilde ograve oacute ocircumflex otilde odieresis divide oslash ugrave uacute ucircumflex"
    " udieresis yacute thorn ydieresis"
).split()
_OTHER_NAMES = {
    "Euro": "€", "quotesinglbase": "‚", "florin": "ƒ", "quotedblbase": "„", "ellipsis": "…", "dagger": "†",
    "daggerdbl": "‡", "circumflex": "ˆ", "perthousand": "‰", "Scaron": "Š", "guilsinglleft": "‹", "OE": "Œ",
    "Zcaron": "Ž", "quoteleft": "‘", "quoteright": "’", "quotedblleft": "“", "quotedblright": "”",
    "bullet": "•", "endash": "–", "emdash": "—", "tilde": "˜", "trademark": "™", "scaron": "š",
    "guilsinglright": "›", "oe": "œ", "zcaron": "ž", "Ydieresis": "Ÿ", "fi": "ﬁ", "fl": "ﬂ", "ff": "ﬀ",
    "ffi": "ﬃ", "ffl": "ﬄ", "fraction": "⁄", "dotlessi": "ı", "Lslash": "Ł", "lslash": "ł", "breve": "˘",
    "dotaccent": "˙", "ring": "˚", "hungarumlaut": "˝", "ogonek": "˛", "caron": "ˇ", "minus": "−",
}  # fmt: skip
GLYPHS = {
    **{name: chr(0x20 + i) for i, name in enumerate(_ASCII_NAMES)},
    **{name: chr(0xA0 + i) for i, name in enumerate(_LATIN1_NAMES)},
    **_OTHER_NAMES,
}
# StandardEncoding's codes that are not ASCII's (its upper half holds no Latin-1 letters).
_STANDARD = (
    "27 quoteright 60 quoteleft a1 exclamdown a2 cent a3 sterling a4 fraction a5 yen a6 florin a7 section"
    " a8 currency a9 quotesingle aa quotedblleft ab guillemotleft ac guilsinglleft ad guilsinglright ae fi"
    " af fl b1 endash b2 dagger b3 daggerdbl b4 periodcentered b6 paragraph b7 bullet b8 quotesinglbase"
    " b9 quotedblbase ba quotedblright bb guillemotright bc ellipsis bd perthousand bf questiondown c1 grave"
    " c2 acute c3 circumflex c4 tilde c5 macron c6 breve c7 dotaccent c8 dieresis ca ring cb cedilla"
    " cd hungarumlaut ce ogonek cf caron d0 emdash e1 AE e3 ordfeminine e8 Lslash e9 Oslash ea OE"
    " eb ordmasculine f1 ae f5 dotlessi f8 lslash f9 oslash fa oe fb germandbls"
).split()
_UNI_NAME = re.compile(r"uni((?:[0-9A-F]{4})+)|u([0-9A-F]{4,6})")


def _codec_table(codec: str) -> list[str]:
    """Code -> text for a one-byte codec; control codes and unassigned bytes give no text."""
    return [bytes([b]).decode(codec, "ignore") if b >= 0x20 else "" for b in range(256)]


def _standard_table() -> list[str]:
    table = [chr(b) if 0x20 <= b < 0x7F else "" for b in range(256)]
    for code, name in zip(_STANDARD[::2], _STANDARD[1::2]):
        table[int(code, 16)] = GLYPHS[name]
    return table


ENCODINGS = {
    "WinAnsiEncoding": _codec_table("cp1252"),
    "MacRomanEncoding": _codec_table("mac_roman"),
    "StandardEncoding": _standard_table(),
}


def glyph_text(name: str) -> str:
    """The text of a glyph name: '' for names that say nothing (g123, cid45, .notdef)."""
    base = name.split(".", 1)[0]
    if base in GLYPHS:
        return GLYPHS[base]
    if "_" in base:
        return "".join(glyph_text(part) for part in base.split("_"))
    m = _UNI_NAME.fullmatch(base)
    if m and m[1]:
        units = bytes.fromhex(m[1])
        return units.decode("utf-16-be", "ignore")
    if m:
        code = int(m[2], 16)
        return chr(code) if code <= 0x10FFFF and not 0xD800 <= code < 0xE000 else ""
    return ""
