"""Tokenizer regexes under stdlib `re`: Oniguruma / Rust syntax compiled (compat.py) with Unicode's
classes spelled out as code point ranges (unicode_classes.py), each pattern proved not to run away
before it ever runs (guard.py, over classes.py)."""
