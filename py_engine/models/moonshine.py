"""Moonshine (transformers' MoonshineForConditionalGeneration) as two graphs: the encoder, run once a
window of audio, and the decoder, run a token at a time over the frozen cross K/V the encoder wrote.

Encoder (a forward's rows: the window's encoder frames; its audio of any length up to the graph's
window, the `lengths` input holding [samples, conv1, conv2, conv3 frames]: speech/moonshine_config.py
front_end_lengths):
  the raw 16 kHz waveform -> Conv1d(1 -> H, 127, stride 64, no bias) + tanh -> GroupNorm(1 group: over
  every channel and frame of the window, shaders/group_norm.wgsl) -> Conv1d(H -> 2H, 7, 3) + GELU ->
  Conv1d(2H -> H, 3, 2) + GELU (models/audio_ops.py conv1d), then per layer (pre-LN, LayerNorms
  without bias): x += o(attention(rope(q|k|v(LN(x))))), bidirectional over the window, RoPE on the
  first rotary_dim dims of each head in interleaved pairs (2i, 2i + 1) (rope_rows.wgsl INTERLEAVED);
  x += fc2(GELU(fc1(LN(x)))) with biases; then the final LayerNorm, and each decoder layer's cross
  K and V projections of it (audio_ops.cross_kv: "state" tensors the decoder graph binds too).
Decoder (rows: 1, a token at a time):
  embed -> per layer: x += o(self-attention(RoPE'd q|k|v(LN(x))), causal over the KV cache, the same
  interleaved partial RoPE (rope_kv / attention ROPE_KV with interleaved); x += o(cross-attention(
  q(LN(x)), the frozen K/V)) (no RoPE); x += fc2(silu(gate) * up) of fc1(LN(x)) with biases ->
  final LayerNorm -> logits by the tied embedding (or proj_out).
fc1's rows are [up | gate] (transformers chunks hidden, gate in that order); gated_mul.wgsl wants
[gate | up], so decoder_tensors() names each half as a tensor of its own (row slices of the file).
"""

from __future__ import annotations

from dataclasses import replace

from ..runtime.graph import Graph, Tensor, ceil_div
from .audio_ops import conv1d, cross_attention, cross_kv
from .bert import encoder_attention, encoder_rope, gelu, input_tensor
from .builder import GraphBuilder

ENCODER, DECODER = "model.encoder.", "model.decoder."
LENGTHS = 4  # the lengths input: samples, conv1, conv2 and conv3 frames
FRAMES_AT = 3  # the encoder frames' slot in it (the cross-attention's keys)
GATED_HALVES = ("gate", "up")


def decoder_tensors(tensors: dict, layers: int) -> dict:
    """tensors plus each decoder layer's fc1 weight and bias halves as tensors of their own:
    `mlp.fc1.up.weight` (the first half of the rows) and `mlp.fc1.gate.weight` (the second), likewise
    the bias: row slices of the stored tensors, their bytes where the file has them."""
    out = dict(tensors)
    for i in range(layers):
        p = f"{DECODER}layers.{i}.mlp.fc1."
        for kind in ("weight", "bias"):
            info = tensors.get(p + kind)
            if info is None:
                continue  # missing: the config check names it
            half = info.shape[0] // 2
            nbytes = info.nbytes // 2
            for at, name in enumerate(("up", "gate")):
                shape = (half, *info.shape[1:])
                out[f"{p}{name}.{kind}"] = replace(
                    info, name=f"{p}{name}.{kind}", shape=shape, start=info.start + at * nbytes, nbytes=nbytes
                )
    return out


def layer_norm(b: GraphBuilder, x: Tensor, weight: str, out: Tensor | None = None) -> Tensor:
    """LayerNorm without bias (layernorm.wgsl NO_BIAS) by `weight`, eps the config's."""
    dim = b.shape(weight)[0]
    y = out or b.act("layernorm", dim)
    b.g.op(
        "layernorm",
        {"x": x, "residual": b.dummy, "shift": b.dummy, "w": b.vector([weight]), "b": b.dummy, "y": y},
        {"dim": dim, "eps": b.cfg.rms_norm_eps, "add_residual": 0, "add_shift": 0},
        lambda rows: (rows, 1, 1),
        {"NO_BIAS": True},
    )
    return y


def group_norm(b: GraphBuilder, x: Tensor, prefix: str, rows: int, lengths: tuple, groups: int = 1) -> Tensor:
    """GroupNorm of x [rows (the most; this forward's from lengths[slot]), channels] by prefix's weight
    and bias (shaders/group_norm.wgsl: the groups' statistics, then the affine apply)."""
    channels = b.shape(prefix + ".weight")[0]
    stats = b.act("group_stats", 2 * groups, 1)
    y = b.act("group_norm", channels, rows)
    params = {"rows": rows, "channels": channels, "groups": groups, "eps": b.cfg.rms_norm_eps}
    params |= {"length_at": lengths[1], "pad0": 0, "pad1": 0, "pad2": 0}
    b.g.op(
        "group_norm", {"lengths": lengths[0], "x": x, "stats": stats}, params, lambda _: (groups, 1, 1), {"STATS": True}
    )
    b.g.op(
        "group_norm",
        {
            "lengths": lengths[0],
            "x": x,
            "stats": stats,
            "w": b.vector([prefix + ".weight"]),
            "b": b.vector([prefix + ".bias"]),
            "y": y,
        },
        params,
        lambda _: (ceil_div(channels, 256), rows, 1),
        {"STATS": False},
    )
    return y


def front_end(b: GraphBuilder, samples: int, lengths: Tensor, act: str) -> Tensor:
    """The three convolutions (act: the GELU of the last two, "gelu" or "gelu_tanh") and the GroupNorm
    over the `audio` input (f32 [samples]): [frames, H]."""
    audio = b.g.inputs["audio"] = b.g.tensor("audio", samples * 4, "input")
    e = ENCODER
    x = conv1d(b, audio, e + "conv1.weight", in_len=samples, stride=64, activation="tanh", lengths=(lengths, 0))
    frames1 = x.nbytes // (4 * b.cfg.hidden_size)
    x = group_norm(b, x, e + "groupnorm", frames1, (lengths, 1))
    x = conv1d(
        b, x, e + "conv2.weight", e + "conv2.bias", in_len=frames1, stride=3, activation=act, lengths=(lengths, 1)
    )
    frames2 = x.nbytes // (4 * 2 * b.cfg.hidden_size)
    return conv1d(
        b, x, e + "conv3.weight", e + "conv3.bias", in_len=frames2, stride=2, activation=act, lengths=(lengths, 2)
    )


def build_encoder(b: GraphBuilder, samples: int, encoder_layers: int, act: str) -> tuple[Graph, list]:
    """The encoder graph of a window of at most `samples` (b's max_rows: its encoder frames, conv_out_len's)
    and each decoder layer's cross (K, V) "state" tensors; act: the convolutions' and MLPs' GELU ("gelu" or
    "gelu_tanh"). Inputs: audio, lengths, spans (each row's
    [0, frames): the window's rows), cos_sin. Outputs: encoder_hidden [frames, H] and the cross K/V."""
    cfg, g = b.cfg, b.g
    lengths = g.inputs["lengths"] = g.tensor("lengths", LENGTHS * 4, "input")
    spans = input_tensor(b, "spans", 8)
    x = front_end(b, samples, lengths, act)
    for i in range(encoder_layers):
        p = f"{ENCODER}layers.{i}."
        attn = p + "self_attn."
        h = layer_norm(b, x, p + "input_layernorm.weight")
        qkv = b.linear(h, [attn + f"{n}_proj.weight" for n in "qkv"])
        encoder_rope(b, qkv, b.cos_sin, rotary_dim=cfg.rotary_dim, interleaved=True)
        x = b.linear(encoder_attention(b, qkv, spans), [attn + "o_proj.weight"], residual=x)
        h = layer_norm(b, x, p + "post_attention_layernorm.weight")
        h = gelu(b, b.linear(h, [p + "mlp.fc1.weight"], bias=[p + "mlp.fc1.bias"]), tanh=act == "gelu_tanh")
        x = b.linear(h, [p + "mlp.fc2.weight"], bias=[p + "mlp.fc2.bias"], residual=x)
    out = g.outputs["encoder_hidden"] = g.tensor("encoder_hidden", g.max_rows * cfg.hidden_size * 4, "output")
    hidden = layer_norm(b, x, ENCODER + "layer_norm.weight", out=out)
    cross = []
    for i in range(cfg.num_layers):
        attn = f"{DECODER}layers.{i}.encoder_attn."
        cross.append(
            cross_kv(b, hidden, attn + "k_proj.weight", attn + "v_proj.weight", None, g.max_rows, f"cross.{i}")
        )
    return g, cross


def build_decoder(b: GraphBuilder, cross: list, frames: int, lengths: Tensor) -> Graph:
    """The decoder graph (a token a forward; b's kv_capacity: the most tokens) over the encoder graph's
    cross K/V (build_encoder's) of at most `frames` frames, this window's count in lengths[FRAMES_AT]
    (the encoder graph's lengths input, bound here too). Inputs: ids, cos_sin. Output: logits."""
    cfg = b.cfg
    heads, hd = cfg.num_heads, cfg.head_dim
    b.g.inputs["lengths"] = lengths
    x = b.embedding(DECODER + "embed_tokens.weight")
    for i, (keys, values) in enumerate(cross):
        p = f"{DECODER}layers.{i}."
        attn, enc = p + "self_attn.", p + "encoder_attn."
        h = layer_norm(b, x, p + "input_layernorm.weight")
        qkv = b.linear(h, [attn + f"{n}_proj.weight" for n in "qkv"])
        x = b.linear(b.attention(b.rope_kv(qkv, interleaved=True)), [attn + "o_proj.weight"], residual=x)
        q = b.linear(layer_norm(b, x, p + "post_attention_layernorm.weight"), [enc + "q_proj.weight"])
        a = cross_attention(
            b, q, keys, values, heads=heads, kv_heads=heads, head_dim=hd, frames=frames, lengths=(lengths, FRAMES_AT)
        )
        x = b.linear(a, [enc + "o_proj.weight"], residual=x)
        h = layer_norm(b, x, p + "final_layernorm.weight")
        fc1 = p + "mlp.fc1."
        gate_up = b.linear(h, [f"{fc1}{n}.weight" for n in GATED_HALVES], bias=[f"{fc1}{n}.bias" for n in GATED_HALVES])
        m = b.gated_mul(gate_up, cfg.intermediate_size)
        x = b.linear(m, [p + "mlp.fc2.weight"], bias=[p + "mlp.fc2.bias"], residual=x)
    last = layer_norm(b, x, DECODER + "norm.weight")  # one row a forward: it is the last
    b.logits(last, DECODER + "embed_tokens.weight" if cfg.tie_word_embeddings else "proj_out.weight")
    return b.g
