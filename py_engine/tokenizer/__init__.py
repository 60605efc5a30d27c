"""Pure-Python tokenizers (run under CPython and Pyodide).

Tokenizer: HF tokenizer.json files, matching HF `tokenizers`: BPE (byte-level as GPT-2, Llama-3,
Qwen; SentencePiece-style with byte fallback as Llama-2, Mistral, Gemma), WordPiece (BERT) and
Unigram (T5). LlamaTokenizer: GGUF vocabularies, matching llama.cpp (built by
py_engine.formats.gguf_tokenizer)."""

from .hf.added_tokens import AddedToken
from .hf.tokenizer import MODEL_DEFAULT, Tokenizer
from .llama.tokenizer import LlamaTokenizer
from .stream_decoder import StreamDecoder

__all__ = ["AddedToken", "LlamaTokenizer", "MODEL_DEFAULT", "StreamDecoder", "Tokenizer"]
