"""NanoCodec's decoder (models/nanocodec.py, speech/nanocodec.py) against NeMo's own decode of the
tiny random fixture (tools/make_nanocodec_fixture.py: nemo-toolkit 3.0.0's GroupFiniteScalarQuantizer
and CausalHiFiGANDecoder), streamed windows against one whole decode, and its config's checks."""

import asyncio
import json
from pathlib import Path

import numpy as np
import pytest
from gpu_harness import device

from py_engine.errors import ModelFileError, WispError
from py_engine.formats.safetensors import TensorInfo
from py_engine.models.graph_options import DEFAULT_MAX_BINDING
from py_engine.models.nanocodec import codec_config
from py_engine.speech.nanocodec import NEW_FRAMES, CodecFiles, codec_plan, load_codec, read_codec_files

FIXTURE = Path(__file__).parent / "fixtures" / "nanocodec-f32"
REFERENCE = json.loads((FIXTURE / "reference.json").read_text())
# nvidia/nemo-nano-codec-22khz-0.6kbps-12.5fps's decoder, as tools/nanocodec_to_safetensors.py writes it.
REAL = {
    "model_type": "nanocodec",
    "sample_rate": 22050,
    "samples_per_frame": 1764,
    "num_groups": 4,
    "num_levels_per_group": [9, 8, 8, 7],
    "input_dim": 16,
    "base_channels": 864,
    "up_sample_rates": [7, 7, 6, 3, 2],
    "in_kernel_size": 7,
    "out_kernel_size": 3,
    "resblock_kernel_sizes": [3, 7, 11],
    "resblock_dilation_sizes": [1, 3, 5],
    "activation": "half_snake",
    "output_activation": "clamp",
}


@pytest.fixture(scope="module")
def codecs():
    """The fixture's decoder twice: windows of all 40 frames (one forward), and of 3 new frames."""
    dev, _ = device()
    files = read_codec_files(FIXTURE)
    whole = asyncio.run(load_codec(files, dev, new_frames=len(REFERENCE["codes"])))
    small = asyncio.run(load_codec(files, dev, new_frames=3))
    return whole, small


def test_decode_matches_nemo(codecs):
    whole, _ = codecs
    pcm = np.array(asyncio.run(whole.decode(REFERENCE["codes"])))
    ref = np.array(REFERENCE["pcm"])
    assert pcm.shape == ref.shape == (len(REFERENCE["codes"]) * whole.hop,)
    assert np.abs(pcm - ref).max() < 1e-3  # measured 1.1e-6 on lavapipe
    assert np.abs(pcm).max() == 1.0  # the fixture is loud enough that the clamp cuts


def test_streamed_windows_equal_the_whole_decode(codecs):
    """Frames arriving 3 at a time, each decoded in a window with its context: the whole decode's
    samples (the decoder is causal; context_frames is its receptive field)."""
    whole, small = codecs
    codes = REFERENCE["codes"]
    assert small.max_rows == small.context_frames + 3 < len(codes)
    full = np.array(asyncio.run(whole.decode(codes)))
    pieces, first = [], 0
    for end in [*range(3, len(codes), 3), len(codes)]:
        pieces.append(np.array(asyncio.run(small.decode(codes[:end], first))))
        first = end
    assert [len(p) for p in pieces[:2]] == [3 * small.hop] * 2
    assert np.abs(np.concatenate(pieces) - full).max() < 1e-5


def test_codes_outside_the_codebook_are_refused(codecs):
    whole, _ = codecs
    with pytest.raises(WispError, match="frame 1"):
        asyncio.run(whole.decode([[0, 0, 0, 0], [0, 4032, 0, 0]]))
    with pytest.raises(WispError, match="frame 0"):
        asyncio.run(whole.decode([[0, 0, 0]]))


def test_context_frames_is_the_receptive_field():
    """NanoCodec's: 2 samples (post conv) + 120 per residual layer (kernel 11: 10 (1 + 3 + 5) + 3 x 10)
    walked back through strides 2, 3, 6, 7, 7 (+1 input each: the transposed conv's second tap), + 6
    frames (pre conv): 28 frames, 2.24 s."""
    assert codec_config(REAL, "config.json").context_frames == 28
    tiny = read_codec_files(FIXTURE).cfg
    assert (tiny.hop, tiny.context_frames, tiny.codebook_size) == (84, 29, 4032)


@pytest.mark.parametrize(
    "change, problem",
    [
        ({"model_type": "nemo"}, "model_type"),
        ({"num_levels_per_group": [9, 8, 8, 7, 5]}, "num_levels_per_group"),
        ({"input_dim": 12}, "input_dim"),
        ({"base_channels": 100}, "base_channels"),
        ({"activation": "snake"}, "activation"),
        ({"up_sample_rates": [7, 0]}, "up_sample_rates"),
        ({"samples_per_frame": 1000}, "samples_per_frame"),
        ({"pad_mode": "reflect"}, "zero padding"),
    ],
)
def test_bad_configs_name_the_key(change, problem):
    with pytest.raises(ModelFileError, match=problem):
        codec_config(REAL | change, "config.json")


def real_tensors(cfg) -> dict:
    """NanoCodec's decoder tensors by name and shape (no data: for planning)."""
    shapes = {"pre_conv.conv.weight": (cfg.base_channels, 16, 7), "pre_conv.conv.bias": (cfg.base_channels,)}
    channels = cfg.base_channels
    for stage, rate in enumerate(cfg.rates):
        shapes[f"activations.{stage}.activation.snake_act.alpha"] = (1, channels // 2, 1)
        up = f"up_sample_conv_layers.{stage}.conv."
        shapes |= {up + "weight": (channels, 1, 2 * rate), up + "bias": (channels // 2,)}
        channels //= 2
        for i, kernel in enumerate(cfg.res_kernels):
            for d in range(len(cfg.dilations)):
                for part in ("input", "skip"):
                    p = f"res_layers.{stage}.res_blocks.{i}.res_blocks.{d}.{part}_"
                    shapes[p + "activation.activation.snake_act.alpha"] = (1, channels // 2, 1)
                    shapes |= {p + "conv.conv.weight": (channels, channels, kernel), p + "conv.conv.bias": (channels,)}
    shapes["post_activation.activation.snake_act.alpha"] = (1, channels // 2, 1)
    shapes |= {"post_conv.conv.weight": (1, channels, 3), "post_conv.conv.bias": (1,)}
    return {name: TensorInfo(name, "F32", shape, 0, 4, "model.safetensors") for name, shape in shapes.items()}


def test_the_real_decoder_plans_within_browser_limits():
    """NanoCodec's own shape, a window of its 28 context frames and 32 new ones: every tensor within a
    storage binding, every grid within 65,535 workgroups a dimension."""
    cfg = codec_config(REAL, "config.json")

    class Source:
        label = "nanocodec"

    graph, need = codec_plan(CodecFiles(Source, cfg, real_tensors(cfg)), cfg.context_frames + NEW_FRAMES)
    assert max(t.nbytes for t in graph.tensors) <= DEFAULT_MAX_BINDING
    assert max(max(op.grid(graph.max_rows)) for op in graph.ops) <= 65535
    assert len(graph.ops) == 194 and need.total < 256 << 20  # 120 MB of f32 weights, 107 MB of activations
