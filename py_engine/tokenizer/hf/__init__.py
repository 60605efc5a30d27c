"""HF tokenizer.json tokenizers, matching HF `tokenizers`: the files read and checked (files.py,
sections.py), added tokens (added_tokens.py), the pipeline's sections (normalize.py with
graphemes.py, pretokenize.py, the models unigram.py and wordpiece.py beside the shared ../bpe.py,
postprocess.py, decode.py); tokenizer.py puts them together."""
