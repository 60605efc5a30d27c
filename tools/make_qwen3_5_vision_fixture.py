"""Generate tests/fixtures/qwen3_5vl-f32/: a tiny random Qwen3.5 vision-language model (transformers'
Qwen3_5ForConditionalGeneration: Qwen3.5's ViT with its patch merger, a hybrid Gated DeltaNet + attention text
tower) with its processor's files, three synthetic test pictures and float32 reference outputs of HF
transformers, so Wisp's Qwen3.5 picture path can be tested against transformers without transformers.

    /work/refenv/bin/python tools/make_qwen3_5_vision_fixture.py [--out tests/fixtures/qwen3_5vl-f32]

(any Python with torch, transformers 5, tokenizers, safetensors, numpy and Pillow; offline, deterministic, a
few seconds on CPU). It writes:

- config.json, generation_config.json, model.safetensors: the random model in float32 (untied LM head);
- tokenizer.json, tokenizer_config.json: a tiny byte-level BPE with Qwen3.5's pre-tokenizer and its special
  and picture tokens (<|vision_start|>, <|vision_end|>, <|image_pad|>), and a Qwen-VL-shaped chat template
  (written here; it renders a picture as <|vision_start|><|image_pad|><|vision_end|>, as Qwen3.5's does);
- preprocessor_config.json: shaped as Qwen3-VL / Qwen3.5's (size's shortest_edge / longest_edge in pixels,
  patch 16, temporal patch 2, merge 2, mean = std = 0.5; no resample key: the processor's BICUBIC), with
  pixel bounds small enough for tiny pictures to hit both of smart_resize's branches;
- images/*.png: three seeded synthetic pictures of odd sizes (tools/make_vision_fixtures.py's);
- reference.json + reference.npz: what Qwen3VLProcessor (its PIL image processor; torchvision is not
  installed) makes of each picture (the grid and the pixel values, one temporal frame stored: the processor
  repeats a still picture's frame, which the tool checks), and for a one-picture and a two-picture prompt the
  image features, the last logits with transformers' multimodal RoPE positions and with plain text positions,
  the positions themselves and 16 greedy ids.

A seed is skipped when a greedy step is near-tied, when greedy emits a picture token, when the pictures have
too little effect on the logits, or when the multimodal positions change them too little to be tested.
"""

import json
import sys

import numpy as np
import torch
from tokenizers import Regex, normalizers, pre_tokenizers
from transformers import (
    PreTrainedTokenizerFast,
    Qwen3_5Config,
    Qwen3_5ForConditionalGeneration,
    Qwen3VLProcessor,
)
from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import Qwen2VLImageProcessorPil
from vision_fixture_common import (
    ATTN,
    STD,
    f7,
    greedy,
    load_model,
    make_fixture,
    margins,
    outcome,
    prompts,
    run_prompts,
    save_model,
    save_tokenizer_files,
    train_bpe,
)

MIN_POSITION_EFFECT = 0.05  # ... and by more than this between multimodal and plain positions
FIRST_SEED = 35000


# Qwen3.5's tokenizer pipeline (transformers' Qwen3_5Tokenizer): NFC, its split regex, byte-level.
PRETOKENIZE = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*"
    r"|\s*[\r\n]+|\s+(?!\S)|\s+"
)
BPE_VOCAB = 300
SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
PICTURE_TOKENS = {
    "vision_start_token": "<|vision_start|>",
    "vision_end_token": "<|vision_end|>",
    "image_token": "<|image_pad|>",
    "video_token": "<|video_pad|>",
}
TRAINING_TEXT = [
    "user\nDescribe this picture in one sentence.\nassistant\nA small red square on a blue sky.",
    "user\nWhat is in this image?\nassistant\nThe cat sat on the mat and the dog ran in the park.",
    "user\nCompare these two images.\nassistant\nThe first is bright and the second is dark.",
    "How many colours are there? There are 3 colours: red, green and blue.",
]
# A Qwen-VL-shaped template (not Qwen3.5's verbatim, which also renders tools and thinking): a picture part
# is <|vision_start|><|image_pad|><|vision_end|>, as Qwen3.5's and Qwen3-VL's templates write it.
CHAT_TEMPLATE = (
    "{%- for message in messages %}"
    "{{- '<|im_start|>' + message['role'] + '\\n' }}"
    "{%- if message['content'] is string %}{{- message['content'] }}"
    "{%- else %}{%- for part in message['content'] %}"
    "{%- if part['type'] == 'image' or 'image' in part or 'image_url' in part %}"
    "{{- '<|vision_start|><|image_pad|><|vision_end|>' }}"
    "{%- elif 'text' in part %}{{- part['text'] }}{%- endif %}"
    "{%- endfor %}{%- endif %}"
    "{{- '<|im_end|>\\n' }}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}"
)

PATCH, TEMPORAL, MERGE = 16, 2, 2
# Shaped as Qwen3-VL / Qwen3.5's preprocessor_config.json (there: shortest_edge 65536, longest_edge 16777216);
# bounds of 4096 and 20480 pixels here, so that tiny pictures are scaled up (the min branch) or down (max).
PREPROCESSOR = {
    "size": {"longest_edge": 20480, "shortest_edge": 4096},
    "patch_size": PATCH,
    "temporal_patch_size": TEMPORAL,
    "merge_size": MERGE,
    "image_mean": [0.5, 0.5, 0.5],
    "image_std": [0.5, 0.5, 0.5],
    "processor_class": "Qwen3VLProcessor",
    "image_processor_type": "Qwen2VLImageProcessorFast",
}

VISION = dict(
    model_type="qwen3_5_vision",
    depth=2,
    hidden_size=16,
    intermediate_size=32,
    num_heads=2,
    in_channels=3,
    patch_size=PATCH,
    spatial_merge_size=MERGE,
    temporal_patch_size=TEMPORAL,
    out_hidden_size=64,
    num_position_embeddings=36,  # a 6 x 6 grid, resampled bilinearly to each picture's
    hidden_act="gelu_pytorch_tanh",
    initializer_range=STD,
)
TEXT = dict(  # a DeltaNet layer, then full attention (tools/fixture_archs.py's qwen3_5, smaller)
    model_type="qwen3_5_text",
    hidden_size=64,
    intermediate_size=96,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    head_dim=32,
    layer_types=["linear_attention", "full_attention"],
    linear_num_key_heads=2,
    linear_num_value_heads=6,
    linear_key_head_dim=24,
    linear_value_head_dim=20,
    linear_conv_kernel_dim=4,
    rms_norm_eps=1e-6,
    max_position_embeddings=512,
    # Partial rotary 0.5: 16 of 32 dims turn, 8 frequencies, interleaved t h w t h w t h over the sections.
    rope_parameters={
        "rope_type": "default",
        "rope_theta": 10000.0,
        "partial_rotary_factor": 0.5,
        "mrope_section": [3, 3, 2],
        "mrope_interleaved": True,
    },
    tie_word_embeddings=False,
    bos_token_id=None,  # no eos: generation (HF's and the engine's) must never stop before NEW_TOKENS
    eos_token_id=None,
    pad_token_id=None,
    initializer_range=STD,
)

# The pictures: (file, PIL mode, width, height). smart_resize (factor 32) scales the first two up to the
# 4096-pixel minimum (64 x 96 and 128 x 64) and the third down to the 20480-pixel maximum (160 x 96).
IMAGES = [
    ("rgb_45x71.png", "RGB", 45, 71),
    ("rgba_110x33.png", "RGBA", 110, 33),
    ("rgb_197x121.png", "RGB", 197, 121),
]
PROMPTS = prompts(2, [0, 1])  # name -> (the pictures, the user message's content)


# ---- the tokenizer and the processor ----


def build_tokenizer():
    pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(PRETOKENIZE), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    added = SPECIALS[1:] + list(PICTURE_TOKENS.values())
    tok = train_bpe(pre_tokenizer, BPE_VOCAB, SPECIALS[:1], added, TRAINING_TEXT, normalizers.NFC())
    return PreTrainedTokenizerFast(
        tokenizer_object=tok,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        unk_token=None,
        model_max_length=TEXT["max_position_embeddings"],
        chat_template=CHAT_TEMPLATE,
    )


def save_processor_files(tokenizer, out):
    """preprocessor_config.json (as written above), tokenizer.json and tokenizer_config.json (the template in
    it; no picture-token keys: Qwen3VLProcessor's defaults name them, as for Qwen's own files)."""
    (out / "preprocessor_config.json").write_text(json.dumps(PREPROCESSOR, indent=2) + "\n")
    save_tokenizer_files(tokenizer, out, CHAT_TEMPLATE, "Qwen3VLProcessor")


class ImageOnlyProcessor(Qwen3VLProcessor):
    """Qwen3VLProcessor without its video processor (which needs torchvision): pictures and text only."""

    @classmethod
    def get_attributes(cls):
        return ["image_processor", "tokenizer"]


def load_processor(path):
    """The processor rebuilt from the saved files alone, with the PIL image processor."""
    image_processor = Qwen2VLImageProcessorPil.from_dict(json.loads((path / "preprocessor_config.json").read_text()))
    tokenizer = PreTrainedTokenizerFast.from_pretrained(path)
    assert tokenizer.chat_template == CHAT_TEMPLATE
    processor = ImageOnlyProcessor(image_processor, tokenizer, chat_template=CHAT_TEMPLATE)
    assert processor.image_processor.resample == 3  # the class's BICUBIC: the file names none
    assert processor.image_token == PICTURE_TOKENS["image_token"]
    return processor


# ---- the model ----


def model_config(tokenizer):
    ids = {key: tokenizer.convert_tokens_to_ids(token) for key, token in PICTURE_TOKENS.items()}
    text = {k: v for k, v in TEXT.items() if k != "model_type"}
    vision = {k: v for k, v in VISION.items() if k != "model_type"}
    return Qwen3_5Config(
        vision_config={"model_type": "qwen3_5_vision", **vision},
        text_config={"model_type": "qwen3_5_text", **text, "vocab_size": len(tokenizer)},
        image_token_id=ids["image_token"],
        video_token_id=ids["video_token"],
        vision_start_token_id=ids["vision_start_token"],
        vision_end_token_id=ids["vision_end_token"],
        tie_word_embeddings=False,
    )


def build_model(config, seed):
    """Random float32 weights: matrices, embeddings and biases N(0, STD) (DeltaNet's A_log as transformers
    initialises it, its dt_bias N(0, 1)); the vision LayerNorms' weights 1 + 0.1 N(0, 1); the text tower's
    (1 + w) RMSNorms 0.1 N(0, 1), but DeltaNet's gated norm (plain w) 1 + 0.1 N(0, 1)."""
    torch.manual_seed(seed)
    model = Qwen3_5ForConditionalGeneration(config).to(torch.float32)
    with torch.no_grad():
        for name, param in model.named_parameters():
            if name.endswith("A_log"):
                continue
            if "visual" in name and "norm" in name and name.endswith(".weight"):
                param.copy_(1 + 0.1 * torch.randn_like(param))
            elif name.endswith("linear_attn.norm.weight"):
                param.copy_(1 + 0.1 * torch.randn_like(param))
            elif name.endswith("norm.weight"):
                param.copy_(0.1 * torch.randn_like(param))
            elif name.endswith("dt_bias"):
                param.normal_(0.0, 1.0)
            else:
                param.normal_(0.0, STD)
    return model


# ---- the reference ----


def rendered(content):
    """The chat template, by hand, for one user message and the generation prompt."""
    image = "<|vision_start|><|image_pad|><|vision_end|>"
    parts = "".join(image if p["type"] == "image" else p["text"] for p in content)
    return f"<|im_start|>user\n{parts}<|im_end|>\n<|im_start|>assistant\n"


def expanded(text, grids):
    """The text with each <|image_pad|> repeated grid_h * grid_w / merge^2 times, written out."""
    pieces = text.split(PICTURE_TOKENS["image_token"])
    assert len(pieces) == len(grids) + 1
    out = [pieces[0]]
    for (t, h, w), rest in zip(grids, pieces[1:]):
        out += [PICTURE_TOKENS["image_token"] * (t * h * w // MERGE**2), rest]
    return "".join(out)


def image_reference(processor, picture, arrays, key):
    """What the processor makes of one picture alone: its grid (t, h, w in patches) and pixel values,
    [patches, 3 * temporal * patch^2] in merge-block order; one temporal frame is stored (the processor
    repeats a still picture's), checked equal to the other."""
    alone = processor.image_processor(images=[picture], return_tensors="np")
    pixel_values, grid = alone["pixel_values"], alone["image_grid_thw"][0].tolist()
    assert pixel_values.dtype == np.float32 and pixel_values.shape == (np.prod(grid), 3 * TEMPORAL * PATCH * PATCH)
    frames = pixel_values.reshape(-1, 3, TEMPORAL, PATCH, PATCH)
    assert all(np.array_equal(frames[:, :, 0], frames[:, :, t]) for t in range(1, TEMPORAL))
    arrays[key] = np.ascontiguousarray(frames[:, :, 0])
    return {"grid_thw": grid, "pixel_values": key, "pixel_values_shape": list(pixel_values.shape)}


@torch.no_grad()
def prompt_reference(model, sdpa, processor, images, indexes, content, arrays, key):
    """One prompt (the pictures `indexes` of `images`: their PIL images and references) through the model,
    or None when this seed is unusable for it."""
    pictures, image_refs = [images[0][i] for i in indexes], [images[1][i] for i in indexes]
    messages = [{"role": "user", "content": content}]
    text = processor.apply_chat_template(messages, add_generation_prompt=True)
    assert text == rendered(content), text
    inputs = processor(text=[text], images=pictures, return_tensors="pt")
    grids = inputs["image_grid_thw"].tolist()
    assert grids == [ref["grid_thw"] for ref in image_refs]
    prompt = expanded(text, grids)
    ids = inputs["input_ids"][0].tolist()
    assert ids == processor.tokenizer(prompt, add_special_tokens=False)["input_ids"]
    types = inputs["mm_token_type_ids"][0].tolist()
    assert types == [int(t == model.config.image_token_id) for t in ids]
    keys = ("input_ids", "attention_mask", "pixel_values", "image_grid_thw", "mm_token_type_ids")
    model_inputs = {k: inputs[k] for k in keys}

    positions, delta = model.model.get_rope_index(
        inputs["input_ids"], mm_token_type_ids=inputs["mm_token_type_ids"], image_grid_thw=inputs["image_grid_thw"]
    )
    features = torch.cat(model.get_image_features(inputs["pixel_values"], inputs["image_grid_thw"]).pooler_output)
    logits = model(**model_inputs).logits[0, -1]
    assert torch.allclose(sdpa(**model_inputs).logits[0, -1], logits, atol=1e-4), "eager and sdpa disagree"
    n = len(ids)
    plain_positions = torch.arange(n).view(1, 1, n).expand(3, 1, n)
    plain = model(**model_inputs, position_ids=plain_positions).logits[0, -1]
    position_effect = (plain - logits).abs().max().item()
    moved = (model(**dict(model_inputs, pixel_values=-inputs["pixel_values"])).logits[0, -1] - logits).abs().max()
    config = model.config
    greedy_ids, step_logits = greedy(
        model,
        model_inputs,
        [config.image_token_id, config.vision_start_token_id, config.vision_end_token_id],
        "mm_token_type_ids",
    )
    found = margins(greedy_ids, step_logits, moved.item())
    if found is None or position_effect < MIN_POSITION_EFFECT:
        return None
    arrays[f"{key}_image_features"] = features.numpy()
    return {
        "images": indexes,
        "messages": messages,
        "text": text,
        "prompt": prompt,
        "input_ids": ids,
        "mm_token_type_ids": types,
        "image_grid_thw": grids,
        "positions": positions[:, 0].tolist(),  # [3][tokens]: t, h, w (Qwen2VLModel.get_rope_index)
        "rope_delta": int(delta.item()),  # decode position p takes p + rope_delta in all three
        "pixel_values": [ref["pixel_values"] for ref in image_refs],
        "image_features": f"{key}_image_features",
        "image_features_shape": list(features.shape),
        **outcome(
            logits,
            {"plain_logits": f7(plain.numpy()), "position_effect": float(f"{position_effect:.4g}")},
            greedy_ids,
            found,
            moved.item(),
        ),
    }


def write_model_and_reference(out, processor, images, arrays, seed):
    """Save this seed's model, run the prompts through it loaded back; (prompts, arrays) or None."""
    save_model(build_model(model_config(processor.tokenizer), seed), out)
    model, sdpa = (load_model(Qwen3_5ForConditionalGeneration, out, attn) for attn in (ATTN, "sdpa"))
    return run_prompts(PROMPTS, arrays, lambda *prompt: prompt_reference(model, sdpa, processor, images, *prompt))


def check_saved_model(out):
    from safetensors import safe_open

    with safe_open(out / "model.safetensors", "pt") as f:
        names = set(f.keys())
        assert "lm_head.weight" in names, "the head should be stored (untied)"
        assert "model.visual.patch_embed.proj.weight" in names and "model.visual.pos_embed.weight" in names
        assert "model.language_model.embed_tokens.weight" in names
        assert all(f.get_tensor(n).dtype == torch.float32 for n in names)
    cfg = json.loads((out / "config.json").read_text())
    assert cfg["architectures"] == ["Qwen3_5ForConditionalGeneration"]
    return sorted(names)


SKIPPED = "near-tied, degenerate or blind to the pictures or their positions, next one"
CLASSES = ("Qwen3_5ForConditionalGeneration", "Qwen3VLProcessor (image processor Qwen2VLImageProcessorPil)")


def token_ids(config, processor):
    return {
        "vocab_size": len(processor.tokenizer),
        "image_token_id": config["image_token_id"],
        "vision_start_token_id": config["vision_start_token_id"],
        "vision_end_token_id": config["vision_end_token_id"],
    }


def main():
    make_fixture(__doc__, "tests/fixtures/qwen3_5vl-f32", "qwen3_5vl", sys.modules[__name__])


if __name__ == "__main__":
    main()
