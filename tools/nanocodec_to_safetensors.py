"""A NeMo audio codec checkpoint (`.nemo`) -> the folder Wisp's NanoCodec decoder reads.

    /work/refenv/bin/python tools/nanocodec_to_safetensors.py nemo-nano-codec-22khz-0.6kbps-12.5fps.nemo OUT

OUT gets config.json (the decoder's and the quantizer's hyperparameters from the archive's
model_config.yaml, under Wisp's own keys) and model.safetensors (the decoder's tensors, float32,
weight norm folded: what NeMo's remove_weight_norm leaves). The encoder, the discriminators and the
quantizer's buffers are dropped: speech needs the decoder only, and FSQ has no weights (its levels are
in config.json). Put OUT in a Kani-TTS-2 folder as `nanocodec/` (py_engine/speech/speaker.py looks
there) or pass it as load_speaker's `codec`.

Why a converter and not a reader in the engine: a `.nemo` is a tar holding a torch checkpoint, which
is a pickle, and a pickle from the internet must never be unpickled by the engine (it can run code;
the engine also runs in Pyodide, where torch does not exist). Here it is read with torch.load's
weights_only mode, torch's restricted unpickler (tensors and plain containers only), from the tar's
members in memory (nothing is extracted, so no member path can land outside OUT); the engine then
reads only safetensors and JSON, validated at load (py_engine/models/nanocodec.py).

NanoCodec (nvidia/nemo-nano-codec-22khz-0.6kbps-12.5fps) is under the NVIDIA Open Model License.
"""

import argparse
import io
import json
import math
import tarfile
from pathlib import Path

import torch
import yaml
from safetensors.torch import save_file

DECODER = "CausalHiFiGANDecoder"
QUANTIZER = "GroupFiniteScalarQuantizer"
# model_config.yaml's audio_decoder keys -> their defaults in NeMo's CausalHiFiGANDecoder.__init__.
DECODER_DEFAULTS = {
    "input_dim": None,
    "up_sample_rates": [8, 8, 2, 2],
    "base_channels": 512,
    "in_kernel_size": 7,
    "out_kernel_size": 3,
    "resblock_kernel_sizes": [3, 7, 11],
    "resblock_dilation_sizes": [1, 3, 5],
    "activation": "lrelu",
    "output_activation": "tanh",
    "pad_mode": "zeros",
    "n_groups_equal_to_out_channels": True,
}


def read_archive(path: Path) -> tuple[dict, dict]:
    """(model_config.yaml, the checkpoint's state dict) of a .nemo tar or of a folder holding both."""
    if path.is_dir():
        config = (path / "model_config.yaml").read_bytes()
        weights = (path / "model_weights.ckpt").read_bytes()
    else:
        with tarfile.open(path) as tar:  # plain or gzip tar: NeMo writes both
            members = {Path(m.name).name: m for m in tar.getmembers() if m.isfile()}
            for needed in ("model_config.yaml", "model_weights.ckpt"):
                if needed not in members:
                    raise SystemExit(f"{path}: no {needed} in the archive")
            config = tar.extractfile(members["model_config.yaml"]).read()
            weights = tar.extractfile(members["model_weights.ckpt"]).read()
    state = torch.load(io.BytesIO(weights), map_location="cpu", weights_only=True)
    if "state_dict" in state:  # a Lightning checkpoint rather than NeMo's bare state dict
        state = state["state_dict"]
    return yaml.safe_load(config), state


def decoder_config(cfg: dict) -> dict:
    """Wisp's config.json: the decoder's keys (NeMo's defaults filled in) and the FSQ's levels."""
    decoder, quantizer = cfg.get("audio_decoder") or {}, cfg.get("vector_quantizer") or {}
    if not str(decoder.get("_target_", "")).endswith(DECODER):
        raise SystemExit(f"audio_decoder is {decoder.get('_target_')!r}; this converter reads a {DECODER}")
    if not str(quantizer.get("_target_", "")).endswith(QUANTIZER):
        raise SystemExit(f"vector_quantizer is {quantizer.get('_target_')!r}; this converter reads a {QUANTIZER}")
    out = {key: decoder.get(key, default) for key, default in DECODER_DEFAULTS.items()}
    unresolved = [key for key, value in out.items() if "${" in str(value)]
    if unresolved:  # an OmegaConf interpolation the archive's config did not resolve
        raise SystemExit(f"audio_decoder.{unresolved[0]} is {out[unresolved[0]]!r}: resolve the config first")
    if out["pad_mode"] != "zeros":
        raise SystemExit(f"audio_decoder pad_mode {out['pad_mode']!r}: only zero padding is supported")
    rates = [int(r) for r in out["up_sample_rates"]]
    out.update(
        model_type="nanocodec",
        architectures=["NanoCodecDecoder"],
        sample_rate=int(cfg["sample_rate"]),
        samples_per_frame=int(cfg.get("samples_per_frame") or math.prod(rates)),
        num_groups=int(quantizer["num_groups"]),
        num_levels_per_group=[int(n) for n in quantizer["num_levels_per_group"]],
    )
    return out


def folded(state: dict) -> dict:
    """The decoder's tensors with weight norm folded (w = g v / ||v||, the norm over every dim but
    the first, as torch's _weight_norm computes it), float32, under their module names + .weight."""
    prefix = "audio_decoder."
    # (g's suffix, v's suffix): torch's parametrizations (NeMo today), then the older weight_norm hook.
    norms = ((".parametrizations.weight.original0", ".parametrizations.weight.original1"), (".weight_g", ".weight_v"))
    out = {}
    for name, tensor in state.items():
        if not name.startswith(prefix) or name.endswith(tuple(v for _, v in norms)):
            continue  # not the decoder's, or a v (folded with its g)
        for g_suffix, v_suffix in norms:
            if name.endswith(g_suffix):
                stem = name[: -len(g_suffix)]
                v = state[stem + v_suffix].float()
                name, tensor = stem + ".weight", torch._weight_norm(v, tensor.float(), 0)
                break
        out[name[len(prefix) :]] = tensor.float().contiguous()
    if not out:
        raise SystemExit("the checkpoint has no audio_decoder.* tensors")
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("nemo", type=Path, help="the .nemo archive (or a folder with its two files)")
    parser.add_argument("out", type=Path)
    args = parser.parse_args()
    cfg, state = read_archive(args.nemo)
    config = decoder_config(cfg)
    tensors = folded(state)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    save_file(tensors, str(args.out / "model.safetensors"), metadata={"format": "pt"})
    print(f"{args.out}: {len(tensors)} decoder tensors, {sum(t.numel() for t in tensors.values()):,} numbers")


if __name__ == "__main__":
    main()
