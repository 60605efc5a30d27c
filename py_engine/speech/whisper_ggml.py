"""whisper.cpp's model files (ggml-base.bin, ggml-tiny.en-q5_1.bin, ...) as a Whisper checkpoint:
read_ggml_whisper_files(path) gives whisper_model.WhisperFiles, which load_whisper_transcriber takes
as it takes an HF folder's. The file (formats/ggml_whisper.py reads and checks its headers) holds
only the sizes, the mel filters, the BPE vocabulary's bytes and the tensors; the rest is derived as
whisper.cpp and transformers do it:

- The config: the hyperparameters (GGMLWhisper.config). The mel filters are not read: the front-end
  computes the Slaney bank itself (speech/log_mel.py, as WhisperFeatureExtractor's).
- Weights: F32 and F16 tensors, and whisper.cpp's quantized ones in the block formats the engine's
  weight kernels read (shaders/weights/: Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q4_K, Q5_K, Q6_K) at
  quantization version 2 (today's ggml: ftype = type + 2000); any other type or version is refused
  by name. whisper.cpp quantizes only 2-D matrices, so the convolutions, norms, biases and
  positions stay float (checked).
- Special ids: whisper.cpp's whisper_vocab layout, counted back from n_vocab's end: 1,501
  timestamps, before them <|notimestamps|>, <|nospeech|>, <|startofprev|>, <|startoflm|>,
  <|transcribe|>, <|translate|>, the languages, <|startoftranscript|> and <|endoftext|> (50,256 for
  an English-only vocabulary, 50,257 for a multilingual one, n_vocab >= 51,865 as whisper.cpp
  tells them apart). A smaller, test-sized vocabulary (tools/make_whisper_fixture.py) has
  <|endoftext|> right after its BPE tokens and counts as multilingual.
- Generation: transformers' generation_config.json for the hub's Whisper checkpoints: suppress_tokens
  (openai/whisper's tokenizer.non_speech_tokens on its multilingual or gpt2 vocabulary, the text ids
  below, checked equal to whisper-base's hub list, then <|startoftranscript|>, <|translate|>,
  <|transcribe|>, <|startoflm|>, <|startofprev|>, <|nospeech|>), begin_suppress_tokens (" " and
  <|endoftext|>), max_initial_timestamp_index 50, forced_decoder_ids (multilingual: the detected
  language then <|transcribe|>; English-only: <|notimestamps|>).
- The tokenizer: the engine's byte-level BPE (tokenizer/) over the file's vocabulary, its merges
  derived from the token order (the ids are openai's tiktoken ranks: a token's merges are its splits
  into two lower-ranked tokens, as transformers' TikTokenConverter derives them), GPT-2's
  pre-tokenizer, and the special and timestamp tokens as HF's Whisper tokenizer.json adds them.
  Decoding is what transcription needs; encoding (a prompt) equals tiktoken's on openai's ranks.
"""

from __future__ import annotations

from pathlib import Path

from ..errors import ModelFileError
from ..formats.ggml_whisper import LANGUAGES, GGMLWhisper, read_ggml_whisper
from ..formats.source import LocalModel
from ..models.whisper import whisper_configs
from ..tokenizer import AddedToken, Tokenizer
from ..tokenizer.byte_level import BYTE_TO_CHAR
from .whisper_generation import WhisperSettings
from .whisper_model import WhisperFiles

FLOATS = ("F32", "F16")
QUANTIZED = ("Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0", "Q4_K", "Q5_K", "Q6_K")  # shaders/weights/ reads these
QNT_VERSION = 2  # ggml's GGML_QNT_VERSION: the block layouts the kernels read
QNT_FACTOR = 1000  # ftype = weight type + QNT_FACTOR * quantization version
TIMESTAMPS = 1501  # <|0.00|> .. <|30.00|>
FULL_VOCAB = 51864  # an English-only Whisper's n_vocab; multilingual ones have more
SPECIALS = ("translate", "transcribe", "startoflm", "startofprev", "nospeech", "notimestamps")
MAX_INITIAL_TIMESTAMP_INDEX = 50
SPACE = 220  # " ": begin-suppressed

# openai/whisper's tokenizer.non_speech_tokens (symbols and their spaced forms that are one token),
# the text ids of the hub's generation_config.json suppress_tokens.
NON_SPEECH = (1, 2, 7, 8, 9, 10, 14, 25, 26, 27, 28, 29, 31, 58, 59, 60, 61, 62, 63, 90, 91, 92, 93)
NON_SPEECH_MULTILINGUAL = NON_SPEECH + (
    359, 503, 522, 542, 873, 893, 902, 918, 922, 931, 1350, 1853, 1982, 2460, 2627, 3246, 3253, 3268, 3536, 3846,
    3961, 4183, 4667, 6585, 6647, 7273, 9061, 9383, 10428, 10929, 11938, 12033, 12331, 12562, 13793, 14157, 14635,
    15265, 15618, 16553, 16604, 18362, 18956, 20075, 21675, 22520, 26130, 26161, 26435, 28279, 29464, 31650, 32302,
    32470, 36865, 42863, 47425, 49870, 50254,
)  # fmt: skip
NON_SPEECH_ENGLISH = NON_SPEECH + (
    357, 366, 438, 532, 685, 705, 796, 930, 1058, 1220, 1267, 1279, 1303, 1343, 1377, 1391, 1635, 1782, 1875, 2162,
    2361, 2488, 3467, 4008, 4211, 4600, 4808, 5299, 5855, 6329, 7203, 9609, 9959, 10563, 10786, 11420, 11709, 11907,
    13163, 13697, 13700, 14808, 15306, 16410, 16791, 17992, 19203, 19510, 20724, 22305, 22935, 27007, 30109, 30420,
    33409, 34949, 40283, 40493, 40549, 47282, 49146,
)  # fmt: skip
GPT2_PRE_TOKENIZER = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True}
BYTE_LEVEL_DECODER = {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True}


class GGMLFile(LocalModel):
    """whisper.cpp's one model file as a ModelSource: every tensor's bytes are in it."""

    def __init__(self, path):
        super().__init__(path)
        self.kind = "ggml"

    def file(self, rel: str) -> Path:
        return self.path

    def small_dir(self) -> Path:
        raise ModelFileError(self.path, "a whisper.cpp model file has no folder of config files")

    def exists(self, rel: str) -> bool:
        return rel == self.path.name

    def files(self) -> list[str]:
        return [self.path.name]


async def load_ggml_transcriber(path, device, **options):
    """A WhisperTranscriber of whisper.cpp's model file at `path` (options: load_whisper_transcriber's)."""
    from .whisper_transcriber import load_whisper_transcriber

    return await load_whisper_transcriber(read_ggml_whisper_files(path), device, **options)


def read_ggml_whisper_files(path) -> WhisperFiles:
    """whisper.cpp's model file at `path`, read and checked (ModelFileError naming the file)."""
    model = read_ggml_whisper(path)
    check_types(model)
    encoder, decoder, geometry = whisper_configs(model.config(), model.path)
    ids = special_ids(model)
    return WhisperFiles(
        GGMLFile(model.path),
        encoder,
        decoder,
        geometry,
        model.tensors,
        vocab_tokenizer(model, ids),
        settings(model, ids),
    )


def check_types(model: GGMLWhisper) -> None:
    """Every tensor in a type the engine reads: matrices float or a supported block format at
    quantization version 2, everything else float."""
    ftype = model.hparams["ftype"]
    for name, info in model.tensors.items():
        if info.dtype in FLOATS:
            continue
        if info.dtype not in QUANTIZED:
            supported = ", ".join(FLOATS + QUANTIZED)
            raise ModelFileError(
                model.path, f"tensor {info.name!r} is {info.dtype}, not supported (supported: {supported})"
            )
        if len(info.shape) != 2 or name.endswith("embed_positions.weight"):
            raise ModelFileError(model.path, f"tensor {info.name!r} is {info.dtype}: only Whisper's matrices may be")
        if ftype // QNT_FACTOR != QNT_VERSION:
            raise ModelFileError(
                model.path,
                f"quantization version {ftype // QNT_FACTOR} (ftype {ftype}): only ggml's version {QNT_VERSION} "
                "block layouts are read (quantize the f16 file again with a current whisper.cpp)",
            )


def special_ids(model: GGMLWhisper) -> dict:
    """Token ids by name (SPECIALS, "eot", "sot", "timestamp_begin", "languages": their count)."""
    n_vocab, n_bpe = model.hparams["n_vocab"], len(model.vocab)
    begin = n_vocab - TIMESTAMPS
    ids = {name: begin - len(SPECIALS) + i for i, name in enumerate(SPECIALS)}
    eot = (50257 if multilingual(model) else 50256) if n_vocab >= FULL_VOCAB else n_bpe
    languages = ids["translate"] - eot - 2
    if n_bpe > eot or not 0 <= languages <= len(LANGUAGES):
        raise ModelFileError(
            model.path,
            f"n_vocab {n_vocab} does not hold Whisper's special and timestamp tokens after {n_bpe} BPE tokens",
        )
    return {**ids, "eot": eot, "sot": eot + 1, "timestamp_begin": begin, "languages": languages}


def multilingual(model: GGMLWhisper) -> bool:
    n_vocab = model.hparams["n_vocab"]
    return n_vocab >= FULL_VOCAB + 1 or n_vocab < FULL_VOCAB


def settings(model: GGMLWhisper, ids: dict) -> WhisperSettings:
    """transformers' hub generation_config.json for this vocabulary."""
    many = multilingual(model)
    text = NON_SPEECH_MULTILINGUAL if many else NON_SPEECH_ENGLISH
    specials = [ids[name] for name in SPECIALS[:-1]]
    languages = LANGUAGES[: ids["languages"]] if many else ()
    return WhisperSettings(
        start=ids["sot"],
        eos=ids["eot"],
        no_timestamps=ids["notimestamps"],
        prev_sot=ids["startofprev"],
        lang_to_id={f"<|{code}|>": ids["sot"] + 1 + i for i, code in enumerate(languages)},
        task_to_id={"translate": ids["translate"], "transcribe": ids["transcribe"]} if many else {},
        suppress=tuple(sorted([i for i in text if i < len(model.vocab)] + [ids["sot"], *specials])),
        begin_suppress=(SPACE, ids["eot"]),
        max_initial_timestamp=MAX_INITIAL_TIMESTAMP_INDEX,
        multilingual=many,
        max_target_positions=model.hparams["n_text_ctx"],
        forced=((1, None), (2, ids["transcribe"])) if many else ((1, ids["notimestamps"]),),
    )


def vocab_tokenizer(model: GGMLWhisper, ids: dict) -> Tokenizer:
    """The engine's Tokenizer of the file's vocabulary (the module's docstring says how)."""
    ranks: dict[bytes, int] = {}
    for rank, token in enumerate(model.vocab):
        if token in ranks:
            raise ModelFileError(model.path, f"vocabulary token {rank} repeats token {ranks[token]} ({token!r:.40})")
        ranks[token] = rank
    merges = []
    for token in ranks:  # in rank order: a token's merges rank as the token
        splits = [(token[:i], token[i:]) for i in range(1, len(token))]
        splits = sorted((ranks[a], ranks[b], a, b) for a, b in splits if a in ranks and b in ranks)
        merges += [(_chars(a), _chars(b)) for _, _, a, b in splits]
    added = [
        AddedToken(ids["eot"], "<|endoftext|>", special=True),
        AddedToken(ids["sot"], "<|startoftranscript|>", special=True),
    ]
    added += [
        AddedToken(ids["sot"] + 1 + i, f"<|{code}|>", special=True)
        for i, code in enumerate(LANGUAGES[: ids["languages"]])
    ]
    added += [AddedToken(ids[name], f"<|{name}|>", special=True) for name in SPECIALS]
    added += [
        AddedToken(ids["timestamp_begin"] + i, f"<|{i // 50}.{i % 50 * 2:02d}|>", normalized=True)
        for i in range(TIMESTAMPS)
    ]
    return Tokenizer.from_spec(
        model_type="bpe",
        vocab={_chars(token): rank for token, rank in ranks.items()},
        merges=merges,
        added_tokens=added,
        normalizer=None,
        pre_tokenizer=GPT2_PRE_TOKENIZER,
        decoder=BYTE_LEVEL_DECODER,
        eos_ids=[ids["eot"]],
        source=model.path,
    )


def _chars(token: bytes) -> str:
    return "".join(BYTE_TO_CHAR[b] for b in token)
