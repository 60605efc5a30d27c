"""Make tests/fixtures/embed_gemma: a tiny random model shaped like EmbeddingGemma-300M (google/embeddinggemma-300m)
and sentence-transformers' own vectors of it, for tests/test_embedding_gemma.py.

The folder is what the real model's is, smaller: a Gemma3TextModel (config.json with use_bidirectional_attention,
sliding and full layers, 3 query heads on one key/value head as the real one's, f16 safetensors), a tiny byte-level
BPE with Gemma's specials that adds <bos> and <eos> as the real tokenizer does, and the sentence-transformers files:
modules.json (Transformer, Pooling, Dense, Dense, Normalize), 1_Pooling (mean, include_prompt), 2_Dense (hidden ->
96) and 3_Dense (96 -> 768, so the real model's Matryoshka sizes 768/512/256/128 apply), no bias, identity
activation, sentence_bert_config.json (max_seq_length 64: the long passage is cut) and
config_sentence_transformers.json with the real model's prompts.

embedding_reference.json: SentenceTransformer(folder).encode of SENTENCES in float32 (from the f16 weights), plain,
with the "query" and "document" prompts, and truncated to 256 and 128 dimensions (truncated, then normalised
again), with the token ids sentence-transformers read.

    cd tools && /work/refenv/bin/python make_embedding_gemma_fixture.py   # torch, transformers 5, sentence-transformers
"""

from __future__ import annotations

import json
import os
import shutil

import torch
from make_embedding_reference import ROOT, SENTENCES, f32_base64
from tokenizers import pre_tokenizers, processors
from transformers import Gemma3TextConfig, Gemma3TextModel, PreTrainedTokenizerFast
from vision_fixture_common import train_bpe

OUT = ROOT / "tests" / "fixtures" / "embed_gemma"
TEXTS = [SENTENCES[i] for i in (0, 3, 5, 9, 16, 19)]  # short to long; the last (the bicycle passage) is cut at 64
SPECIALS = ["<pad>", "<eos>", "<bos>", "<unk>"]  # Gemma's ids 0-3
BPE_VOCAB = 300
# google/embeddinggemma-300m's config_sentence_transformers.json prompts, verbatim.
PROMPTS = {
    "query": "task: search result | query: ",
    "document": "title: none | text: ",
    "BitextMining": "task: search result | query: ",
    "Clustering": "task: clustering | query: ",
    "Classification": "task: classification | query: ",
    "InstructionRetrieval": "task: code retrieval | query: ",
    "MultilabelClassification": "task: classification | query: ",
    "PairClassification": "task: sentence similarity | query: ",
    "Reranking": "task: search result | query: ",
    "Retrieval": "task: search result | query: ",
    "Retrieval-query": "task: search result | query: ",
    "Retrieval-document": "title: none | text: ",
    "STS": "task: sentence similarity | query: ",
    "Summarization": "task: summarization | query: ",
}
HIDDEN, PROJECTED, OUTPUT = 48, 96, 768
MAX_SEQ = 64
CONFIG = dict(  # the real one's choices (3 heads on 1 KV head, bidirectional), small; window 8: keys within 4 rows
    hidden_size=HIDDEN,
    intermediate_size=96,
    num_hidden_layers=3,
    num_attention_heads=3,
    num_key_value_heads=1,
    head_dim=32,
    query_pre_attn_scalar=24,  # not head_dim: a scale taken from the wrong one shows
    rms_norm_eps=1e-6,
    sliding_window=8,
    layer_types=["sliding_attention", "full_attention", "sliding_attention"],
    use_bidirectional_attention=True,
    max_position_embeddings=128,
    hidden_activation="gelu_pytorch_tanh",
    bos_token_id=2,
    eos_token_id=1,
    pad_token_id=0,
    initializer_range=0.2,
    architectures=["Gemma3TextModel"],
)


def build_tokenizer():
    text = TEXTS + list(PROMPTS.values())
    tok = train_bpe(pre_tokenizers.ByteLevel(add_prefix_space=False), BPE_VOCAB, SPECIALS, [], text)
    tok.post_processor = processors.TemplateProcessing(
        single="<bos> $A <eos>", special_tokens=[("<bos>", 2), ("<eos>", 1)]
    )
    return PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token="<bos>",
        eos_token="<eos>",
        pad_token="<pad>",
        unk_token="<unk>",
        model_max_length=CONFIG["max_position_embeddings"],
    )


def write_json(path, value) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(value, indent=1) + "\n")


def save_transformer(tokenizer) -> None:
    torch.manual_seed(31)
    config = Gemma3TextConfig(vocab_size=len(tokenizer), **CONFIG)
    model = Gemma3TextModel(config).eval()
    with torch.no_grad():  # Gemma's norms are (1 + w), w zero at init: off it, so a skipped norm shows
        for name, param in model.named_parameters():
            if "norm" in name:
                param.normal_(0.0, 0.3)
    model.half().save_pretrained(OUT, safe_serialization=True)
    # f16 weights to keep the folder small, computed in f32 as the real (f32) checkpoint is: its embedding
    # scale sqrt(hidden) is not rounded to f16 (models/gemma.py embedding_scale reads the dtype).
    config_path = OUT / "config.json"
    write_json(config_path, {**json.loads(config_path.read_text()), "dtype": "float32"})
    tokenizer.save_pretrained(OUT)
    (OUT / "chat_template.jinja").unlink(missing_ok=True)


def save_modules() -> None:
    from sentence_transformers.sentence_transformer.modules import Dense

    modules = [("", "Transformer"), ("1_Pooling", "Pooling"), ("2_Dense", "Dense"), ("3_Dense", "Dense")]
    modules.append(("4_Normalize", "Normalize"))
    write_json(
        OUT / "modules.json",
        [
            {"idx": i, "name": str(i), "path": path, "type": f"sentence_transformers.models.{kind}"}
            for i, (path, kind) in enumerate(modules)
        ],
    )
    flags = ("cls_token", "mean_tokens", "max_tokens", "mean_sqrt_len_tokens", "weightedmean_tokens", "lasttoken")
    pooling = {"word_embedding_dimension": HIDDEN, **{f"pooling_mode_{f}": f == "mean_tokens" for f in flags}}
    write_json(OUT / "1_Pooling" / "config.json", {**pooling, "include_prompt": True})
    torch.manual_seed(32)
    for path, (n_in, n_out) in (("2_Dense", (HIDDEN, PROJECTED)), ("3_Dense", (PROJECTED, OUTPUT))):
        dense = Dense(n_in, n_out, bias=False, activation_function=torch.nn.Identity())
        with torch.no_grad():
            dense.linear.weight.normal_(0.0, n_in**-0.5)
        (OUT / path).mkdir()
        dense.half().save(str(OUT / path))
    write_json(OUT / "sentence_bert_config.json", {"max_seq_length": MAX_SEQ, "do_lower_case": False})
    write_json(
        OUT / "config_sentence_transformers.json",
        {
            "model_type": "SentenceTransformer",
            "prompts": PROMPTS,
            "default_prompt_name": None,
            "similarity_fn_name": "cosine",
        },
    )


def reference() -> dict:
    import sentence_transformers
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(str(OUT), device="cpu").float().eval()  # f32 from the f16-rounded weights
    runs = {}
    for prompt in (None, "query", "document"):
        features = model.tokenize([(PROMPTS[prompt] if prompt else "") + t for t in TEXTS])
        ids = [row[mask.bool()].tolist() for row, mask in zip(features["input_ids"], features["attention_mask"])]
        for dims in (None, 256, 128) if prompt != "document" else (None,):
            vectors = model.encode(TEXTS, prompt_name=prompt, truncate_dim=dims, normalize_embeddings=True)
            assert vectors.shape == (len(TEXTS), dims or OUTPUT)
            runs[f"{prompt or 'none'}/{dims or OUTPUT}"] = {
                "prompt_name": prompt,
                "dimensions": dims or OUTPUT,
                "input_ids": ids,
                "vectors_f32": [f32_base64(v) for v in vectors],
            }
    made_with = f"sentence-transformers {sentence_transformers.__version__}, torch {torch.__version__}"
    return {"made_with": made_with, "texts": TEXTS, "runs": runs}


def main() -> None:
    shutil.rmtree(OUT, ignore_errors=True)
    tokenizer = build_tokenizer()
    save_transformer(tokenizer)
    save_modules()
    reference_runs = reference()
    write_json(OUT / "embedding_reference.json", reference_runs)
    for path in OUT.rglob("*"):
        if path.is_file():
            os.chmod(path, 0o644)  # as readable as the other fixtures
    lengths = [len(ids) for ids in reference_runs["runs"]["none/768"]["input_ids"]]
    size = sum(p.stat().st_size for p in OUT.rglob("*") if p.is_file())
    print(f"{OUT}: token counts {lengths}, {size / 1024:.0f} KiB")


if __name__ == "__main__":
    main()
