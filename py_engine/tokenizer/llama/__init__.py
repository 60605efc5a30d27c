"""The tokenizer of a GGUF file, matching llama.cpp: its vocabulary (vocab.py), pre-tokenizers
(pre.py, split.py), models (spm.py, ugm.py, wpm.py; BPE is the shared ../bpe.py) and detokenizer
(decode.py); tokenizer.py puts them together, and py_engine/formats/gguf_tokenizer.py builds it."""
