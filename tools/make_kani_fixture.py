"""A tiny random Kani-TTS-2 (its LFM2 codec-LM and a NanoCodec) and kani-tts-2's own forward of it, for
Wisp's tests.

    pip install --no-deps --target /tmp/nemo-pkgs nemo-toolkit==3.0.0 einops
    pip install --no-deps --target /tmp/kani-pkgs kani-tts-2==0.0.5
    PYTHONPATH=/tmp/nemo-pkgs:/tmp/kani-pkgs /work/refenv/bin/python tools/make_kani_fixture.py [--out tests/fixtures/kani-f32]

The reference is kani-tts-2 0.0.5's kani_tts/model.py (KaniTTS2ForCausalLM, Lfm2ForKaniModel,
LearnableRotaryEmbedding, compute_frame_level_positions), run from the installed file (its package
__init__ imports NeMo's full AudioCodecModel, which needs NeMo's whole dependency tree). It was written
for transformers 4.x; under transformers 5.24 four things drifted and are patched here, nothing else:
- the import of Lfm2HybridConvCache (gone: LFM2 caches in DynamicCache) is given DynamicCache;
- LearnableRotaryEmbedding reads config.rope_theta (5.x keeps it in rope_parameters): set from there;
- KaniTTS2ForCausalLM._tied_weights_keys is a list (5.x wants a dict): the same tie as a dict;
- Lfm2ForKaniModel.forward's learnable-RoPE path calls create_causal_mask and the decoder layers with
  4.x keywords: `forward` below is that path, line for line, with 5.24's keywords, run cache-free.
The positions of the generation loop are checked against kani's own prepare_inputs_for_generation (its
frame-position state machine): a full recompute with compute_frame_level_positions over the sequence
(the speaker embedding's row counted as text) gives the same positions.

The model is Kani-TTS-2's shape scaled down (LFM2-350M: 16 layers, hidden 1024, text vocabulary 64400,
audio tokens from 64410, 4 codebooks of 4032): 4 layers (conv, attention, conv, attention: two learnable
alphas), hidden 32 (2 heads of 16, 1 KV head), text vocabulary 300 (a byte-level BPE tokenizer trained here, LFM2's special ids
0 pad, 1 startoftext, 2 endoftext), audio tokens from 310, a codec with 4 codebooks of levels [4, 3, 2,
2] (48 codes) so the vocabulary is 502, audio_step 0.5 (frame positions advance half a position per
frame), speaker embeddings of 16. Its codec (nanocodec/) is make_nanocodec_fixture.Codec's, smaller.

Two requests, each generated with the audio-token mask Wisp decodes under (py_engine/speech/kani_frames.py:
slot k of a frame takes codebook k's tokens, END_OF_SPEECH only at a frame's start) after the prompt
[START_OF_HUMAN] tokens(text) [END_OF_TEXT, END_OF_HUMAN, START_OF_AI, START_OF_SPEECH], greedy, every
step a full recompute: "ash" with no voice and no penalty; "birch" with the voice "birch" (voices.safetensors)
and repetition penalty 1.1. reference.json holds, per request, the prompt ids, the generated ids, the
positions, the codes and NeMo's PCM of them; reference_logits.npy the first request's logits at its first
8 steps. Seeds are tried until every step's top-2 gap among the allowed tokens is > 1e-3 of the largest
|logit| and each request makes at least MIN_FRAMES frames.
"""

import argparse
import importlib.util
import json
import sys
from pathlib import Path

import numpy as np
import torch
import transformers
import transformers.models.lfm2.modeling_lfm2 as lfm2
from safetensors.torch import save_file
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
from transformers import Lfm2Config, PreTrainedTokenizerFast
from transformers.masking_utils import create_causal_mask
from transformers.modeling_outputs import BaseModelOutputWithPast

sys.path.insert(0, str(Path(__file__).parent))
from make_nanocodec_fixture import NEMO_VERSION, Codec, pcm_list  # noqa: E402

TEXT_VOCAB = 300  # Kani's tokeniser_length (64400): the special ids follow it
SPECIAL = {"start_of_human": 3, "end_of_human": 4, "start_of_ai": 5, "end_of_ai": 6, "pad": 7}
START_OF_SPEECH, END_OF_SPEECH = TEXT_VOCAB + 1, TEXT_VOCAB + 2
AUDIO_START = TEXT_VOCAB + 10
LEVELS = [4, 3, 2, 2]
CODEBOOK = int(np.prod(LEVELS))
SPEAKER_DIM = 16
KANI = dict(
    audio_tokens_start=AUDIO_START,
    text_vocab_size=TEXT_VOCAB,
    tokens_per_frame=4,
    audio_step=0.5,
    use_learnable_rope=True,
    alpha_min=0.1,
    alpha_max=2.0,
    speaker_emb_dim=SPEAKER_DIM,
)
CONFIG = dict(
    vocab_size=AUDIO_START + 4 * CODEBOOK,
    hidden_size=32,
    intermediate_size=48,  # auto-adjusted to int(2 x 48 / 3) = 32
    num_hidden_layers=4,
    layer_types=["conv", "full_attention", "conv", "full_attention"],
    num_attention_heads=2,
    num_key_value_heads=1,
    conv_L_cache=3,
    norm_eps=1e-5,
    block_multiple_of=8,
    max_position_embeddings=512,
    tie_word_embeddings=True,
    initializer_range=0.2,
    bos_token_id=1,
    eos_token_id=END_OF_SPEECH,
    pad_token_id=0,
)
CODEC_DECODER = dict(
    input_dim=16,
    up_sample_rates=[3, 2],
    base_channels=16,
    in_kernel_size=7,
    out_kernel_size=3,
    resblock_kernel_sizes=[3, 7, 11],
    resblock_dilation_sizes=[1, 3, 5],
    activation="half_snake",
    output_activation="clamp",
    pad_mode="zeros",
    n_groups_equal_to_out_channels=True,
)
REQUESTS = [
    dict(text="ash", voice=None, repetition_penalty=1.0),
    dict(text="birch bark", voice="birch", repetition_penalty=1.1),
]
VOICES = ("ash", "birch")
MAX_FRAMES, MIN_FRAMES = 12, 6
LOGIT_STEPS = 8
MIN_REL_MARGIN = 1e-3
CORPUS = "the quick brown fox jumps over the lazy dog; birch bark and ash wood burn in the hearth. " * 20


def kani_model_module():
    """kani_tts/model.py from the installed kani-tts-2, with the transformers 5 patches (docstring)."""
    spec = importlib.util.find_spec("kani_tts")
    if spec is None:
        raise SystemExit("kani-tts-2 is not importable: see this tool's docstring")
    lfm2.Lfm2HybridConvCache = transformers.DynamicCache
    file_spec = importlib.util.spec_from_file_location("kani_tts_model", Path(spec.origin).parent / "model.py")
    module = importlib.util.module_from_spec(file_spec)
    file_spec.loader.exec_module(module)
    module.KaniTTS2ForCausalLM._tied_weights_keys = {"lm_head.weight": "model.embed_tokens.weight"}
    module.Lfm2ForKaniModel.forward = forward
    return module


def forward(self, input_ids=None, inputs_embeds=None, position_ids=None, **_):
    """Lfm2ForKaniModel.forward's learnable-RoPE path with transformers 5.24's keywords, cache-free: a
    RoPE of its own for each attention layer (the last one's kept for the conv layers, which ignore it).
    The mask is made without position_ids: 5.x would read frame positions as packed sequences."""
    if inputs_embeds is None:
        inputs_embeds = self.embed_tokens(input_ids)
    mask = create_causal_mask(
        config=self.config,
        inputs_embeds=inputs_embeds,
        attention_mask=torch.ones(inputs_embeds.shape[:2], dtype=torch.long),
        cache=None,
        position_ids=None,
    )
    hidden, position_embeddings = inputs_embeds, None
    for index, layer in enumerate(self.layers[: self.config.num_hidden_layers]):
        if self.learnable_rope_layers[index] is not None:
            position_embeddings = self.learnable_rope_layers[index](hidden, position_ids)
        elif position_embeddings is None:
            position_embeddings = self.rotary_emb(hidden, position_ids)
        attention = self.config.layer_types[index] == "full_attention"
        hidden = layer(
            hidden,
            attention_mask=mask if attention else None,
            position_ids=position_ids,
            cache=None,
            position_embeddings=position_embeddings,
        )
    return BaseModelOutputWithPast(last_hidden_state=self.embedding_norm(hidden))


def make_tokenizer(out: Path) -> PreTrainedTokenizerFast:
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    specials = ["<|pad|>", "<|startoftext|>", "<|endoftext|>"]
    trainer = trainers.BpeTrainer(
        vocab_size=TEXT_VOCAB, special_tokens=specials, initial_alphabet=pre_tokenizers.ByteLevel.alphabet()
    )
    tok.train_from_iterator([CORPUS], trainer)
    tok.post_processor = processors.TemplateProcessing(single="<|startoftext|> $A", special_tokens=[(specials[1], 1)])
    tok.save(str(out / "tokenizer.json"))
    return PreTrainedTokenizerFast(tokenizer_file=str(out / "tokenizer.json"))


def build_model(kani, seed: int):
    config = Lfm2Config(**CONFIG)
    config._attn_implementation = "eager"
    config.rope_theta = config.rope_parameters["rope_theta"]
    torch.manual_seed(seed)
    model = kani.KaniTTS2ForCausalLM(config, **{k: v for k, v in KANI.items() if k != "text_vocab_size"}).eval()
    with torch.no_grad():
        for name, param in model.named_parameters():
            if name.endswith("norm.weight"):
                param.copy_(1 + 0.1 * torch.randn_like(param))
            elif name.endswith("alpha_weight"):
                param.copy_(1.5 * torch.randn(()))  # alphas far apart, not sigmoid(0)'s 1.05 for every layer
    model.lm_head.weight = model.model.embed_tokens.weight
    return model


def masks(vocab: int) -> list[torch.Tensor]:
    """The allowed tokens at each slot of a frame (slot 0 also END_OF_SPEECH), as kani_frames.py."""
    out = []
    for slot in range(4):
        allowed = torch.zeros(vocab, dtype=torch.bool)
        allowed[AUDIO_START + slot * CODEBOOK : AUDIO_START + (slot + 1) * CODEBOOK] = True
        out.append(allowed)
    out[0][END_OF_SPEECH] = True
    return out


@torch.no_grad()
def generate(model, kani, tokenizer, request, voices) -> tuple[dict, list, float]:
    """One request as Wisp runs it, every step a full recompute (see the module docstring): (its prompt,
    generated ids, positions and codes; its logits at each step; the least top-2 gap over the steps)."""
    text_ids = tokenizer(request["text"]).input_ids
    prompt = [TEXT_VOCAB + SPECIAL["start_of_human"], *text_ids, 2, TEXT_VOCAB + SPECIAL["end_of_human"]]
    prompt += [TEXT_VOCAB + SPECIAL["start_of_ai"], START_OF_SPEECH]
    speaker = voices.get(request["voice"])
    allowed, ids, steps, margins = masks(model.config.vocab_size), list(prompt), [], []
    penalty = transformers.RepetitionPenaltyLogitsProcessor(request["repetition_penalty"])
    while True:
        frames, slot = divmod(len(ids) - len(prompt), 4)
        seq = torch.tensor([ids])
        slotted = torch.tensor([ids[:1] + [TEXT_VOCAB + SPECIAL["pad"]] + ids[1:]]) if speaker is not None else seq
        positions = kani.compute_frame_level_positions(slotted, AUDIO_START, 4, KANI["audio_step"])
        if frames == MAX_FRAMES:
            break
        embeds = model.model.embed_tokens(seq)
        if speaker is not None:  # prepare_inputs_for_generation's splice: the projection after the first token
            row = model.model.speaker_emb_projection(speaker[None])[:, None]
            embeds = torch.cat([embeds[:, :1], row, embeds[:, 1:]], dim=1)
        logits = model(inputs_embeds=embeds, position_ids=positions).logits[0, -1]
        steps.append(logits.clone())
        scores = penalty(seq, logits[None].clone())[0].masked_fill(~allowed[slot], -torch.inf)
        top = torch.topk(scores, 2).values
        margins.append(float((top[0] - top[1]) / logits.abs().max()))
        token = int(scores.argmax())
        if token == END_OF_SPEECH:
            break
        ids.append(token)
    generated = ids[len(prompt) :]
    codes = [[generated[f * 4 + k] - AUDIO_START - k * CODEBOOK for k in range(4)] for f in range(len(generated) // 4)]
    at = positions[0].tolist()
    at = at[:1] + at[2:] if speaker is not None else at  # each token's: the speaker row's left out
    want = kani_positions(model, len(prompt) - 2, ids[len(prompt) - 2 :], speaker is not None)
    assert at[len(prompt) - 2 :] == want, "kani's state machine places the generated tokens elsewhere"
    run = dict(prompt_ids=prompt, generated=generated, positions=at, codes=codes)
    return run, steps, min(margins)


def kani_positions(model, prompt_len: int, generated: list[int], speaker: bool) -> list[float]:
    """The positions kani's own prepare_inputs_for_generation gives each generated token (its frame
    state machine) after a prompt of prompt_len tokens (+ the speaker row in the cache)."""

    class Cache(transformers.DynamicCache):
        def __init__(self, length):
            super().__init__()
            self.length = length

        def get_seq_length(self, layer_idx=0):
            return self.length

    model._generation_state, model._current_speaker_emb = None, None
    model.prepare_inputs_for_generation(torch.zeros(1, prompt_len, dtype=torch.long), past_key_values=None)
    out, cached = [], prompt_len + int(speaker)
    for i in range(len(generated)):
        ids = torch.tensor([[0] * prompt_len + generated[: i + 1]])
        inputs = model.prepare_inputs_for_generation(ids, past_key_values=Cache(cached + i))
        out.append(float(inputs["position_ids"][0, -1]))
    model._generation_state = None
    return out


def save_model(model, out: Path) -> None:
    config = model.config.to_dict() | KANI | {"architectures": ["KaniTTS2ForCausalLM"]}
    for key in ("rope_theta", "_attn_implementation_autoset"):
        config.pop(key, None)
    (out / "config.json").write_text(json.dumps(config, indent=2, sort_keys=True) + "\n")
    state = {k: v.contiguous() for k, v in model.state_dict().items() if k != "lm_head.weight"}  # tied
    save_file(state, str(out / "model.safetensors"), metadata={"format": "pt"})
    (out / "model.safetensors").chmod(0o644)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=Path(__file__).parent.parent / "tests/fixtures/kani-f32")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    kani = kani_model_module()
    tokenizer = make_tokenizer(args.out)
    generator = torch.Generator().manual_seed(7)
    voices = {n: torch.nn.functional.normalize(torch.randn(SPEAKER_DIM, generator=generator), dim=0) for n in VOICES}
    for seed in range(100):
        model = build_model(kani, seed)
        runs = [generate(model, kani, tokenizer, request, voices) for request in REQUESTS]
        if all(margin > MIN_REL_MARGIN and len(run["codes"]) >= MIN_FRAMES for run, _, margin in runs):
            break
    else:
        raise SystemExit("no seed gives clear margins and enough frames")
    save_model(model, args.out)
    save_file({n: v.contiguous() for n, v in voices.items()}, str(args.out / "voices.safetensors"))
    (args.out / "voices.safetensors").chmod(0o644)
    codec = Codec(args.out / "nanocodec", CODEC_DECODER, dict(num_groups=4, num_levels_per_group=LEVELS), seed, 4.0)
    requests = []
    for request, (run, _, margin) in zip(REQUESTS, runs):
        pcm = pcm_list(codec.decode(run["codes"]))
        requests.append(request | run | {"pcm": pcm, "min_top2_margin_rel": margin, "max_frames": MAX_FRAMES})
    reference = {
        "requests": requests,
        "seed": seed,
        "logit_steps": LOGIT_STEPS,
        "transformers": transformers.__version__,
        "torch": torch.__version__,
        "kani_tts": "kani-tts-2 0.0.5 (kani_tts/model.py, patched for transformers 5: see the tool)",
        "nemo": NEMO_VERSION,
    }
    (args.out / "reference.json").write_text(json.dumps(reference) + "\n")
    np.save(args.out / "reference_logits.npy", torch.stack(runs[0][1][:LOGIT_STEPS]).numpy().astype(np.float32))
    for request in requests:
        print(f"{request['text']!r}: {len(request['codes'])} frames, margin {request['min_top2_margin_rel']:.2e}")
    print(f"{args.out}: seed {seed}")


if __name__ == "__main__":
    main()
