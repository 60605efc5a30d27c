"""A CTranslate2 Whisper folder (faster-whisper's: model.bin, config.json, tokenizer.json) made into
a Hugging Face folder transformers' WhisperForConditionalGeneration loads: model.safetensors under
transformers' names, config.json, generation_config.json, the tokenizer files and
preprocessor_config.json. Pure Python: bytes are copied, never converted, so the weights keep their
dtype (float16 for the catalog's Whisper base) and the output is the same bytes on every run.

CTranslate2's converter (python/ctranslate2/converters/transformers.py, WhisperLoader) fused each
self-attention's q, k and v rows into one linear_0 and the cross-attention's k and v into
linear_1, giving k a zero bias transformers' Whisper does not have; here the rows are cut apart
again and each k bias is checked to be zero, then dropped.
"""

from __future__ import annotations

import json
import shutil
import struct
from pathlib import Path

from ..errors import ModelFileError
from .ctranslate2 import CT2Model, read_ct2
from .json_file import read_json
from .safetensors import TensorInfo

COPY_CHUNK = 1 << 20
TORCH_DTYPES = {"F32": "float32", "F16": "float16", "BF16": "bfloat16"}
GELU = 3  # CTranslate2's ActivationType.GELU
MAX_INITIAL_TIMESTAMP_INDEX = 50  # openai/whisper's decoding default, as the hub's generation configs say


def convert_whisper(source: Path, out: Path) -> None:
    """Write the HF folder `out` (created if needed) from the CTranslate2 Whisper folder `source`."""
    source, out = Path(source), Path(out)
    model = read_ct2(source / "model.bin")
    if model.spec != "WhisperSpec":
        raise ModelFileError(model.path, f"spec {model.spec!r} is not a Whisper model (WhisperSpec)")
    sizes = _sizes(model)
    tokenizer = read_json(source / "tokenizer.json")
    specials = _special_ids(tokenizer, source / "tokenizer.json")
    out.mkdir(parents=True, exist_ok=True)
    tied = model.aliases.get("decoder/projection/weight") == "decoder/embeddings/weight"
    _write_safetensors(model, _tensor_plan(model, sizes, tied), out / "model.safetensors")
    dtype = TORCH_DTYPES[model.get("decoder/embeddings/weight").dtype]
    _write_json(out / "config.json", _config(sizes, specials, dtype, tied))
    ct2_config = read_json(source / "config.json")
    _write_json(out / "generation_config.json", _generation_config(ct2_config, sizes, specials, tokenizer, source))
    shutil.copyfile(source / "tokenizer.json", out / "tokenizer.json")
    _write_json(out / "tokenizer_config.json", _tokenizer_config(tokenizer))
    _write_json(out / "preprocessor_config.json", _preprocessor_config(sizes["num_mel_bins"]))


def _scalar(model: CT2Model, name: str) -> int:
    info = model.get(name)
    formats = {"I8": "<b", "I16": "<h", "I32": "<i"}
    if info.shape != () or info.dtype not in formats:
        raise ModelFileError(model.path, f"{name} is not an integer scalar")
    with open(model.path, "rb") as file:
        file.seek(info.start)
        return struct.unpack(formats[info.dtype], file.read(info.nbytes))[0]


def _sizes(model: CT2Model) -> dict:
    """The WhisperConfig sizes, read off the tensors' shapes; a model that is not Whisper's pre-norm
    GELU transformer without embedding scale is refused."""
    conv1 = model.get("encoder/conv1/weight").shape
    embeddings = model.get("decoder/embeddings/weight").shape
    if len(conv1) != 3 or conv1[2] != 3 or len(embeddings) != 2 or embeddings[1] != conv1[0]:
        raise ModelFileError(model.path, f"conv1 {list(conv1)} and embeddings {list(embeddings)} do not fit Whisper")
    expected = {"decoder/pre_norm": 1, "decoder/activation": GELU, "decoder/alibi": 0, "decoder/scale_embeddings": 0}
    for name, value in expected.items():
        if name in model.variables and _scalar(model, name) != value:
            raise ModelFileError(model.path, f"{name} is {_scalar(model, name)}, not Whisper's {value}")
    quantized = [name for name in model.variables if name.endswith("_scale")]
    if quantized:
        raise ModelFileError(
            model.path, f"int8-quantized weights ({quantized[0]}) are not supported: use a float model"
        )

    def layers(side: str) -> int:
        count = 0
        while f"{side}/layer_{count}/ffn/linear_0/weight" in model.variables:
            count += 1
        return count

    return {
        "d_model": conv1[0],
        "num_mel_bins": conv1[1],
        "vocab_size": embeddings[0],
        "encoder_layers": layers("encoder"),
        "decoder_layers": layers("decoder"),
        "encoder_attention_heads": _scalar(model, "encoder/num_heads"),
        "decoder_attention_heads": _scalar(model, "decoder/num_heads"),
        "encoder_ffn_dim": model.get("encoder/layer_0/ffn/linear_0/weight").shape[0],
        "decoder_ffn_dim": model.get("decoder/layer_0/ffn/linear_0/weight").shape[0],
        "max_source_positions": model.get("encoder/position_encodings/encodings").shape[0],
        "max_target_positions": model.get("decoder/position_encodings/encodings").shape[0],
    }


def _tensor_plan(model: CT2Model, sizes: dict, tied: bool) -> list[tuple[str, TensorInfo, int, int]]:
    """(HF name, CTranslate2 variable, first row, rows) for every tensor transformers' Whisper has."""
    plan = []

    def whole(hf: str, ct2: str) -> None:
        info = model.get(ct2)
        plan.append((hf, info, 0, info.shape[0]))

    def linear(hf: str, ct2: str, part: int = 0, parts: int = 1, bias: bool = True) -> None:
        for kind in ("weight", "bias") if bias else ("weight",):
            info = model.get(f"{ct2}/{kind}")
            rows = info.shape[0] // parts
            if rows * parts != info.shape[0]:
                raise ModelFileError(model.path, f"{ct2}/{kind}: {info.shape[0]} rows do not split in {parts}")
            plan.append((f"{hf}.{kind}", info, part * rows, rows))
        if not bias:
            _check_zero_rows(model, model.get(f"{ct2}/bias"), part, parts)

    def norm(hf: str, ct2: str) -> None:
        whole(f"{hf}.weight", f"{ct2}/gamma")
        whole(f"{hf}.bias", f"{ct2}/beta")

    def fused_qkv(hf: str, ct2: str) -> None:
        linear(f"{hf}.q_proj", ct2, 0, 3)
        linear(f"{hf}.k_proj", ct2, 1, 3, bias=False)
        linear(f"{hf}.v_proj", ct2, 2, 3)

    for side in ("encoder", "decoder"):
        hf_side = f"model.{side}"
        whole(f"{hf_side}.embed_positions.weight", f"{side}/position_encodings/encodings")
        norm(f"{hf_side}.layer_norm", f"{side}/layer_norm")
        for i in range(sizes[f"{side}_layers"]):
            hf_layer, layer = f"{hf_side}.layers.{i}", f"{side}/layer_{i}"
            fused_qkv(f"{hf_layer}.self_attn", f"{layer}/self_attention/linear_0")
            linear(f"{hf_layer}.self_attn.out_proj", f"{layer}/self_attention/linear_1")
            norm(f"{hf_layer}.self_attn_layer_norm", f"{layer}/self_attention/layer_norm")
            if side == "decoder":
                linear(f"{hf_layer}.encoder_attn.q_proj", f"{layer}/attention/linear_0")
                linear(f"{hf_layer}.encoder_attn.k_proj", f"{layer}/attention/linear_1", 0, 2, bias=False)
                linear(f"{hf_layer}.encoder_attn.v_proj", f"{layer}/attention/linear_1", 1, 2)
                linear(f"{hf_layer}.encoder_attn.out_proj", f"{layer}/attention/linear_2")
                norm(f"{hf_layer}.encoder_attn_layer_norm", f"{layer}/attention/layer_norm")
            linear(f"{hf_layer}.fc1", f"{layer}/ffn/linear_0")
            linear(f"{hf_layer}.fc2", f"{layer}/ffn/linear_1")
            norm(f"{hf_layer}.final_layer_norm", f"{layer}/ffn/layer_norm")
    for conv in ("conv1", "conv2"):
        linear(f"model.encoder.{conv}", f"encoder/{conv}")
    whole("model.decoder.embed_tokens.weight", "decoder/embeddings/weight")
    if not tied:
        whole("proj_out.weight", "decoder/projection/weight")
    return plan


def _check_zero_rows(model: CT2Model, bias: TensorInfo, part: int, parts: int) -> None:
    """The k rows of a fused bias hold zeros (CTranslate2 filled them in): anything else would be lost."""
    formats = {"F32": ("f", 4), "F16": ("e", 2), "BF16": ("H", 2)}
    code, item = formats.get(bias.dtype, ("", 0))
    rows = bias.shape[0] // parts
    with open(model.path, "rb") as file:
        file.seek(bias.start + part * rows * item)
        raw = file.read(rows * item)
    values = struct.unpack(f"<{rows}{code}", raw) if code else (1,)
    if any(v & 0x7FFF if code == "H" else v for v in values):
        raise ModelFileError(model.path, f"{bias.name}: the k projection's bias is not zero (Whisper's k has no bias)")


def _write_safetensors(model: CT2Model, plan: list, path: Path) -> None:
    header, pieces, offset = {"__metadata__": {"format": "pt"}}, [], 0
    for hf, info, first, rows in plan:
        row_bytes = info.nbytes // info.shape[0]
        header[hf] = {
            "dtype": info.dtype,
            "shape": [rows, *info.shape[1:]],
            "data_offsets": [offset, offset + rows * row_bytes],
        }
        pieces.append((info, info.start + first * row_bytes, rows * row_bytes))
        offset += rows * row_bytes
    raw = json.dumps(header, separators=(",", ":")).encode()
    raw += b" " * (-len(raw) % 8)  # the data starts 8-byte aligned, as safetensors' own writer pads
    with open(model.path, "rb") as src, open(path, "wb") as out:
        out.write(struct.pack("<Q", len(raw)) + raw)
        for info, start, left in pieces:
            src.seek(start)
            while left:
                chunk = src.read(min(COPY_CHUNK, left))
                if not chunk:
                    raise ModelFileError(model.path, f"{info.name}: file ends inside its bytes")
                out.write(chunk)
                left -= len(chunk)


def _special_ids(tokenizer: dict, path: Path) -> dict[str, int]:
    added = tokenizer.get("added_tokens")
    if not isinstance(added, list):
        raise ModelFileError(path, "tokenizer.json has no added_tokens list")
    ids = {t.get("content"): t.get("id") for t in added if isinstance(t, dict) and isinstance(t.get("id"), int)}
    needed = ("<|endoftext|>", "<|startoftranscript|>", "<|notimestamps|>", "<|startofprev|>")
    missing = [name for name in needed if name not in ids]
    if missing:
        raise ModelFileError(path, f"tokenizer.json lacks Whisper's special tokens {missing}")
    return ids


def _config(sizes: dict, specials: dict, dtype: str, tied: bool) -> dict:
    """config.json as transformers' WhisperConfig(...).save_pretrained writes it (its non-default keys
    and the ones it always writes), with the hub's token ids."""
    eot, sot = specials["<|endoftext|>"], specials["<|startoftranscript|>"]
    return {
        "activation_dropout": 0.0,
        "activation_function": "gelu",
        "apply_spec_augment": False,
        "architectures": ["WhisperForConditionalGeneration"],
        "attention_dropout": 0.0,
        "begin_suppress_tokens": [220, eot],
        "bos_token_id": eot,
        "classifier_proj_size": 256,
        "decoder_layerdrop": 0.0,
        "decoder_start_token_id": sot,
        "dropout": 0.0,
        "dtype": dtype,
        "encoder_layerdrop": 0.0,
        "eos_token_id": eot,
        "init_std": 0.02,
        "is_encoder_decoder": True,
        "mask_feature_length": 10,
        "mask_feature_min_masks": 0,
        "mask_feature_prob": 0.0,
        "mask_time_length": 10,
        "mask_time_min_masks": 2,
        "mask_time_prob": 0.05,
        "median_filter_width": 7,
        "model_type": "whisper",
        "pad_token_id": eot,
        "scale_embedding": False,
        "suppress_tokens": None,
        "tie_word_embeddings": tied,
        "use_cache": True,
        "use_weighted_layer_sum": False,
        **sizes,
    }


def _generation_config(ct2: dict, sizes: dict, specials: dict, tokenizer: dict, source: Path) -> dict:
    """The ids transformers' WhisperForConditionalGeneration.generate reads, from CTranslate2's
    config.json (languages, suppressed tokens, alignment heads) and the tokenizer's special tokens."""
    path = source / "config.json"
    names = {v: k for k, v in specials.items()}
    lists = {}
    for key in ("lang_ids", "suppress_ids", "suppress_ids_begin", "alignment_heads"):
        value = ct2.get(key, [])
        flat = (
            [x for item in value for x in (item if isinstance(item, list) else [item])]
            if isinstance(value, list)
            else None
        )
        if flat is None or not all(
            isinstance(x, int) and not isinstance(x, bool) and 0 <= x < sizes["vocab_size"] for x in flat
        ):
            raise ModelFileError(path, f"{key} is not a list of token ids")
        lists[key] = value
    unknown = [i for i in lists["lang_ids"] if i not in names]
    if unknown:
        raise ModelFileError(path, f"lang_ids {unknown[:3]} are not special tokens of tokenizer.json")
    eot = specials["<|endoftext|>"]
    multilingual = sizes["vocab_size"] >= 51865  # the English-only vocabularies have 51864 ids
    config = {
        "alignment_heads": lists["alignment_heads"],
        "begin_suppress_tokens": lists["suppress_ids_begin"],
        "bos_token_id": eot,
        "decoder_start_token_id": specials["<|startoftranscript|>"],
        "eos_token_id": eot,
        "is_multilingual": multilingual,
        "max_initial_timestamp_index": MAX_INITIAL_TIMESTAMP_INDEX,
        "max_length": sizes["max_target_positions"],
        "no_timestamps_token_id": specials["<|notimestamps|>"],
        "pad_token_id": eot,
        "prev_sot_token_id": specials["<|startofprev|>"],
        "return_timestamps": False,
        "suppress_tokens": lists["suppress_ids"],
    }
    # The hub's Whisper folders force the task after the (detected) language, or "no timestamps" on the
    # English-only ones: without it a transcription with no language given starts with no <|transcribe|>,
    # and transformers (and the engine, which follows it) gives one empty segment.
    config["forced_decoder_ids"] = (
        [[1, None], [2, specials["<|transcribe|>"]]] if multilingual else [[1, specials["<|notimestamps|>"]]]
    )
    if multilingual:
        config["lang_to_id"] = {names[i]: i for i in lists["lang_ids"]}
        config["task_to_id"] = {task: specials[f"<|{task}|>"] for task in ("transcribe", "translate")}
    return dict(sorted(config.items()))


def _tokenizer_config(tokenizer: dict) -> dict:
    """As the hub's Whisper folders have it. The special tokens are listed in id order: transformers'
    WhisperTokenizer takes the last one's id + 1 for the first timestamp's."""
    eot = "<|endoftext|>"
    specials = sorted(
        (t["id"], t["content"]) for t in tokenizer["added_tokens"] if isinstance(t, dict) and t.get("special")
    )
    return {
        "add_prefix_space": False,
        "additional_special_tokens": [content for _, content in specials],
        "bos_token": eot,
        "eos_token": eot,
        "errors": "replace",
        "model_max_length": 1024,
        "pad_token": eot,
        "processor_class": "WhisperProcessor",
        "tokenizer_class": "WhisperTokenizer",
        "unk_token": eot,
    }


def _preprocessor_config(mel_bins: int) -> dict:
    """WhisperFeatureExtractor's settings (16 kHz, 25 ms window, 10 ms hop, 30 s windows)."""
    return {
        "chunk_length": 30,
        "dither": 0.0,
        "feature_extractor_type": "WhisperFeatureExtractor",
        "feature_size": mel_bins,
        "hop_length": 160,
        "n_fft": 400,
        "n_samples": 480000,
        "nb_max_frames": 3000,
        "padding_side": "right",
        "padding_value": 0.0,
        "processor_class": "WhisperProcessor",
        "return_attention_mask": False,
        "sampling_rate": 16000,
    }


def _write_json(path: Path, value: dict) -> None:
    path.write_text(json.dumps(dict(sorted(value.items())), indent=2) + "\n")
