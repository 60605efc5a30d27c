"""The tokenizer of a GGUF file, working exactly as llama.cpp's (llama_tokenize / llama_detokenize).

encode(text, add_special_tokens) is llama_tokenize(text, add_special, parse_special=True): special
tokens written in the text (chat templates write them) are matched, longest first; the text
between them goes to the vocabulary's model: SentencePiece BPE ("llama"), byte-level BPE with a
pre-tokenizer ("gpt2"), WordPiece ("bert") or Unigram ("t5"). decode(ids, skip_special_tokens) is
llama_detokenize with special tokens rendered unless skipped.
"""

from __future__ import annotations

from ..base import TokenizerBase
from ..bpe import BPE
from ..byte_level import text_to_byte_chars
from ..charsmap import CharsMap
from ..spec_error import SpecError
from .decode import Detokenizer, LlamaStreamDecoder
from .pre import SPLITS
from .special_scan import SpecialScan
from .split import splitter
from .spm import spm_tokenize
from .ugm import UnigramSession
from .vocab import LSTRIP, NORMAL, RSTRIP, UNUSED, USER_DEFINED, LlamaVocab
from .wpm import bert_words, wpm_tokenize

# C's isspace: what llama.cpp's lstrip / rstrip token flags swallow.
_C_SPACES = " \t\n\v\f\r"


class LlamaTokenizer(TokenizerBase):
    def __init__(self, vocab: LlamaVocab, *, chat_template: str | None = None):
        """Raises SpecError for a vocabulary llama.cpp would refuse or fail on."""
        special = vocab.special
        template_tokens = {
            f"{name}_token": vocab.tokens[special[name]]
            for name in ("bos", "eos", "unk", "pad")
            if special.get(name) is not None
        }
        super().__init__(
            bos_id=special.get("bos"),
            eos_ids=vocab.eog_ids,  # llama.cpp's end-of-generation tokens
            chat_template=chat_template,
            template_tokens=template_tokens,
        )
        self._vocab = vocab
        self._in_text = SpecialScan(vocab.tokens, vocab.matched_in_text())
        self._prefix, self._suffix = _affixes(vocab)
        self._tokenize_text = _text_tokenizer(vocab)
        self._detokenize = Detokenizer(vocab)

    # ---- vocabulary ----

    @property
    def vocab_size(self) -> int:
        return len(self._vocab.tokens)

    def token_to_id(self, token: str) -> int | None:
        return self._vocab.ids.get(token)

    def id_to_token(self, token_id: int) -> str | None:
        tokens = self._vocab.tokens
        return tokens[token_id] if 0 <= token_id < len(tokens) else None

    # ---- text <-> ids ----

    def encode(self, text: str, add_special_tokens: bool = False) -> list[int]:
        ids: list[int] = list(self._prefix) if add_special_tokens else []
        previous_was_token = True
        for fragment in self._split_special(text):
            if isinstance(fragment, int):
                ids.append(fragment)
                previous_was_token = True
            else:
                ids += self._tokenize_text(fragment, previous_was_token)
                previous_was_token = False
        if add_special_tokens:
            ids += self._suffix
        return ids

    def decode(self, ids: list[int], skip_special_tokens: bool = False) -> str:
        return self._detokenize(ids, special=not skip_special_tokens)

    def stream_decoder(self, skip_special_tokens: bool = True) -> LlamaStreamDecoder:
        return LlamaStreamDecoder(self._detokenize, self._vocab, special=not skip_special_tokens)

    def _split_special(self, text: str) -> list[str | int]:
        """llama.cpp's tokenizer_st_partition: each matched token in turn, longest first, is cut
        out of every text fragment at each occurrence, left to right."""
        tokens, attrs = self._vocab.tokens, self._vocab.attrs
        fragments: list[str | int] = [text] if text else []
        for token_id in self._in_text.found(text):
            token = tokens[token_id]
            attr = attrs[token_id]
            next_fragments: list[str | int] = []
            for fragment in fragments:
                if isinstance(fragment, int) or token not in fragment:
                    next_fragments.append(fragment)
                    continue
                position = 0
                while (found := fragment.find(token, position)) >= 0:
                    left = fragment[position:found]
                    if attr & LSTRIP:
                        left = left.rstrip(_C_SPACES)
                    if left:
                        next_fragments.append(left)
                    next_fragments.append(token_id)
                    position = found + len(token)
                    if attr & RSTRIP:
                        while position < len(fragment) and fragment[position] in _C_SPACES:
                            position += 1
                if position < len(fragment):
                    next_fragments.append(fragment[position:])
            fragments = next_fragments
        return fragments


def _affixes(vocab: LlamaVocab) -> tuple[list[int], list[int]]:
    """The ids llama_tokenize(add_special=True) puts before and after the text."""
    special = vocab.special
    wanted = {
        "bos": vocab.add_bos or vocab.kind == "wpm",
        "eos": vocab.add_eos and vocab.kind != "wpm",
        "sep": vocab.kind == "wpm",
    }
    for name, needed in wanted.items():
        if needed and special.get(name) is None:
            raise SpecError(f"the vocabulary adds a {name.upper()} token but has none")
    prefix = [special["bos"]] if wanted["bos"] else []
    suffix = [special[name] for name in ("eos", "sep") if wanted[name]]
    return prefix, suffix


def _text_tokenizer(vocab: LlamaVocab):
    """(fragment, whether a token precedes it) -> ids, for the vocabulary's model."""
    builders = {"spm": _sentencepiece, "bpe": _byte_pair, "wpm": _wordpiece, "ugm": _unigram}
    if vocab.kind not in builders:
        raise SpecError(f"unsupported vocabulary kind {vocab.kind!r}")
    return builders[vocab.kind](vocab)


def _sentencepiece(vocab: LlamaVocab):
    ids, scores, byte_ids = vocab.ids, vocab.scores, _byte_ids(vocab)

    def tokenize(fragment: str, after_token: bool) -> list[int]:
        # llama.cpp prepends the space to the input and to the text after every special token.
        if vocab.add_space_prefix and after_token:
            fragment = " " + fragment
        return spm_tokenize(fragment.replace(" ", "\u2581"), ids, scores, byte_ids)

    return tokenize


def _byte_pair(vocab: LlamaVocab):
    ids, split = vocab.ids, splitter(vocab.pre.split)
    byte_encode = SPLITS[vocab.pre.split][1]

    # llama.cpp spells a symbol missing from the vocab by its bytes: GGUF byte tokens when the
    # text is raw UTF-8, else the byte characters (all of them are tokens, save ASCII ones).
    def spell(char: str) -> list[int]:
        names = (f"<0x{b:02X}>" if not byte_encode else chr(b) if b < 0x80 else None for b in char.encode())
        return [ids[name] for name in names if name in ids]

    model = BPE.from_merge_list(
        ids, vocab.merges, where="tokenizer.ggml.merges", ignore_merges=vocab.ignore_merges, spell_unknown=spell
    )

    newline_runs = vocab.pre.newline_runs_whole

    def word_ids(word: str) -> tuple[int, ...]:
        # Gemma 4: a run of newlines that is a token is taken whole, not merged from "\n"s.
        if newline_runs and word in ids and not word.strip("\n"):
            return (ids[word],)
        return model.tokenize(word)

    def tokenize(fragment: str, after_token: bool) -> list[int]:
        if vocab.escape_whitespaces:
            fragment = fragment.replace(" ", "\u2581")
        words = (text_to_byte_chars(word) if byte_encode else word for word in split(fragment))
        return [token for word in words for token in word_ids(word)]

    return tokenize


def _wordpiece(vocab: LlamaVocab):
    max_chars, unk = max(map(len, vocab.tokens)), vocab.special.get("unk")

    def tokenize(fragment: str, after_token: bool) -> list[int]:
        return wpm_tokenize(bert_words(fragment, vocab.lowercase, vocab.strip_accents), vocab.ids, max_chars, unk)

    return tokenize


def _unigram(vocab: LlamaVocab):
    ids, attrs = vocab.ids, vocab.attrs
    candidates = {token: index for token, index in ids.items() if attrs[index] & (NORMAL | USER_DEFINED | UNUSED)}
    session = UnigramSession(
        vocab.tokens,
        vocab.scores,
        candidates=candidates,
        user_defined={token for token, index in candidates.items() if attrs[index] & USER_DEFINED},
        normal_ids=[index for index, attr in enumerate(attrs) if attr & NORMAL],
        unk_id=vocab.special.get("unk"),
        charsmap=CharsMap(vocab.charsmap) if vocab.charsmap else None,
        add_space_prefix=vocab.add_space_prefix,
        merge_spaces=vocab.remove_extra_whitespaces,
        escape_spaces=vocab.escape_whitespaces,
    )
    return lambda fragment, after_token: session.tokenize(fragment)


def _byte_ids(vocab: LlamaVocab) -> list[int | None]:
    """llama.cpp's byte_to_token for SentencePiece: <0xNN>, else the byte itself as a token."""
    ids = vocab.ids
    return [ids.get(f"<0x{byte:02X}>", ids.get(chr(byte)) if byte < 0x80 else None) for byte in range(256)]
