"""A tiny random NanoCodec decoder and NeMo's own decode of it, for Wisp's tests.

    pip install --no-deps --target /tmp/nemo-pkgs nemo-toolkit==3.0.0 einops
    PYTHONPATH=/tmp/nemo-pkgs /work/refenv/bin/python tools/make_nanocodec_fixture.py [--out tests/fixtures/nanocodec-f32]

The reference is NeMo itself: nemo-toolkit 3.0.0's audio_codec_modules.py and common/parts/utils.py
(GroupFiniteScalarQuantizer, CausalHiFiGANDecoder, HalfSnake, the causal convolutions with weight
norm) are executed from the installed package's files. Only what those two files import from the rest
of NeMo is stubbed (typecheck, NeuralModule = torch.nn.Module, the neural-type annotations, the ASR and
audio modules the decoder never touches): installing NeMo's full dependency tree (Lightning, Hydra, ...)
is not needed to run two torch modules, and NeMo's package __init__ chain would import all of it.

The model: NanoCodec's decoder (nvidia/nemo-nano-codec-22khz-0.6kbps-12.5fps: FSQ 4 groups of levels
[9, 8, 8, 7], CausalHiFiGANDecoder with half-snake activations, upsample rates [7, 7, 6, 3, 2], 864 base
channels, residual kernels 3/7/11 with dilations 1/3/5, clamp output) scaled down: 24 base channels and
rates [7, 6, 2] (channels 24 -> 12 -> 6 -> 3, so the last half-snake splits an odd count: 1 snake, 2
leaky ReLU), hop 84. The FSQ levels are the real ones. Weights are random with weight norm's g and the
snakes' alphas randomised too (NeMo inits them to ||v|| and 1, which would hide a skipped g or alpha).

Writes OUT/config.json + model.safetensors exactly as tools/nanocodec_to_safetensors.py converts the
.nemo archive written here (model_config.yaml + model_weights.ckpt, the converter's input), and
reference.json: the codes ([frames][4] ints), the float32 PCM NeMo's AudioCodecModel.decode path gives
(GroupFiniteScalarQuantizer.decode then CausalHiFiGANDecoder), and the versions. Deterministic; about a
second on CPU.
"""

import argparse
import importlib.util
import io
import json
import logging
import math
import sys
import tarfile
import tempfile
import types
from pathlib import Path

import torch
import yaml

sys.path.insert(0, str(Path(__file__).parent))
from nanocodec_to_safetensors import main as convert  # noqa: E402

SEED = 32
FRAMES = 40
DECODER = dict(
    input_dim=16,
    up_sample_rates=[7, 6, 2],
    base_channels=24,
    in_kernel_size=7,
    out_kernel_size=3,
    resblock_kernel_sizes=[3, 7, 11],
    resblock_dilation_sizes=[1, 3, 5],
    activation="half_snake",
    output_activation="clamp",
    pad_mode="zeros",
    n_groups_equal_to_out_channels=True,
)
QUANTIZER = dict(num_groups=4, num_levels_per_group=[9, 8, 8, 7])
SAMPLE_RATE = 22050
POST_GAIN = 14.0
# What audio_codec_modules.py imports from nemo.core.neural_types.elements (annotations only).
ELEMENT_TYPES = ("AudioSignal", "EncodedRepresentation", "LengthsType", "MelSpectrogramType", "TokenIndex", "VoidType")
NEMO_VERSION = "nemo-toolkit 3.0.0 (audio_codec_modules.py, common/parts/utils.py)"
NEMO_PATHS = ("collections/common/parts/utils.py", "collections/tts/modules/audio_codec_modules.py")


class _Anything:
    """Stands for NeMo's neural-type annotations: any call, any attribute."""

    def __init__(self, *args, **kwargs):
        pass

    def __call__(self, *args, **kwargs):
        return self


def nemo_modules() -> types.ModuleType:
    """NeMo 3.0.0's audio_codec_modules, run from the installed files with the stubs above."""
    spec = importlib.util.find_spec("nemo")
    if spec is None:
        raise SystemExit("nemo-toolkit is not importable: see this tool's docstring")
    root = Path(spec.origin).parent
    stubs = {
        "nemo.core.classes.common": {"typecheck": lambda *a, **k: lambda f: f},
        "nemo.core.classes.module": {"NeuralModule": torch.nn.Module},
        "nemo.core.neural_types.elements": dict.fromkeys(ELEMENT_TYPES, _Anything),
        "nemo.core.neural_types.neural_type": {"NeuralType": _Anything},
        "nemo.utils": {"logging": logging.getLogger("nemo")},
        "nemo.collections.asr.modules": {"AudioToMelSpectrogramPreprocessor": _Anything},
        "nemo.collections.audio.parts.utils.transforms": {"MelSpectrogram": _Anything, "Resample": _Anything},
    }
    for name, attrs in stubs.items():
        parts = name.split(".")
        for i in range(1, len(parts) + 1):  # the parents too, so no NeMo __init__ runs
            sys.modules.setdefault(".".join(parts[:i]), types.ModuleType(".".join(parts[:i])))
        module = sys.modules[name]
        module.__dict__.update(attrs)
    loaded = None
    for rel in NEMO_PATHS:
        name = "nemo." + rel[: -len(".py")].replace("/", ".")
        file_spec = importlib.util.spec_from_file_location(name, root / rel)
        loaded = importlib.util.module_from_spec(file_spec)
        sys.modules[name] = loaded
        file_spec.loader.exec_module(loaded)
    return loaded


def randomised(decoder: torch.nn.Module, generator: torch.Generator, post_gain: float) -> None:
    """Weight norm's g, the snakes' alphas and the biases random (see the module docstring)."""
    with torch.no_grad():
        for name, param in decoder.named_parameters():
            if name.endswith("original0"):  # g: ||v|| times a random factor per output channel
                param.mul_(0.5 + torch.rand(param.shape, generator=generator))
            elif name.endswith("alpha"):
                param.copy_(0.3 + 1.7 * torch.rand(param.shape, generator=generator))
            elif name.endswith("bias"):
                param.copy_(0.1 * torch.randn(param.shape, generator=generator))
        # Loud enough that the output clamp cuts a few percent of the samples (a missing clamp shows).
        decoder.post_conv.conv.parametrizations.weight.original0.mul_(post_gain)


def write_nemo(
    path: Path, decoder: torch.nn.Module, quantizer: torch.nn.Module, decoder_cfg: dict, quantizer_cfg: dict
):
    """A .nemo archive as NeMo saves one: model_config.yaml and model_weights.ckpt in a tar."""
    config = {
        "sample_rate": SAMPLE_RATE,
        "samples_per_frame": math.prod(decoder_cfg["up_sample_rates"]),
        "audio_decoder": {"_target_": "nemo.collections.tts.modules.audio_codec_modules.CausalHiFiGANDecoder"}
        | decoder_cfg,
        "vector_quantizer": {"_target_": "nemo.collections.tts.modules.audio_codec_modules.GroupFiniteScalarQuantizer"}
        | quantizer_cfg,
    }
    state = {"audio_decoder." + k: v for k, v in decoder.state_dict().items()}
    state |= {"vector_quantizer." + k: v for k, v in quantizer.state_dict().items()}
    weights = io.BytesIO()
    torch.save(state, weights)
    with tarfile.open(path, "w") as tar:
        for name, data in (
            ("model_config.yaml", yaml.safe_dump(config).encode()),
            ("model_weights.ckpt", weights.getvalue()),
        ):
            info = tarfile.TarInfo("./" + name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))


class Codec:
    """A random codec made with NeMo's modules, written to `out` as the converter writes a .nemo
    (make_kani_fixture.py makes a smaller one with this)."""

    def __init__(self, out: Path, decoder_cfg: dict, quantizer_cfg: dict, seed: int, post_gain: float):
        torch.manual_seed(seed)
        nemo = nemo_modules()
        self.quantizer = nemo.GroupFiniteScalarQuantizer(**quantizer_cfg).eval()
        self.decoder = nemo.CausalHiFiGANDecoder(**decoder_cfg).eval()
        randomised(self.decoder, torch.Generator().manual_seed(seed), post_gain)
        with tempfile.TemporaryDirectory() as tmp:
            archive = Path(tmp) / "nanocodec.nemo"
            write_nemo(archive, self.decoder, self.quantizer, decoder_cfg, quantizer_cfg)
            argv, sys.argv = sys.argv, ["nanocodec_to_safetensors.py", str(archive), str(out)]
            try:
                convert()
            finally:
                sys.argv = argv
        (out / "model.safetensors").chmod(0o644)

    def decode(self, codes: list[list[int]]) -> torch.Tensor:
        """AudioCodecModel.decode of frames [frames][groups]: dequantize ([B, C, T] -> [C, B, T]),
        then the decoder; the float32 PCM."""
        tokens = torch.tensor(codes).T[:, None, :]
        lengths = torch.tensor([len(codes)])
        with torch.inference_mode():
            dequantized = self.quantizer.decode(indices=tokens, input_len=lengths)
            audio, audio_len = self.decoder(inputs=dequantized, input_len=lengths)
        return audio[0, : int(audio_len[0])]


def pcm_list(pcm: torch.Tensor) -> list[float]:
    return [float(f"{v:.8g}") for v in pcm.tolist()]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=Path(__file__).parent.parent / "tests/fixtures/nanocodec-f32")
    args = parser.parse_args()
    codec = Codec(args.out, DECODER, QUANTIZER, SEED, POST_GAIN)
    levels = math.prod(QUANTIZER["num_levels_per_group"])
    codes = torch.randint(
        0, levels, (FRAMES, QUANTIZER["num_groups"]), generator=torch.Generator().manual_seed(SEED + 1)
    )
    pcm = codec.decode(codes.tolist())
    clipped = float((pcm.abs() >= 1).float().mean())
    reference = {
        "codes": codes.tolist(),  # [frames][groups]: the order Kani-TTS-2 emits them
        "pcm": pcm_list(pcm),
        "clipped_fraction": clipped,
        "torch": torch.__version__,
        "nemo": NEMO_VERSION,
        "notes": "PCM of NeMo's GroupFiniteScalarQuantizer.decode + CausalHiFiGANDecoder in float32 (CPU)",
    }
    (args.out / "reference.json").write_text(json.dumps(reference) + "\n")
    print(
        f"{args.out}: {FRAMES} frames -> {pcm.numel()} samples, |pcm| max {pcm.abs().max():.3f}, clipped {clipped:.1%}"
    )


if __name__ == "__main__":
    main()
