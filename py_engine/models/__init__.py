"""Architecture registry: HF `architectures[0]` → the generator that emits its graph."""

from ..errors import UnsupportedArchitectureError
from .bert import build_bert
from .gemma import build_gemma
from .gemma2 import build_gemma2
from .gemma3 import build_gemma3, build_gemma3_encoder
from .gemma4 import build_gemma4
from .lfm2 import build_lfm2
from .llama import build_llama, build_mistral
from .phi3 import build_phi3
from .qwen2 import build_qwen2
from .qwen3 import build_qwen3
from .qwen3_5 import build_qwen3_5

ARCHITECTURES = {
    "GemmaForCausalLM": build_gemma,
    "Gemma2ForCausalLM": build_gemma2,
    "Gemma3ForCausalLM": build_gemma3,
    "Gemma4ForCausalLM": build_gemma4,
    "Lfm2ForCausalLM": build_lfm2,
    "LlamaForCausalLM": build_llama,
    "MistralForCausalLM": build_mistral,
    "Phi3ForCausalLM": build_phi3,
    "Qwen2ForCausalLM": build_qwen2,
    "Qwen3ForCausalLM": build_qwen3,
    "Qwen3_5ForCausalLM": build_qwen3_5,
}

# Encoders: embedding models only (py_engine/embedding), no LM head (config.ENCODER_ARCHITECTURES).
ENCODERS = {"BertModel": build_bert, "Gemma3TextModel": build_gemma3_encoder}


def graph_generator(architecture: str, source: str = "config.json", *, encoders: bool = False):
    """The generator of `architecture`'s graph. An encoder's only with encoders=True (reading a
    model's files, and the embedder): it embeds, and has nothing to generate with."""
    if architecture in ENCODERS:
        if encoders:
            return ENCODERS[architecture]
        raise UnsupportedArchitectureError(
            f"{source}: {architecture} is an embedding model (an encoder): it embeds (py_engine.embedding), "
            "it does not generate text"
        )
    try:
        return ARCHITECTURES[architecture]
    except KeyError:
        known = sorted([*ARCHITECTURES, *ENCODERS])
        raise UnsupportedArchitectureError(
            f"{source}: unsupported architecture {architecture!r}; supported: {', '.join(known)}"
        ) from None
