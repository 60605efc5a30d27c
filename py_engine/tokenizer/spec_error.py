"""The error tokenizer components raise for a bad or unsupported description.

Components do not know which file they came from; their callers name it: `Tokenizer.from_spec`
and tokenizer/hf/files.py (tokenizer.json, tokenizer_config.json) and formats/gguf_tokenizer.py
(a GGUF file's tokenizer.ggml.* keys) turn it into a `ModelFileError` naming the file. It is
raised only while a tokenizer is built (encode and decode check nothing that could fail), so no
SpecError reaches a caller unconverted.
"""


class SpecError(ValueError):
    pass
