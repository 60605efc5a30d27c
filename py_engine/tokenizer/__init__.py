"""Pure-Python tokenizer (runs under CPython and Pyodide): HF tokenizer.json BPE models,
byte-level (GPT-2, Llama-3, Qwen) and SentencePiece-style (Llama-2, Mistral, Gemma)."""

from .added_tokens import AddedToken
from .decode import StreamDecoder
from .tokenizer import MODEL_DEFAULT, Tokenizer

__all__ = ["AddedToken", "MODEL_DEFAULT", "StreamDecoder", "Tokenizer"]
