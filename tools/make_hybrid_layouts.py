"""Write GGUF layouts (metadata + tensor table, no weights) of Qwen3.5-0.8B and LFM2-350M for the
GPU speed comparison: `gguf_shape.py build` (../shared/gpu-bench) turns each into a random-weight
GGUF that both llama.cpp and Wisp load. No such model is reachable offline, so the shapes are the
published configs' and the formats a Q4_K_M file's (Q4_K matrices, Q6_K for ffn_down and attn_v,
Q8_0 for the tied embedding and the tiny DeltaNet beta/alpha projections, F32 vectors). The
tokenizer is SmolLM2's (a layout from prepare.sh), padded with unused tokens to the real vocabulary
size: the LM head's cost is the vocabulary's, and llama-bench never tokenizes text.

    python tools/make_hybrid_layouts.py .gpu-bench/layouts/smollm2.json OUT_DIR
"""

import json
import sys
from pathlib import Path

F32, Q8_0, Q4_K, Q6_K = 0, 8, 12, 14
BLOCK = {Q8_0: (32, 34), Q4_K: (256, 144), Q6_K: (256, 210)}  # elements, bytes per block
UINT32, FLOAT32, STRING = 4, 6, 8


def tensor(name: str, shape: list[int], kind: int) -> dict:
    """A row of the table; shape in ggml order (ne0, the row length, first)."""
    elems = 1
    for n in shape:
        elems *= n
    nbytes = elems * 4 if kind == F32 else elems // BLOCK[kind][0] * BLOCK[kind][1]
    return {"name": name, "shape": shape, "type": kind, "nbytes": nbytes}


def tokenizer(smollm2: dict, vocab: int, pre: str) -> dict:
    kv = {k: v for k, v in smollm2["kv"].items() if k.startswith("tokenizer.") and k != "tokenizer.chat_template"}
    tokens, types = kv["tokenizer.ggml.tokens"], kv["tokenizer.ggml.token_type"]
    pad = vocab - len(tokens["value"])
    tokens = dict(tokens, value=tokens["value"] + [f"<|unused_{i}|>" for i in range(pad)])
    types = dict(types, value=types["value"] + [5] * pad)  # LLAMA_TOKEN_TYPE_UNUSED
    return {
        **kv,
        "tokenizer.ggml.tokens": tokens,
        "tokenizer.ggml.token_type": types,
        "tokenizer.ggml.pre": {"type": STRING, "value": pre},
    }


def scalar(kind: int, value) -> dict:
    return {"type": kind, "value": value}


def qwen35_08b(smollm2: dict) -> dict:
    hidden, layers, ffn, vocab = 1024, 24, 3584, 248320
    heads, kv_heads, head_dim = 8, 2, 256
    nk, nv, dk, dv, conv = 16, 16, 128, 128, 4
    a = "qwen35."
    kv = {
        "general.architecture": scalar(STRING, "qwen35"),
        "general.name": scalar(STRING, "Qwen3.5-0.8B-shaped (random weights)"),
        a + "block_count": scalar(UINT32, layers),
        a + "context_length": scalar(UINT32, 262144),
        a + "embedding_length": scalar(UINT32, hidden),
        a + "feed_forward_length": scalar(UINT32, ffn),
        a + "attention.head_count": scalar(UINT32, heads),
        a + "attention.head_count_kv": scalar(UINT32, kv_heads),
        a + "attention.key_length": scalar(UINT32, head_dim),
        a + "attention.value_length": scalar(UINT32, head_dim),
        a + "attention.layer_norm_rms_epsilon": scalar(FLOAT32, 1e-6),
        a + "rope.freq_base": scalar(FLOAT32, 1e7),
        a + "rope.dimension_count": scalar(UINT32, head_dim // 4),
        a + "rope.dimension_sections": {"type": "array", "sub": 5, "value": [11, 11, 10, 0]},  # INT32
        a + "ssm.conv_kernel": scalar(UINT32, conv),
        a + "ssm.state_size": scalar(UINT32, dk),
        a + "ssm.group_count": scalar(UINT32, nk),
        a + "ssm.time_step_rank": scalar(UINT32, nv),
        a + "ssm.inner_size": scalar(UINT32, nv * dv),
        a + "full_attention_interval": scalar(UINT32, 4),
        **tokenizer(smollm2, vocab, "qwen35"),
    }
    tensors = [tensor("token_embd.weight", [hidden, vocab], Q8_0), tensor("output_norm.weight", [hidden], F32)]
    conv_dim = 2 * nk * dk + nv * dv
    for i in range(layers):
        b = f"blk.{i}."
        tensors += [
            tensor(b + "attn_norm.weight", [hidden], F32),
            tensor(b + "post_attention_norm.weight", [hidden], F32),
        ]
        if (i + 1) % 4:
            tensors += [
                tensor(b + "attn_qkv.weight", [hidden, conv_dim], Q4_K),
                tensor(b + "attn_gate.weight", [hidden, nv * dv], Q4_K),
                tensor(b + "ssm_beta.weight", [hidden, nv], Q8_0),
                tensor(b + "ssm_alpha.weight", [hidden, nv], Q8_0),
                tensor(b + "ssm_conv1d.weight", [conv, conv_dim], F32),
                tensor(b + "ssm_dt.bias", [nv], F32),
                tensor(b + "ssm_a", [nv], F32),
                tensor(b + "ssm_norm.weight", [dv], F32),
                tensor(b + "ssm_out.weight", [nv * dv, hidden], Q4_K),
            ]
        else:
            tensors += [
                tensor(b + "attn_q.weight", [hidden, 2 * heads * head_dim], Q4_K),
                tensor(b + "attn_k.weight", [hidden, kv_heads * head_dim], Q4_K),
                tensor(b + "attn_v.weight", [hidden, kv_heads * head_dim], Q6_K),
                tensor(b + "attn_output.weight", [heads * head_dim, hidden], Q4_K),
                tensor(b + "attn_q_norm.weight", [head_dim], F32),
                tensor(b + "attn_k_norm.weight", [head_dim], F32),
            ]
        tensors += [
            tensor(b + "ffn_gate.weight", [hidden, ffn], Q4_K),
            tensor(b + "ffn_up.weight", [hidden, ffn], Q4_K),
            tensor(b + "ffn_down.weight", [ffn, hidden], Q6_K),
        ]
    return {"kv": kv, "tensors": tensors}


def lfm2_350m(smollm2: dict) -> dict:
    hidden, layers, ffn, vocab, heads, kv_heads = 1024, 16, 4608, 65536, 16, 8
    attention = {2, 5, 8, 10, 12, 14}
    a = "lfm2."
    kv = {
        "general.architecture": scalar(STRING, "lfm2"),
        "general.name": scalar(STRING, "LFM2-350M-shaped (random weights)"),
        a + "block_count": scalar(UINT32, layers),
        a + "context_length": scalar(UINT32, 128000),
        a + "embedding_length": scalar(UINT32, hidden),
        a + "feed_forward_length": scalar(UINT32, ffn),
        a + "attention.head_count": scalar(UINT32, heads),
        a + "attention.head_count_kv": {
            "type": "array",
            "sub": UINT32,
            "value": [kv_heads if i in attention else 0 for i in range(layers)],
        },
        a + "attention.layer_norm_rms_epsilon": scalar(FLOAT32, 1e-5),
        a + "rope.freq_base": scalar(FLOAT32, 1e6),
        a + "vocab_size": scalar(UINT32, vocab),
        a + "shortconv.l_cache": scalar(UINT32, 3),
        **tokenizer(smollm2, vocab, "lfm2"),
    }
    head_dim = hidden // heads
    tensors = [tensor("token_embd.weight", [hidden, vocab], Q8_0), tensor("token_embd_norm.weight", [hidden], F32)]
    for i in range(layers):
        b = f"blk.{i}."
        tensors += [tensor(b + "attn_norm.weight", [hidden], F32), tensor(b + "ffn_norm.weight", [hidden], F32)]
        if i in attention:
            tensors += [
                tensor(b + "attn_q.weight", [hidden, hidden], Q4_K),
                tensor(b + "attn_k.weight", [hidden, kv_heads * head_dim], Q4_K),
                tensor(b + "attn_v.weight", [hidden, kv_heads * head_dim], Q6_K),
                tensor(b + "attn_output.weight", [hidden, hidden], Q4_K),
                tensor(b + "attn_q_norm.weight", [head_dim], F32),
                tensor(b + "attn_k_norm.weight", [head_dim], F32),
            ]
        else:
            tensors += [
                tensor(b + "shortconv.in_proj.weight", [hidden, 3 * hidden], Q4_K),
                tensor(b + "shortconv.conv.weight", [3, hidden], F32),
                tensor(b + "shortconv.out_proj.weight", [hidden, hidden], Q4_K),
            ]
        tensors += [
            tensor(b + "ffn_gate.weight", [hidden, ffn], Q4_K),
            tensor(b + "ffn_up.weight", [hidden, ffn], Q4_K),
            tensor(b + "ffn_down.weight", [ffn, hidden], Q6_K),
        ]
    return {"kv": kv, "tensors": tensors}


def main():
    smollm2 = json.loads(Path(sys.argv[1]).read_text())
    out = Path(sys.argv[2])
    out.mkdir(parents=True, exist_ok=True)
    for name, make in (("qwen35_08b", qwen35_08b), ("lfm2_350m", lfm2_350m)):
        layout = make(smollm2)
        (out / f"{name}.json").write_text(json.dumps(layout))
        print(name, f"{sum(t['nbytes'] for t in layout['tensors']) / 1e6:.0f} MB of weights")


if __name__ == "__main__":
    main()
