"""The hybrid fixtures (Qwen3.5, LFM2) converted to GGUF the way llama.cpp's converter does it
(conversion/qwen.py: Qwen3_5TextModel; conversion/lfm2.py: LFM2Model), for gguf_convert.convert.

Names come from gguf-py's own TensorNameMap, as in the converter. Values: Qwen3.5's value heads
reordered from HF's grouped order to ggml's tiled one where key and value head counts differ
(_LinearAttentionVReorderBase), A_log stored as A = -exp(A_log), 1 added to every (1 + w) norm
but the DeltaNet's gated one, conv kernels squeezed to [C, K]; LFM2's values untouched. Metadata:
what those classes and TextModel.set_gguf_parameters write. One departure: the converter writes
`full_attention_interval` as the config's value or 4, and the fixture's config (like any config
transformers 5 saves) lists layer_types instead; the interval written is the one that gives the
fixture's layer_types under llama.cpp's rule.

Types follow the converter's rules (1-D tensors, norms, conv kernels and tensors without a
.weight suffix in F32); the matrices in gguf_convert's block-format mix, or with quantize=False
in the checkpoint's own dtype, so that every value reads back exactly.
"""

import json
from pathlib import Path

import gguf
import numpy as np
from safetensors.numpy import save_file

from py_engine.formats.safetensors import read_header

Q = gguf.GGMLQuantizationType
HYBRID_ARCHS = {"Qwen3_5ForCausalLM": "qwen35", "Lfm2ForCausalLM": "lfm2"}
STORED_AS = {"F32": Q.F32, "F16": Q.F16, "BF16": Q.BF16}
MIX = {  # llama.cpp kind -> block format (the rest of gguf_convert.TYPES applies too)
    "attn_gate": Q.Q4_0,
    "ssm_out": Q.Q4_1,
    "ssm_alpha": Q.Q8_0,
    "ssm_beta": Q.Q5_0,
    "in_proj": Q.Q8_0,
    "out_proj": Q.Q5_1,
}
ALWAYS_F32 = (".ssm_conv1d.weight", ".shortconv.conv.weight")  # the converter keeps conv kernels in F32


def load_checkpoint(path: Path) -> dict[str, tuple[np.ndarray, str]]:
    """name -> (values as float32, the file's dtype): F32, F16 and BF16 safetensors."""
    out = {}
    raw = path.read_bytes()
    for name, info in read_header(path).items():
        data = raw[info.start : info.start + info.nbytes]
        if info.dtype == "BF16":
            values = (np.frombuffer(data, np.uint16).astype(np.uint32) << 16).view(np.float32)
        else:
            values = np.frombuffer(data, {"F32": np.float32, "F16": np.float16}[info.dtype]).astype(np.float32)
        out[name] = (values.reshape(info.shape), info.dtype)
    return out


def tiled(w: np.ndarray, axis: int, key_heads: int, per_key: int, head_dim: int, undo=False) -> np.ndarray:
    """The converter's _reorder_v_heads: along `axis`, [key head, value head of it, dim] becomes
    [value head of a key head, key head, dim] (undo: back)."""
    split = (per_key, key_heads) if undo else (key_heads, per_key)
    shape = w.shape[:axis] + (*split, head_dim) + w.shape[axis + 1 :]
    return np.swapaxes(w.reshape(shape), axis, axis + 1).reshape(w.shape)


def qwen35_value_heads(name: str, w: np.ndarray, cfg: dict, undo=False) -> np.ndarray:
    """What _LinearAttentionVReorderBase.modify_tensors does to one tensor (conv1d already squeezed)."""
    nk, nv = cfg["linear_num_key_heads"], cfg["linear_num_value_heads"]
    if nk == nv or "linear_attn." not in name:
        return w
    dv, r, qk = cfg["linear_value_head_dim"], nv // nk, 2 * nk * cfg["linear_key_head_dim"]
    if ".in_proj_qkv." in name or ".conv1d." in name:  # only the V rows / channels
        return np.concatenate([w[:qk], tiled(w[qk:], 0, nk, r, dv, undo)])
    if ".in_proj_z." in name:
        return tiled(w, 0, nk, r, dv, undo)
    if ".in_proj_b." in name or ".in_proj_a." in name or name.endswith((".A_log", ".dt_bias")):
        return tiled(w, 0, nk, r, 1, undo)
    if ".out_proj." in name:
        return tiled(w, 1, nk, r, dv, undo)
    return w


def one_added(hf: str) -> bool:
    """Qwen3.5's (1 + w) norms: the converter adds 1 to every *norm.weight but linear_attn.norm's."""
    return hf.endswith("norm.weight") and not hf.endswith("linear_attn.norm.weight")


def stored_values(hf: str, w: np.ndarray, arch: str, cfg: dict) -> np.ndarray:
    if "conv1d" in hf or "conv.conv" in hf:
        w = w.reshape(w.shape[0], w.shape[-1])  # [C, 1, K] -> [C, K]
    if arch != "qwen35":
        return w
    w = qwen35_value_heads(hf, w, cfg)
    if hf.endswith(".A_log"):
        return -np.exp(w)
    return w + 1 if one_added(hf) else w


def hf_values(hf: str, stored: np.ndarray, arch: str, cfg: dict, shape: tuple) -> np.ndarray:
    """stored_values undone (A_log as log(-A): f32 rounding aside, the checkpoint's)."""
    if arch == "qwen35":
        if hf.endswith(".A_log"):
            stored = np.log(-stored)
        elif one_added(hf):
            stored = stored - 1
        stored = qwen35_value_heads(hf, stored, cfg, undo=True)
    return stored.reshape(shape).astype(np.float32)


def layer_interval(layer_types: list[str], attention: str) -> int:
    """The full_attention_interval whose pattern is layer_types (llama.cpp: layer i attends when
    (i + 1) % interval == 0)."""
    for every in range(1, len(layer_types) + 2):
        if [(i + 1) % every == 0 for i in range(len(layer_types))] == [t == attention for t in layer_types]:
            return every
    raise ValueError(f"no full_attention_interval gives {layer_types}")


def write_metadata(writer, arch: str, cfg: dict) -> None:
    rope = cfg.get("rope_parameters") or {}
    writer.add_block_count(cfg["num_hidden_layers"])
    writer.add_context_length(cfg["max_position_embeddings"])
    writer.add_embedding_length(cfg["hidden_size"])
    writer.add_head_count(cfg["num_attention_heads"])
    writer.add_rope_freq_base(rope["rope_theta"])
    writer.add_layer_norm_rms_eps(cfg.get("rms_norm_eps", cfg.get("norm_eps")))
    if arch == "lfm2":  # LFM2Model: head_count_kv 0 on conv layers, the auto-adjusted FFN width
        kv = cfg["num_key_value_heads"]
        writer.add_head_count_kv([kv if kind != "conv" else 0 for kind in cfg["layer_types"]])
        writer.add_vocab_size(cfg["vocab_size"])
        writer.add_shortconv_l_cache(cfg["conv_L_cache"])
        ff = cfg["intermediate_size"]
        if cfg["block_auto_adjust_ff_dim"]:
            ff = int(cfg["block_ffn_dim_multiplier"] * int(2 * ff / 3))
            ff = cfg["block_multiple_of"] * ((ff + cfg["block_multiple_of"] - 1) // cfg["block_multiple_of"])
        writer.add_feed_forward_length(ff)
        return
    # Qwen3_5TextModel (Qwen3NextModel, _Qwen35MRopeMixin); no vocab_size: llama.cpp counts tokens
    head_dim = cfg["head_dim"]
    writer.add_feed_forward_length(cfg["intermediate_size"])
    writer.add_head_count_kv(cfg["num_key_value_heads"])
    writer.add_key_length(head_dim)
    writer.add_value_length(head_dim)
    writer.add_ssm_conv_kernel(cfg["linear_conv_kernel_dim"])
    writer.add_ssm_state_size(cfg["linear_key_head_dim"])
    writer.add_ssm_group_count(cfg["linear_num_key_heads"])
    writer.add_ssm_time_step_rank(cfg["linear_num_value_heads"])
    writer.add_ssm_inner_size(cfg["linear_value_head_dim"] * cfg["linear_num_value_heads"])
    interval = cfg.get("full_attention_interval") or layer_interval(cfg["layer_types"], "full_attention")
    writer.add_full_attention_interval(interval)
    writer.add_rope_dimension_count(int(head_dim * rope.get("partial_rotary_factor", 0.25)))
    writer.add_rope_dimension_sections([*rope.get("mrope_section", [11, 11, 10]), 0, 0, 0][:4])


def storage_type(name: str, w: np.ndarray, source_dtype: str, quantize: bool, mix: dict) -> Q:
    if w.ndim <= 1 or name.endswith("_norm.weight") or not name.endswith(".weight") or name.endswith(ALWAYS_F32):
        return Q.F32
    if quantize and w.shape[1] % 32 == 0:
        kind = name.split(".")[-2]
        return MIX.get(kind) or mix.get(kind, Q.F16)
    return STORED_AS[source_dtype] if not quantize else Q.F16


def convert_hybrid(fixture: Path, out: Path, quantize: bool, mix: dict) -> Path:
    """Write out/model.gguf and out/dequantized/ (the stored values, transforms undone, as f32
    safetensors under HF names with the fixture's config)."""
    cfg = json.loads((fixture / "config.json").read_text())
    arch = HYBRID_ARCHS[cfg["architectures"][0]]
    names = gguf.get_tensor_name_map(gguf.MODEL_ARCH[arch.upper()], cfg["num_hidden_layers"])
    writer = gguf.GGUFWriter(out / "model.gguf", arch)
    write_metadata(writer, arch, cfg)
    dequantized = {}
    for hf, (w, source_dtype) in load_checkpoint(fixture / "model.safetensors").items():
        lookup = hf.replace(".dt_bias", ".dt_proj.bias")  # Qwen3NextModel renames it before mapping
        name = names.get_name(lookup, try_suffixes=(".weight", ".bias"))
        stored = stored_values(hf, w, arch, cfg).astype(np.float32)
        qtype = storage_type(name, stored, source_dtype, quantize, mix)
        data = gguf.quants.quantize(stored, qtype)
        writer.add_tensor(name, data, raw_dtype=qtype)
        restored = gguf.quants.dequantize(data, qtype).reshape(stored.shape)
        dequantized[hf] = hf_values(hf, restored, arch, cfg, w.shape)
    return finish(writer, out, cfg, dequantized)


def finish(writer, out: Path, cfg: dict, dequantized: dict) -> Path:
    """The GGUF written and closed; out/dequantized/ the values it holds (f32 safetensors, the HF config)."""
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    plain = out / "dequantized"
    plain.mkdir()
    (plain / "config.json").write_text(json.dumps(cfg))
    save_file(dequantized, plain / "model.safetensors")
    return out / "model.gguf"
