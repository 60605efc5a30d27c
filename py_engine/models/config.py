"""ModelConfig: the few numbers a decoder-only transformer needs, read from an HF config.json."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..errors import ModelFileError


@dataclass
class ModelConfig:
    architecture: str
    vocab_size: int
    hidden_size: int
    intermediate_size: int
    num_layers: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    rms_norm_eps: float
    rope_theta: float
    rope_scaling: dict | None = None  # {"rope_type": "llama3", ...} or None
    partial_rotary_factor: float = 1.0
    max_position: int = 4096
    tie_word_embeddings: bool = False
    sliding_window: int = 0  # 0: full attention
    attention_bias: bool = False
    qk_norm: bool = False
    # llama.cpp stores Llama-family Q/K rows permuted for its interleaved-pair RoPE; a GGUF model
    # keeps them as stored and rotates (x[2i], x[2i+1]) pairs instead of un-permuting on load.
    rope_interleaved: bool = False
    eos_token_ids: list = field(default_factory=list)
    bos_token_id: int | None = None

    @property
    def rotary_dim(self) -> int:
        return int(self.head_dim * self.partial_rotary_factor)


def _rope_settings(raw: dict) -> tuple[float, dict | None]:
    """transformers 5 writes `rope_parameters` (with rope_theta inside); hub configs often still
    carry `rope_theta` + `rope_scaling`. Accept both."""
    params = raw.get("rope_parameters") or {}
    scaling = raw.get("rope_scaling") or None
    theta = params.get("rope_theta", raw.get("rope_theta", 10000.0))
    if params.get("rope_type", "default") not in ("default", None):
        scaling = params
    if scaling is not None:
        kind = scaling.get("rope_type", scaling.get("type", "default"))
        scaling = None if kind == "default" else dict(scaling, rope_type=kind)
    return float(theta), scaling


def _ids(value) -> list:
    if value is None:
        return []
    return list(value) if isinstance(value, list) else [value]


def config_from_hf(raw: dict, path) -> ModelConfig:
    archs = raw.get("architectures") or []
    if not archs:
        raise ModelFileError(path, "no 'architectures' entry")
    try:
        heads = int(raw["num_attention_heads"])
        hidden = int(raw["hidden_size"])
        theta, scaling = _rope_settings(raw)
        window = raw.get("sliding_window") or 0
        if raw.get("use_sliding_window") is False:
            window = 0
        return ModelConfig(
            architecture=archs[0],
            vocab_size=int(raw["vocab_size"]),
            hidden_size=hidden,
            intermediate_size=int(raw["intermediate_size"]),
            num_layers=int(raw["num_hidden_layers"]),
            num_heads=heads,
            num_kv_heads=int(raw.get("num_key_value_heads") or heads),
            head_dim=int(raw.get("head_dim") or hidden // heads),
            rms_norm_eps=float(raw.get("rms_norm_eps", 1e-6)),
            rope_theta=theta,
            rope_scaling=scaling,
            partial_rotary_factor=float(raw.get("partial_rotary_factor", 1.0)),
            max_position=int(raw.get("max_position_embeddings", 4096)),
            tie_word_embeddings=bool(raw.get("tie_word_embeddings", False)),
            sliding_window=int(window),
            attention_bias=bool(raw.get("attention_bias", False)),
            eos_token_ids=_ids(raw.get("eos_token_id")),
            bos_token_id=raw.get("bos_token_id"),
        )
    except KeyError as exc:
        raise ModelFileError(path, f"missing key {exc.args[0]!r}") from None
    except (TypeError, ValueError) as exc:
        raise ModelFileError(path, f"bad value ({exc})") from None
