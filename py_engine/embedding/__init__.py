"""Sentence embeddings from the engine (py_engine/embedding/embedder.py says how)."""

from .embedder import Embedder, EmbedderFiles, Embeddings, load_embedder, read_embedder_files

__all__ = ["Embedder", "EmbedderFiles", "Embeddings", "load_embedder", "read_embedder_files"]
