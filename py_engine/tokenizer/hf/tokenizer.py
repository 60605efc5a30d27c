"""The Tokenizer of HF tokenizer.json files: text <-> token ids, chat templates, streaming decode.

Everything is built by `from_spec`, which takes the pieces of a tokenizer the way HF's
tokenizer.json describes them (model, normalizer, pre_tokenizer, decoder, post_processor as
dicts); `from_file` only reads tokenizer.json into that shape. HF `tokenizers` is the reference.
(GGUF files have their own tokenizer, tokenizer/llama/, which follows llama.cpp.)
"""

from contextlib import contextmanager

from ...errors import ModelFileError
from ..base import TokenizerBase
from ..bpe import BPE
from ..spec_error import SpecError
from .added_tokens import AddedToken, AddedTokenSplitter
from .decode import build_decoder
from .files import read_model_dir, read_tokenizer_files
from .normalize import build_normalizer
from .postprocess import special_token_affixes
from .pretokenize import build_pre_tokenizer
from .sections import check_section
from .unigram import Unigram
from .wordpiece import WordPiece

# Pass for normalizer / pre_tokenizer / decoder to get the usual pipeline of `model_type`.
MODEL_DEFAULT = "model-default"

_DEFAULT_PIPELINES = {
    # GPT-2 style byte-level BPE.
    "bpe": {
        "normalizer": None,
        "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "use_regex": True},
        "decoder": {"type": "ByteLevel"},
    },
    # WordPiece and Unigram come from tokenizer.json, which always describes its pipeline.
    "wordpiece": {"normalizer": None, "pre_tokenizer": None, "decoder": None},
    "unigram": {"normalizer": None, "pre_tokenizer": None, "decoder": None},
}


class Tokenizer(TokenizerBase):
    def __init__(
        self,
        *,
        model,
        id_to_token,
        added_tokens,
        normalizer,
        pre_tokenizer,
        decoder,
        affixes,
        bos_id,
        eos_ids,
        chat_template,
        template_tokens,
    ):
        """Use `from_file`, `from_model_dir` or `from_spec`."""
        super().__init__(bos_id=bos_id, eos_ids=eos_ids, chat_template=chat_template, template_tokens=template_tokens)
        self._model = model
        self._id_to_token = id_to_token
        self._vocab_size = max(id_to_token) + 1
        self._added_by_text = {token.content: token.id for token in added_tokens}
        # HF decides what skip_special_tokens skips by token text, not id.
        self._special_texts = frozenset(token.content for token in added_tokens if token.special)
        self._splitter = AddedTokenSplitter(added_tokens, normalizer)
        self._pre_tokenizer = pre_tokenizer
        self._decoder = decoder
        self._prefix_ids, self._suffix_ids = affixes

    # ---- construction ----

    @classmethod
    def from_spec(
        cls,
        *,
        model_type: str,
        vocab: list[str] | dict[str, int],
        merges: list[str] | list[tuple[str, str]] | None = None,
        scores: list[float] | None = None,
        added_tokens: list[AddedToken] = (),
        normalizer: dict | None | str = MODEL_DEFAULT,
        pre_tokenizer: dict | None | str = MODEL_DEFAULT,
        decoder: dict | None | str = MODEL_DEFAULT,
        post_processor: dict | None = None,
        unk_token: str | None = None,
        fuse_unk: bool = False,
        byte_fallback: bool = False,
        ignore_merges: bool = False,
        continuing_subword_prefix: str = "##",
        max_input_chars_per_word: int = 100,
        bos_id: int | None = None,
        eos_ids: list[int] = (),
        add_bos: bool = False,
        add_eos: bool = False,
        chat_template: str | None = None,
        template_tokens: dict[str, str] | None = None,
        source: str = "<tokenizer spec>",
    ) -> "Tokenizer":
        """Build a tokenizer from its parts.

        model_type: "bpe" (its defaults: GPT-2's byte-level pipeline), "wordpiece" or "unigram".
        vocab: token strings indexed by id, or a {token: id} mapping.
        merges: BPE's "left right" strings or (left, right) pairs, best first.
        scores: Unigram's piece scores, indexed like `vocab`.
        unk_token / fuse_unk / byte_fallback / ignore_merges / continuing_subword_prefix /
            max_input_chars_per_word: the model options of tokenizer.json.
        normalizer / pre_tokenizer / decoder / post_processor: HF tokenizer.json sections.
        add_bos / add_eos: without a post_processor, what add_special_tokens=True adds.
        bos_id: if None, the single token the post_processor puts before the text, if any.
        eos_ids: stop tokens, the main one first.
        template_tokens: special token strings the chat template sees (bos_token, ...);
            defaults to the bos and first eos token.
        source: the file this came from, named in errors.
        Raises ModelFileError(source, ...) for anything malformed or unsupported.
        """
        with _errors_naming(source):
            if model_type not in _DEFAULT_PIPELINES:
                raise SpecError(f"unsupported tokenizer model type {model_type!r}")
            defaults = _DEFAULT_PIPELINES[model_type]
            sections = dict(normalizer=normalizer, pre_tokenizer=pre_tokenizer, decoder=decoder)
            sections = {part: defaults[part] if given == MODEL_DEFAULT else given for part, given in sections.items()}
            for part, config in {**sections, "post_processor": post_processor}.items():
                check_section(part, config)

            token_ids = dict(vocab) if isinstance(vocab, dict) else {t: i for i, t in enumerate(vocab)}
            added_tokens = list(added_tokens)
            unk_id = None if unk_token is None else token_ids.get(unk_token)
            if unk_token is not None and unk_id is None and model_type != "wordpiece":
                raise SpecError(f"unk_token {unk_token!r:.60} is not in the vocab")
            if model_type == "wordpiece":
                model = WordPiece(token_ids, unk_token, continuing_subword_prefix, max_input_chars_per_word)
            elif model_type == "unigram":
                if scores is None or len(scores) != len(vocab):
                    raise SpecError(f"a Unigram model needs one score per piece ({len(vocab)})")
                model = Unigram(list(zip(vocab, scores)), unk_id, byte_fallback)
            else:
                model = BPE.from_merge_list(
                    token_ids,
                    merges or [],
                    where="model.merges",
                    unk_id=unk_id,
                    fuse_unk=fuse_unk,
                    byte_fallback=byte_fallback,
                    ignore_merges=ignore_merges,
                )
            normalizer = build_normalizer(sections["normalizer"])
            id_to_token = {i: t for t, i in token_ids.items()}
            # Like HF, a token matched in normalized text decodes from its normalized form,
            # so that the decoder undoes the normalization (e.g. "▁<extra>" -> " <extra>").
            id_to_token.update(
                (token.id, normalizer(token.content) if token.normalized and normalizer else token.content)
                for token in added_tokens
            )
            if not id_to_token:
                raise SpecError("the vocabulary is empty")

            eos_ids = list(eos_ids)
            if post_processor is not None:
                all_ids = {**token_ids, **{token.content: token.id for token in added_tokens}}
                affixes = special_token_affixes(post_processor, all_ids.get)
            else:
                affixes = ([bos_id] if add_bos and bos_id is not None else [], eos_ids[:1] if add_eos else [])
            _check_ids(id_to_token, affixes[0] + affixes[1], "post_processor: the special tokens it adds")
            _check_ids(id_to_token, [bos_id] if bos_id is not None else [], "bos_id")
            _check_ids(id_to_token, eos_ids, "eos_ids")
            if bos_id is None and len(affixes[0]) == 1:
                bos_id = affixes[0][0]
            if template_tokens is None:
                template_tokens = _default_template_tokens(id_to_token, bos_id, eos_ids)

            return cls(
                model=model,
                id_to_token=id_to_token,
                added_tokens=added_tokens,
                normalizer=normalizer,
                pre_tokenizer=build_pre_tokenizer(sections["pre_tokenizer"]),
                decoder=build_decoder(sections["decoder"]),
                affixes=affixes,
                bos_id=bos_id,
                eos_ids=eos_ids,
                chat_template=chat_template,
                template_tokens=template_tokens,
            )

    @classmethod
    def from_file(cls, path, config_path=None) -> "Tokenizer":
        """Load an HF tokenizer.json, with its tokenizer_config.json if given."""
        return cls.from_spec(**read_tokenizer_files(path, config_path))

    @classmethod
    def from_model_dir(cls, directory) -> "Tokenizer":
        """Load tokenizer.json, and tokenizer_config.json / chat_template.jinja if present."""
        return cls.from_spec(**read_model_dir(directory))

    # ---- text <-> ids ----

    @property
    def vocab_size(self) -> int:
        """One more than the largest token id, added tokens included."""
        return self._vocab_size

    def token_to_id(self, token: str) -> int | None:
        added = self._added_by_text.get(token)
        return added if added is not None else self._model.vocab.get(token)

    def id_to_token(self, token_id: int) -> str | None:
        return self._id_to_token.get(token_id)

    def encode(self, text: str, add_special_tokens: bool = False) -> list[int]:
        ids: list[int] = list(self._prefix_ids) if add_special_tokens else []
        for piece, added_id, at_start in self._splitter.split(text):
            if added_id is not None:
                ids.append(added_id)
                continue
            words = self._pre_tokenizer(piece, at_start) if self._pre_tokenizer else [piece]
            for word in words:
                ids.extend(self._model.tokenize(word))
        if add_special_tokens:
            ids.extend(self._suffix_ids)
        return ids

    def decode(self, ids: list[int], skip_special_tokens: bool = False) -> str:
        tokens = []
        for token_id in ids:
            token = self._id_to_token.get(token_id)
            # Like HF, ids outside the vocabulary are dropped.
            if token is not None and not (skip_special_tokens and token in self._special_texts):
                tokens.append(token)
        if self._decoder is None:
            return " ".join(tokens)
        return "".join(self._decoder(tokens))

    def _skipped(self, token_id: int) -> bool:
        return self._id_to_token.get(token_id) in self._special_texts


@contextmanager
def _errors_naming(source: str):
    """Report a problem in the tokenizer description (a SpecError: the parts check what they
    are given, sections.py the pipeline's shape) as a ModelFileError naming `source`."""
    try:
        yield
    except SpecError as err:
        raise ModelFileError(source, str(err)) from None


def _check_ids(id_to_token: dict[int, str], ids: list, what: str) -> None:
    """Ids the tokenizer emits or stops on must be tokens: the model has no embedding for others."""
    for token_id in ids:
        if not isinstance(token_id, int) or isinstance(token_id, bool) or token_id not in id_to_token:
            raise SpecError(f"{what}: {token_id!r} is not a token id of the vocabulary")


def _default_template_tokens(id_to_token: dict[int, str], bos_id: int | None, eos_ids: list[int]) -> dict:
    template_tokens = {}
    if bos_id is not None:
        template_tokens["bos_token"] = id_to_token[bos_id]
    if eos_ids:
        template_tokens["eos_token"] = id_to_token[eos_ids[0]]
    return template_tokens
