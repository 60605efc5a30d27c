"""Architecture registry: HF `architectures[0]` → the generator that emits its graph."""

from ..errors import UnsupportedArchitectureError
from .gemma import build_gemma
from .gemma2 import build_gemma2
from .gemma3 import build_gemma3
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
    "Lfm2ForCausalLM": build_lfm2,
    "LlamaForCausalLM": build_llama,
    "MistralForCausalLM": build_mistral,
    "Phi3ForCausalLM": build_phi3,
    "Qwen2ForCausalLM": build_qwen2,
    "Qwen3ForCausalLM": build_qwen3,
    "Qwen3_5ForCausalLM": build_qwen3_5,
}


def graph_generator(architecture: str, source: str = "config.json"):
    try:
        return ARCHITECTURES[architecture]
    except KeyError:
        raise UnsupportedArchitectureError(
            f"{source}: unsupported architecture {architecture!r}; supported: {', '.join(sorted(ARCHITECTURES))}"
        ) from None
