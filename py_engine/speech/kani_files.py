"""A Kani-TTS-2 folder read and checked before any GPU opens: its LFM2 backbone (config.json with Kani's
keys, safetensors, tokenizer.json), its voices and its NanoCodec (speech/nanocodec.py's files, in the
folder's `nanocodec/` or given). Every problem is a ModelFileError naming the file.

Kani-TTS-2 (kani-tts-2-en) fine-tunes LFM2-350M and is under Liquid AI's LFM1.0 license (`license:
other`, not Apache); NanoCodec is under the NVIDIA Open Model License.

Its token layout (kani-tts-2's core.py) follows the text vocabulary's size T (tokeniser_length, 64400):
START_OF_SPEECH T + 1, END_OF_SPEECH T + 2, START_OF_HUMAN T + 3, END_OF_HUMAN T + 4, START_OF_AI T + 5,
END_OF_AI T + 6, PAD T + 7, audio tokens from T + 10: slot k of a frame is codebook k's code + k x
codebook size. START_OF_TEXT / END_OF_TEXT are the tokenizer's 1 and 2.

Voices are speaker embeddings (kani-tts-2's speaker_emb: WavLM vectors of speaker_emb_dim numbers), one
tensor each in `voices.safetensors` under the voice's name; the model projects one
(model.speaker_emb_projection) into the row after the prompt's first token. Kani ships them as torch
.pt files: a pickle, which the engine never opens (save the tensor with safetensors instead).
"""

from __future__ import annotations

import re
from array import array
from dataclasses import dataclass, field, replace
from pathlib import Path

from ..errors import ModelFileError
from ..formats.hf_dir import read_tensor_index
from ..formats.json_file import read_json
from ..formats.safetensors import parse_header
from ..formats.source import ModelSource, open_source
from ..models.config import config_from_hf
from ..models.config_check import check_config
from ..models.config_values import ConfigKeys
from ..models.kani_tts import ALPHA
from ..models.tensor_check import check_tensors
from .nanocodec import CodecFiles, read_codec_files

ARCHITECTURE = "KaniTTS2ForCausalLM"
TEXT_VOCAB = 64400  # kani-tts-2's TTSConfig.tokeniser_length, where config.json does not say
START_OF_TEXT, END_OF_TEXT = 1, 2
SPEAKER_PROJECTION = "model.speaker_emb_projection.weight"
VOICES = "voices.safetensors"
CODEC_DIR = "nanocodec"


@dataclass(frozen=True)
class KaniSettings:
    text_vocab: int
    per_frame: int  # audio tokens a frame: the codec's codebooks
    codebook: int  # codes a codebook
    audio_step: float  # the position an audio frame advances
    learnable_rope: bool
    alpha_min: float
    alpha_max: float
    speaker_dim: int
    languages: tuple = ()  # language tags the text may start with ("tag: text"), if the model has any

    def special(self, offset: int) -> int:
        return self.text_vocab + offset

    @property
    def audio_start(self) -> int:
        return self.text_vocab + 10

    @property
    def start_of_speech(self) -> int:
        return self.special(1)

    @property
    def end_of_speech(self) -> int:
        return self.special(2)


@dataclass
class KaniFiles:
    source: ModelSource
    cfg: object  # the backbone's ModelConfig (LFM2's)
    tensors: dict
    settings: KaniSettings
    tokenizer: object
    codec: CodecFiles
    voices: dict = field(default_factory=dict)  # name -> speaker embedding (floats)
    alphas: dict = field(default_factory=dict)  # attention layer -> its alpha_weight


def read_kani_files(model, codec=None) -> KaniFiles:
    """model: a Kani-TTS-2 folder (or ModelSource); codec: NanoCodec's folder (default the model's
    nanocodec/), a ModelSource or read_codec_files' CodecFiles."""
    source = open_source(model)
    path = source.small_dir() / "config.json"
    raw = read_json(path)
    if raw.get("architectures") != [ARCHITECTURE]:
        raise ModelFileError(path, f"architectures should be [{ARCHITECTURE!r}] (a Kani-TTS-2 model)")
    cfg = config_from_hf({**raw, "architectures": ["Lfm2ForCausalLM"]}, path)  # its backbone, as LFM2
    check_config(cfg, path)
    tensors = read_tensor_index(source)  # every *.safetensors: the voices' file is not the model's
    if source.exists(VOICES):
        tensors = {name: info for name, info in tensors.items() if info.path != source.locate(VOICES)}
    check_tensors(cfg, tensors, path)
    if codec is None:
        if not isinstance(model, (str, Path)):
            raise ModelFileError(source.label, "give the NanoCodec folder (codec=...)")
        codec = Path(model) / CODEC_DIR
    codec = codec if isinstance(codec, CodecFiles) else read_codec_files(codec)
    settings = kani_settings(ConfigKeys(raw, path), cfg, codec)
    cfg = replace(cfg, learnable_rope=settings.learnable_rope)
    files = KaniFiles(source, cfg, tensors, settings, _tokenizer(source), codec)
    files.alphas = _alphas(files, path)
    files.voices = _voices(files)
    return files


def kani_settings(keys: ConfigKeys, cfg, codec: CodecFiles) -> KaniSettings:
    """Kani's config.json keys (kani-tts-2's defaults where absent), checked against the backbone's
    vocabulary and the codec's codebooks."""
    text_vocab = keys.int("text_vocab_size", TEXT_VOCAB)
    start = keys.int("audio_tokens_start", text_vocab + 10)
    if start != text_vocab + 10:
        keys.fail("audio_tokens_start", f"text_vocab_size + 10 ({text_vocab + 10}: kani-tts-2's layout)", start)
    per_frame = keys.int("tokens_per_frame", 4)
    if per_frame != codec.cfg.groups:
        keys.fail("tokens_per_frame", f"the codec's codebooks ({codec.cfg.groups})", per_frame)
    end = start + per_frame * codec.cfg.codebook_size
    if end > cfg.vocab_size:
        keys.fail(
            "vocab_size",
            f"at least {end} (audio tokens from {start}, {per_frame} x {codec.cfg.codebook_size})",
            cfg.vocab_size,
        )
    step = keys.number("audio_step", 1.0)
    if not 0 < step <= 64:
        keys.fail("audio_step", "a position step above 0", step)
    languages = keys.section("language_settings")
    tags = languages.get("language_tags_list", []) if languages.str("status", "") == "available_language_tags" else []
    if not isinstance(tags, list) or not all(isinstance(t, str) and t.strip() for t in tags):
        languages.fail("language_tags_list", "a list of tags", tags)
    return KaniSettings(
        text_vocab=text_vocab,
        per_frame=per_frame,
        codebook=codec.cfg.codebook_size,
        audio_step=step,
        learnable_rope=keys.bool("use_learnable_rope", False),
        alpha_min=keys.number("alpha_min", 0.1),
        alpha_max=keys.number("alpha_max", 2.0),
        speaker_dim=keys.int("speaker_emb_dim", 128),
        languages=tuple(t.strip() for t in tags),
    )


def _tokenizer(source: ModelSource):
    if not source.exists("tokenizer.json"):
        raise ModelFileError(source.label, "no tokenizer.json: Kani-TTS-2 reads text")
    from ..tokenizer import Tokenizer

    return Tokenizer.from_model_dir(source.small_dir())


def _alphas(files: KaniFiles, path) -> dict[int, float]:
    """Each attention layer's alpha_weight where the model's RoPE is learnable (every one must have it)."""
    if not files.settings.learnable_rope:
        return {}
    layers = [i for i in range(files.cfg.num_layers) if files.cfg.layer_type(i) == "full_attention"]
    missing = [ALPHA.format(i) for i in layers if ALPHA.format(i) not in files.tensors]
    if missing:
        raise ModelFileError(path, f"use_learnable_rope but no tensor {missing[0]!r}")
    return {i: host_floats(files.source, files.tensors[ALPHA.format(i)], 1)[0] for i in layers}


def _voices(files: KaniFiles) -> dict[str, list[float]]:
    """voices.safetensors' speaker embeddings, each speaker_emb_dim numbers (and the projection
    that takes them)."""
    source, dim = files.source, files.settings.speaker_dim
    if not source.exists(VOICES):
        return {}
    infos = parse_header(
        lambda start, length: source.read(VOICES, start, length), source.size(VOICES), source.locate(VOICES)
    )
    projection = files.tensors.get(SPEAKER_PROJECTION)
    if infos and (projection is None or tuple(projection.shape) != (files.cfg.hidden_size, dim)):
        raise ModelFileError(
            source.locate(VOICES), f"voices need {SPEAKER_PROJECTION} of [{files.cfg.hidden_size}, {dim}]"
        )
    voices = {}
    for name, info in sorted(infos.items()):
        if [n for n in info.shape if n != 1] != [dim]:
            raise ModelFileError(info.path, f"voice {name!r}: shape {list(info.shape)}, not [{dim}]")
        voices[name] = host_floats(source, info, dim, VOICES)
    return voices


def host_reads(source: ModelSource) -> tuple[list[str], list]:
    """What the loader reads on the host, the rest streaming to the GPU: whole files (the voices) and
    tensors (each attention layer's rotary alpha, the speaker projection), so that a source which holds
    only the files' headers (the page's) can fetch them first."""
    files = [VOICES] if source.exists(VOICES) else []
    wanted = re.compile(re.escape(ALPHA).replace(r"\{\}", r"\d+") + "|" + re.escape(SPEAKER_PROJECTION))
    return files, [info for info in read_tensor_index(source).values() if wanted.fullmatch(info.name)]


def host_floats(source: ModelSource, info, count: int, name: str | None = None) -> list[float]:
    """A small tensor's `count` numbers (F32, F16 or BF16) read on the host."""
    if name is None:  # the model file that holds it
        name = next(n for n in source.files() if n.endswith(".safetensors") and source.locate(n) == info.path)
    raw = source.read(name, info.start, info.nbytes)
    if info.dtype == "F32":
        values = array("f", raw)
    elif info.dtype == "F16":
        values = array("f", memoryview(raw).cast("e").tolist())
    elif info.dtype == "BF16":
        values = array("f", array("I", [h << 16 for h in array("H", raw)]).tobytes())
    else:
        raise ModelFileError(info.path, f"tensor {info.name!r}: dtype {info.dtype}, not a float")
    if len(values) != count:
        raise ModelFileError(info.path, f"tensor {info.name!r}: {len(values)} numbers, not {count}")
    return values.tolist()
