"""Architecture registry: HF `architectures[0]` → the generator that emits its graph."""

from ..errors import UnsupportedArchitectureError
from .llama import build_llama, build_mistral
from .qwen2 import build_qwen2
from .qwen3 import build_qwen3

ARCHITECTURES = {
    "LlamaForCausalLM": build_llama,
    "MistralForCausalLM": build_mistral,
    "Qwen2ForCausalLM": build_qwen2,
    "Qwen3ForCausalLM": build_qwen3,
}


def graph_generator(architecture: str, source: str = "config.json"):
    try:
        return ARCHITECTURES[architecture]
    except KeyError:
        raise UnsupportedArchitectureError(
            f"{source}: unsupported architecture {architecture!r}; supported: {', '.join(sorted(ARCHITECTURES))}"
        ) from None
