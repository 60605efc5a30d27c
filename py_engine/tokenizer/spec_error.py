"""The error tokenizer components raise for a bad or unsupported description.

Components do not know which file they came from; `Tokenizer.from_spec` turns this into a
`ModelFileError` that names the file.
"""


class SpecError(ValueError):
    pass
