"""whisper.cpp's model files (ggml-tiny.bin ... ggml-large-v3.bin, and their quantized versions):
our own reader of the legacy `ggml` format they are written in, which is not GGUF (no key/value
metadata, no alignment, no tensor table before the data), so the GGUF reader cannot read them.

Layout, as whisper.cpp's whisper_model_load reads it and its converters (models/convert-pt-to-ggml.py,
convert-h5-to-ggml.py) write it, little-endian int32s throughout:
  magic 0x67676d6c ("ggml"); 11 hyperparameters (n_vocab, n_audio_ctx, n_audio_state, n_audio_head,
  n_audio_layer, n_text_ctx, n_text_state, n_text_head, n_text_layer, n_mels, ftype; ftype is the
  weights' type plus 1000 times the quantization version); the mel filters (n_mel, n_fft, then
  n_mel * n_fft float32: the Slaney filter bank over the 201 STFT bins); the vocabulary (a count, then
  each token's byte length and bytes: the 50,257 (English-only: 50,256) BPE tokens; whisper.cpp makes
  up the special and timestamp tokens after them); then until the end of the file, each tensor: n_dims,
  name length, ggml type, ne[n_dims] (fastest-varying first), the name, the data (no padding).

`read_ggml_whisper` reads the headers only (tensor data stays in the file as (start, nbytes), like
`safetensors.TensorInfo`) and checks every tensor against the shapes the hyperparameters imply. Tensors
are keyed by transformers' WhisperForConditionalGeneration names, with the shape transformers gives
them (ne reversed; the conv biases' [n, 1] as [n]); `TensorInfo.name` keeps whisper.cpp's name.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

from ..models.whisper import whisper_configs, whisper_shapes
from .bounded_file import BoundedReader
from .gguf import GGML_TYPES
from .safetensors import TensorInfo

MAGIC = 0x67676D6C
HPARAMS = ("n_vocab", "n_audio_ctx", "n_audio_state", "n_audio_head", "n_audio_layer", "n_text_ctx")
HPARAMS += ("n_text_state", "n_text_head", "n_text_layer", "n_mels", "ftype")
MAX_TOKEN_BYTES = 1 << 12
MAX_NAME_BYTES = 256
# Whisper's languages in token order (<|en|> is the start-of-transcript id + 1); large-v3 adds "yue".
LANGUAGES = (
    "en zh de es ru ko fr ja pt tr pl ca nl ar sv it id hi fi vi he uk el ms cs ro da hu ta no th ur hr bg lt la "
    "mi ml cy sk te fa lv bn sr az sl kn et mk br eu is hy ne mn bs kk sq sw gl mr pa si km sn yo so af oc ka be "
    "tg sd gu am yi lo uz fo ht ps tk nn mt sa lb my bo tl mg as tt haw ln ha ba jw su yue"
).split()

# whisper.cpp's name parts -> transformers'.
_GLOBAL = {
    "encoder.positional_embedding": "model.encoder.embed_positions.weight",
    "encoder.ln_post.weight": "model.encoder.layer_norm.weight",
    "encoder.ln_post.bias": "model.encoder.layer_norm.bias",
    "decoder.positional_embedding": "model.decoder.embed_positions.weight",
    "decoder.token_embedding.weight": "model.decoder.embed_tokens.weight",
    "decoder.ln.weight": "model.decoder.layer_norm.weight",
    "decoder.ln.bias": "model.decoder.layer_norm.bias",
    **{f"encoder.{c}.{k}": f"model.encoder.{c}.{k}" for c in ("conv1", "conv2") for k in ("weight", "bias")},
}
_BLOCK = {
    "attn.query": "self_attn.q_proj",
    "attn.key": "self_attn.k_proj",
    "attn.value": "self_attn.v_proj",
    "attn.out": "self_attn.out_proj",
    "attn_ln": "self_attn_layer_norm",
    "cross_attn.query": "encoder_attn.q_proj",
    "cross_attn.key": "encoder_attn.k_proj",
    "cross_attn.value": "encoder_attn.v_proj",
    "cross_attn.out": "encoder_attn.out_proj",
    "cross_attn_ln": "encoder_attn_layer_norm",
    "mlp.0": "fc1",
    "mlp.2": "fc2",
    "mlp_ln": "final_layer_norm",
}


@dataclass
class GGMLWhisper:
    path: str
    hparams: dict[str, int]
    mel_filters: TensorInfo  # float32 [n_mel, n_fft]
    vocab: list[bytes]  # the BPE tokens' bytes by id
    tensors: dict[str, TensorInfo] = field(default_factory=dict)  # by transformers' name, in file order

    @property
    def multilingual(self) -> bool:
        return self.hparams["n_vocab"] >= 51865

    def config(self) -> dict:
        """The sizes of transformers' WhisperConfig."""
        h = self.hparams
        return {
            "vocab_size": h["n_vocab"],
            "num_mel_bins": h["n_mels"],
            "d_model": h["n_audio_state"],
            "encoder_layers": h["n_audio_layer"],
            "encoder_attention_heads": h["n_audio_head"],
            "encoder_ffn_dim": self.ffn_dim("encoder", h["n_audio_state"]),
            "decoder_layers": h["n_text_layer"],
            "decoder_attention_heads": h["n_text_head"],
            "decoder_ffn_dim": self.ffn_dim("decoder", h["n_text_state"]),
            "max_source_positions": h["n_audio_ctx"],
            "max_target_positions": h["n_text_ctx"],
        }

    def ffn_dim(self, side: str, state: int) -> int:
        """The MLP's width: fc1's rows (whisper.cpp assumes 4 n_state, as every OpenAI checkpoint
        has; the engine's tiny test fixtures are narrower), 4 n_state before the tensors are read."""
        fc1 = self.tensors.get(f"model.{side}.layers.0.fc1.weight")
        return fc1.shape[0] if fc1 is not None and len(fc1.shape) == 2 else 4 * state

    def special_ids(self) -> dict:
        """The special tokens' ids as whisper.cpp places them after the BPE tokens (whisper_vocab),
        under generation_config's names, with lang_to_id for a multilingual model."""
        languages = self.hparams["n_vocab"] - 51765 - (1 if self.multilingual else 0)
        shift = languages - 98 if self.multilingual else 0
        eot = 50256 + (1 if self.multilingual else 0)
        ids = {
            "eos_token_id": eot,
            "decoder_start_token_id": eot + 1,
            "translate": 50357 + shift,
            "transcribe": 50358 + shift,
            "prev_sot_token_id": 50360 + shift,
            "no_timestamps_token_id": 50362 + shift,
            "timestamp_begin": 50363 + shift,
        }
        if self.multilingual:
            ids["lang_to_id"] = {f"<|{code}|>": eot + 2 + i for i, code in enumerate(LANGUAGES[:languages])}
        return ids


def hf_name(ggml_name: str) -> str | None:
    """transformers' name of a whisper.cpp tensor name, or None if it is none of Whisper's."""
    if ggml_name in _GLOBAL:
        return _GLOBAL[ggml_name]
    parts = ggml_name.split(".")
    if len(parts) < 5 or parts[0] not in ("encoder", "decoder") or parts[1] != "blocks" or not parts[2].isdigit():
        return None
    part, kind = ".".join(parts[3:-1]), parts[-1]
    mapped = _BLOCK.get(part)
    if mapped is None or kind not in ("weight", "bias") or (part.startswith("cross") and parts[0] == "encoder"):
        return None
    return f"model.{parts[0]}.layers.{int(parts[2])}.{mapped}.{kind}"


def ggml_name(name: str) -> str | None:
    """whisper.cpp's name of a transformers Whisper tensor name (hf_name's inverse), or None."""
    for ggml, hf in _GLOBAL.items():
        if hf == name:
            return ggml
    parts = name.split(".")
    if len(parts) < 6 or parts[:2] != ["model", parts[1]] or parts[2] != "layers" or not parts[3].isdigit():
        return None
    part = next((g for g, h in _BLOCK.items() if h == ".".join(parts[4:-1])), None)
    ggml = None if part is None else f"{parts[1]}.blocks.{int(parts[3])}.{part}.{parts[-1]}"
    return ggml if ggml and hf_name(ggml) == name else None


def read_ggml_whisper(path) -> GGMLWhisper:
    """Parse the headers of whisper.cpp's model file at `path` (tensor data is not read)."""
    return _Parser.parse(path)


class _Parser(BoundedReader):
    KIND = "whisper.cpp model file"

    def ints(self, count: int) -> tuple[int, ...]:
        return struct.unpack(f"<{count}i", self.take(4 * count))

    def model(self) -> GGMLWhisper:
        head = self.file.read(4)
        if head == b"GGUF":
            self.fail("a GGUF file, not whisper.cpp's ggml model file")
        if len(head) < 4 or struct.unpack("<I", head)[0] != MAGIC:
            self.fail("not a whisper.cpp model file (no ggml magic)")
        hparams = dict(zip(HPARAMS, self.ints(len(HPARAMS))))
        bad = [k for k, v in hparams.items() if v < (0 if k == "ftype" else 1) or v > 1 << 20]
        if bad or hparams["n_audio_state"] != hparams["n_text_state"]:
            self.fail(f"implausible hyperparameters {hparams}")
        for side in ("audio", "text"):
            if hparams[f"n_{side}_state"] % hparams[f"n_{side}_head"]:
                self.fail(f"n_{side}_state {hparams[f'n_{side}_state']} is not a multiple of its heads")
        n_mel, n_fft = self.ints(2)
        if n_mel != hparams["n_mels"] or not 0 < n_fft <= 4096:
            self.fail(f"mel filters of {n_mel} x {n_fft} do not fit n_mels {hparams['n_mels']}")
        filters = TensorInfo("mel_filters", "F32", (n_mel, n_fft), self.file.tell(), 4 * n_mel * n_fft, self.path)
        self.take(filters.nbytes)
        model = GGMLWhisper(self.path, hparams, filters, self.vocab(hparams["n_vocab"]))
        expected = whisper_shapes(*whisper_configs(model.config(), self.path))
        while self.file.tell() < self.size:
            name, info = self.tensor()
            if name in model.tensors:
                self.fail(f"tensor {info.name!r} appears twice")
            if ".fc" not in name:  # the MLP's are checked once fc1 has given its width
                self.check_shape(info, expected.get(name, info.shape))
            model.tensors[name] = info
        expected = whisper_shapes(*whisper_configs(model.config(), self.path))
        for name, info in model.tensors.items():
            self.check_shape(info, expected.get(name, info.shape))
        missing = [name for name in expected if name not in model.tensors]
        if missing:
            self.fail(f"{len(missing)} of Whisper's tensors are missing, {missing[0]!r} the first")
        return model

    def check_shape(self, info: TensorInfo, shape: tuple) -> None:
        if info.shape != shape:
            self.fail(f"tensor {info.name!r} has shape {list(info.shape)}, expected {list(shape)}")

    def vocab(self, n_vocab: int) -> list[bytes]:
        (count,) = self.ints(1)
        if not 0 <= count <= n_vocab:
            self.fail(f"a vocabulary of {count} tokens in a model of {n_vocab}")
        tokens = []
        for _ in range(count):
            (length,) = self.ints(1)
            if not 0 <= length <= MAX_TOKEN_BYTES:
                self.fail(f"token {len(tokens)} is {length} bytes long")
            tokens.append(self.take(length))
        return tokens

    def tensor(self) -> tuple[str, TensorInfo]:
        n_dims, length, ttype = self.ints(3)
        if not 1 <= n_dims <= 4 or not 0 < length <= MAX_NAME_BYTES or ttype not in GGML_TYPES:
            self.fail(f"a tensor header of {n_dims} dims, a {length}-byte name and ggml type {ttype}")
        ne = self.ints(n_dims)
        raw = self.take(length)
        try:
            ggml_name = raw.decode("utf-8")
        except UnicodeDecodeError:
            self.fail(f"tensor name {raw!r} is not UTF-8")
        name = hf_name(ggml_name)
        if name is None:
            self.fail(f"unknown tensor {ggml_name!r} (not one of Whisper's)")
        dtype, block, block_bytes = GGML_TYPES[ttype]
        if any(n <= 0 for n in ne) or ne[0] % block:
            self.fail(f"tensor {ggml_name!r}: dims {list(ne)} do not fit {dtype} blocks of {block}")
        elements = 1
        for n in ne:
            elements *= n
        nbytes = elements // block * block_bytes
        start = self.skip(nbytes, f"tensor {ggml_name!r}")
        shape = tuple(reversed(ne))
        if ggml_name.startswith("encoder.conv") and ggml_name.endswith(".bias") and shape[1:] == (1,):
            shape = shape[:1]  # whisper.cpp keeps the conv biases as [n, 1] to broadcast them
        return name, TensorInfo(ggml_name, dtype, shape, start, nbytes, self.path)
