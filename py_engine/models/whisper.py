"""Whisper (transformers' WhisperForConditionalGeneration) as three graphs: the log-mel front-end and
the encoder, run once a 30-second window, and the decoder, run a token at a time over the cross K/V
the encoder left (speech/seq2seq.py runs them; speech/whisper_*.py generates as transformers does).

Front-end: a window's PCM (the "pcm" input, 30 s) -> its log-mel features (models/log_mel.py) in the
"features" tensor, which the encoder graph takes as its input (one buffer: a test writes it directly).
Encoder (rows: its output frames, max_source_positions = 1500): the features [2 x frames, n_mels]
-> conv1 (k3, pad 1) + GELU -> conv2 (k3, stride 2, pad 1) + GELU + the stored sinusoidal
positions -> pre-LN layers (x += out_proj(attention(LN1(x))); x += fc2(GELU(fc1(LN2(x)))),
attention bidirectional over the window's frames, q and v with biases, k without) -> the final
LayerNorm -> each decoder layer's cross-attention K (no bias) and V (bias): "state" tensors the
decoder graph binds too.
Decoder (rows: the forward's tokens, at most max_target_positions positions): token embedding +
learned positions (the "positions" input) -> pre-LN layers of causal self-attention (the engine's
KV cache and attention kernels, no RoPE: a rotary table of zero dims), cross-attention over the
frozen K/V and a GELU MLP -> the final LayerNorm -> its last row (the "last_row" input) -> logits
from the tied token embedding.
"""

from __future__ import annotations

from ..errors import ModelFileError
from ..runtime.graph import Graph, Tensor, WeightSpec
from ..runtime.linear_plan import weight_defines
from .audio_ops import conv1d, cross_attention, cross_kv, projections
from .bert import encoder_attention, gather, gather_rows, gelu, input_tensor, layer_norm
from .builder import GraphBuilder
from .config import MAX_LAYERS, ModelConfig
from .config_values import ConfigKeys
from .log_mel import FRAMES, MAX_MELS, N_SAMPLES, log_mel

ENCODER = "model.encoder."
DECODER = "model.decoder."
LAYER_NORM_EPS = 1e-5  # torch's LayerNorm default, which Whisper's layers keep


def whisper_configs(raw: dict, path) -> tuple[ModelConfig, ModelConfig, dict]:
    """config.json's (encoder, decoder) as ModelConfigs and the geometry: n_mels, frames (the
    encoder's output frames a window), positions (the decoder's), vocab_size."""
    keys = ConfigKeys(raw, path)
    d_model = keys.int("d_model")
    vocab = keys.int("vocab_size")
    n_mels = keys.int("num_mel_bins", 80)
    frames = keys.int("max_source_positions", 1500)
    if not 1 <= n_mels <= MAX_MELS:
        keys.fail("num_mel_bins", f"from 1 to {MAX_MELS}", n_mels)
    if 2 * frames != FRAMES:  # a window's 3,000 log-mel frames, halved by conv2
        keys.fail("max_source_positions", f"{FRAMES // 2} (30-s windows)", frames)
    positions = keys.int("max_target_positions", 448)
    for key, value in (("d_model", d_model), ("vocab_size", vocab)):
        if value < 1:
            keys.fail(key, "at least 1", value)
    if not 1 <= positions <= 1 << 16:
        keys.fail("max_target_positions", "from 1 to 65536", positions)
    if keys.str("activation_function", "gelu") != "gelu":
        keys.fail("activation_function", '"gelu"', raw.get("activation_function"))
    if keys.bool("scale_embedding", False):
        keys.fail("scale_embedding", "false (Whisper's checkpoints never scale)", True)

    def side(prefix: str) -> ModelConfig:
        layers, heads = keys.int(f"{prefix}_layers"), keys.int(f"{prefix}_attention_heads")
        ffn = keys.int(f"{prefix}_ffn_dim")
        if not 1 <= layers <= MAX_LAYERS:
            keys.fail(f"{prefix}_layers", f"from 1 to {MAX_LAYERS}", layers)
        if heads < 1 or d_model % heads or (d_model // heads) % 4:
            keys.fail(f"{prefix}_attention_heads", f"a divisor of d_model ({d_model}) into heads of 4k dims", heads)
        if ffn < 1:
            keys.fail(f"{prefix}_ffn_dim", "at least 1", ffn)
        return ModelConfig(
            architecture="WhisperForConditionalGeneration",
            vocab_size=vocab,
            hidden_size=d_model,
            intermediate_size=ffn,
            num_layers=layers,
            num_heads=heads,
            num_kv_heads=heads,
            head_dim=d_model // heads,
            rms_norm_eps=LAYER_NORM_EPS,  # the LayerNorms' eps (layer_norm reads it there)
            rope_theta=10000.0,
            partial_rotary_factor=0.0,  # no RoPE: the decoder's rotary table turns no dims
            max_position=positions,
            tie_word_embeddings=True,
            hidden_act="gelu",
        )

    geometry = {"n_mels": n_mels, "frames": frames, "positions": positions, "vocab_size": vocab}
    return side("encoder"), side("decoder"), geometry


def build_front(b: GraphBuilder, geometry: dict) -> tuple[Graph, Tensor]:
    """The front-end graph: input pcm [N_SAMPLES] f32 (a window), output features [FRAMES, n_mels]
    (an "input" tensor: the encoder graph's input too)."""
    g = b.g
    pcm = g.inputs["pcm"] = g.tensor("pcm", N_SAMPLES * 4, "input")
    features = g.inputs["features"] = g.outputs["features"] = g.tensor(
        "features", FRAMES * geometry["n_mels"] * 4, "input"
    )
    log_mel(b, pcm, geometry["n_mels"], out=features)
    return g, features


def build_encoder(b: GraphBuilder, geometry: dict, decoder_layers: int, features: Tensor | None = None) -> Graph:
    """The encoder graph (b's max_rows: geometry's frames). Inputs: features [2 frames, n_mels] f32
    (build_front's, or its own), spans (every row: [0, frames)). Outputs: cross.N.k / cross.N.v
    [frames, d_model] per decoder layer N (audio_ops.cross_kv)."""
    cfg, g = b.cfg, b.g
    frames, d = geometry["frames"], cfg.hidden_size
    if features is None:
        features = input_tensor(b, "features", 4 * geometry["n_mels"] * 2)
    g.inputs["features"] = features
    spans = input_tensor(b, "spans", 8)
    e = ENCODER
    h = conv1d(b, features, e + "conv1.weight", e + "conv1.bias", in_len=2 * frames, pad=(1, 1), activation="gelu")
    positions = g.tensor(
        e + "embed_positions.weight",
        frames * d * 4,
        "weight",
        weight=WeightSpec((e + "embed_positions.weight",), "vector"),
        rows=(0, frames),
    )
    x = conv1d(
        b,
        h,
        e + "conv2.weight",
        e + "conv2.bias",
        in_len=2 * frames,
        stride=2,
        pad=(1, 1),
        activation="gelu",
        residual=positions,
        out=b.act("embed", d),
    )
    for i in range(cfg.num_layers):
        p = f"{e}layers.{i}."
        attn = p + "self_attn."
        qkv = projections(b, layer_norm(b, x, p + "self_attn_layer_norm"), _qkv_parts(attn))
        a = encoder_attention(b, qkv, spans)
        x = b.linear(a, [attn + "out_proj.weight"], bias=[attn + "out_proj.bias"], residual=x)
        x = _mlp(b, x, p)
    x = layer_norm(b, x, e + "layer_norm")
    for i in range(decoder_layers):
        attn = f"{DECODER}layers.{i}.encoder_attn."
        cross_kv(b, x, attn + "k_proj.weight", attn + "v_proj.weight", attn + "v_proj.bias", frames, f"cross.{i}")
    return g


def build_decoder(b: GraphBuilder, geometry: dict, cross: list[tuple[Tensor, Tensor]]) -> Graph:
    """The decoder graph over the encoder's cross K/V (`cross`: each layer's (k, v), the encoder
    graph's outputs). Inputs: ids, positions (each row's), last_row (the forward's last row's
    index, [1]). Output: logits [1, vocab] of that row."""
    cfg, g = b.cfg, b.g
    d = cfg.hidden_size
    b.cos_sin.nbytes = 16  # no RoPE (rotary_dim 0): a table no kernel reads, but a binding has bytes
    positions = input_tensor(b, "positions", 4)
    x = b.embedding(DECODER + "embed_tokens.weight")
    _add_rows(b, gather(b, DECODER + "embed_positions.weight", positions), x, d)
    for i, (keys, values) in enumerate(cross):
        p = f"{DECODER}layers.{i}."
        attn = p + "self_attn."
        qkv = projections(b, layer_norm(b, x, p + "self_attn_layer_norm"), _qkv_parts(attn))
        a = b.attention(b.rope_kv(qkv))
        x = b.linear(a, [attn + "out_proj.weight"], bias=[attn + "out_proj.bias"], residual=x)
        attn = p + "encoder_attn."
        h = layer_norm(b, x, p + "encoder_attn_layer_norm")
        q = b.linear(h, [attn + "q_proj.weight"], bias=[attn + "q_proj.bias"])
        c = cross_attention(
            b,
            q,
            keys,
            values,
            heads=cfg.num_heads,
            kv_heads=cfg.num_heads,
            head_dim=cfg.head_dim,
            frames=geometry["frames"],
        )
        x = b.linear(c, [attn + "out_proj.weight"], bias=[attn + "out_proj.bias"], residual=x)
        x = _mlp(b, x, p)
    x = layer_norm(b, x, DECODER + "layer_norm")
    last_row = input_tensor(b, "last_row", 4)
    last = gather_rows(b, ([(x, 0, weight_defines(d, "f32"))], g.max_rows, d), last_row)
    b.logits(last, DECODER + "embed_tokens.weight")
    return g


def _qkv_parts(attn: str) -> list[tuple[str, str | None]]:
    return [(attn + "q_proj.weight", attn + "q_proj.bias"), (attn + "k_proj.weight", None),
            (attn + "v_proj.weight", attn + "v_proj.bias")]  # fmt: skip


def _mlp(b: GraphBuilder, x: Tensor, p: str) -> Tensor:
    """x + fc2(GELU(fc1(final_layer_norm(x))))."""
    h = layer_norm(b, x, p + "final_layer_norm")
    h = gelu(b, b.linear(h, [p + "fc1.weight"], bias=[p + "fc1.bias"]))
    return b.linear(h, [p + "fc2.weight"], bias=[p + "fc2.bias"], residual=x)


def _add_rows(b: GraphBuilder, x: Tensor, y: Tensor, width: int) -> None:
    """y += x over the forward's rows (shaders/add_rows.wgsl)."""
    b.g.op("add_rows", {"x": x, "y": y}, {"width": width, "pad0": 0, "pad1": 0, "pad2": 0},
           lambda rows: (-(-width // 256), rows, 1))  # fmt: skip


def check_shapes(tensors: dict, enc: ModelConfig, dec: ModelConfig, geometry: dict, path) -> None:
    """The tensors the graphs read have Whisper's shapes for this config (a mismatch would read
    past a buffer or mis-shape a matrix): ModelFileError naming the tensor."""
    for name, shape in whisper_shapes(enc, dec, geometry).items():
        info = tensors.get(name)
        if info is None:
            raise ModelFileError(path, f"missing tensor {name!r}")
        if tuple(info.shape) != shape:
            raise ModelFileError(info.path, f"tensor {name!r} has shape {tuple(info.shape)}, expected {shape}")


def whisper_shapes(enc: ModelConfig, dec: ModelConfig, geometry: dict) -> dict[str, tuple]:
    """Every tensor the graphs read -> its shape for this config."""
    d, frames = enc.hidden_size, geometry["frames"]
    want = {
        ENCODER + "conv1.weight": (d, geometry["n_mels"], 3),
        ENCODER + "conv2.weight": (d, d, 3),
        ENCODER + "conv1.bias": (d,),
        ENCODER + "conv2.bias": (d,),
        ENCODER + "embed_positions.weight": (frames, d),
        DECODER + "embed_tokens.weight": (geometry["vocab_size"], d),
        DECODER + "embed_positions.weight": (geometry["positions"], d),
    }
    norms = [ENCODER + "layer_norm", DECODER + "layer_norm"]
    for prefix, cfg, kinds in ((ENCODER, enc, ("self_attn",)), (DECODER, dec, ("self_attn", "encoder_attn"))):
        for i in range(cfg.num_layers):
            p = f"{prefix}layers.{i}."
            for kind in kinds:
                for proj in ("q_proj", "k_proj", "v_proj", "out_proj"):
                    want[f"{p}{kind}.{proj}.weight"] = (d, d)
                    if proj != "k_proj":
                        want[f"{p}{kind}.{proj}.bias"] = (d,)
                norms.append(f"{p}{kind}_layer_norm")
            norms.append(p + "final_layer_norm")
            want[p + "fc1.weight"], want[p + "fc1.bias"] = (cfg.intermediate_size, d), (cfg.intermediate_size,)
            want[p + "fc2.weight"], want[p + "fc2.bias"] = (d, cfg.intermediate_size), (d,)
    for norm in norms:
        want[norm + ".weight"] = want[norm + ".bias"] = (d,)
    return want
