"""Generate tests/fixtures/gemma3vl-f32/: a tiny random Gemma 3 vision-language model (transformers'
Gemma3ForConditionalGeneration: a SigLIP tower, Gemma3MultiModalProjector, a Gemma 3 text tower) with its
processor's files, three synthetic test pictures and float32 reference outputs of HF transformers, so Wisp's
Gemma 3 picture path can be tested against transformers without transformers.

    /work/refenv/bin/python tools/make_gemma3_vision_fixture.py [--out tests/fixtures/gemma3vl-f32]

(any Python with torch, transformers 5, tokenizers, safetensors, numpy and Pillow; offline, deterministic, a
few seconds on CPU). It writes:

- config.json, generation_config.json, model.safetensors: the random model in float32 (untied LM head: a
  random tied Gemma repeats one token);
- tokenizer.json, tokenizer_config.json: a tiny byte-level BPE with Gemma's special and picture tokens
  (<start_of_image>, <image_soft_token>, <end_of_image>) and Gemma 3's chat template;
- preprocessor_config.json, processor_config.json: as google/gemma-3-4b-it's (nulls included), 84 x 84;
- images/*.png: three seeded synthetic pictures of odd sizes (tools/make_vision_fixtures.py's);
- reference.json + reference.npz: what Gemma3Processor makes of each picture (the PIL backend, whose
  Pillow resize Wisp reproduces; torchvision is not installed), and for a one-picture and a two-picture
  prompt the tower's output, the image features, the last logits with transformers' bidirectional picture
  mask (token_type_ids) and without it (causal), and 16 greedy ids.

A seed is skipped when a greedy step is near-tied, when greedy emits a picture token, when the pictures have
too little effect on the logits, or when the bidirectional mask changes them too little to be tested.
"""

import json
import sys

import numpy as np
import torch
from tokenizers import pre_tokenizers
from transformers import (
    Gemma3Config,
    Gemma3ForConditionalGeneration,
    Gemma3Processor,
    PreTrainedTokenizerFast,
)
from transformers.models.gemma3.image_processing_pil_gemma3 import Gemma3ImageProcessorPil
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

MIN_MASK_EFFECT = 0.02  # ... and by more than this between the bidirectional and the causal picture mask
FIRST_SEED = 30000


# google/gemma-3-4b-it's chat template (tokenizer_config.json's), verbatim.
CHAT_TEMPLATE = (
    "{{ bos_token }}\n{%- if messages[0]['role'] == 'system' -%}\n    {%- if messages[0]['content'] is string -%}\n"
    "        {%- set first_user_prefix = messages[0]['content'] + '\\n\\n' -%}\n    {%- else -%}\n"
    "        {%- set first_user_prefix = messages[0]['content'][0]['text'] + '\\n\\n' -%}\n    {%- endif -%}\n"
    '    {%- set loop_messages = messages[1:] -%}\n{%- else -%}\n    {%- set first_user_prefix = "" -%}\n'
    "    {%- set loop_messages = messages -%}\n{%- endif -%}\n{%- for message in loop_messages -%}\n"
    "    {%- if (message['role'] == 'user') != (loop.index0 % 2 == 0) -%}\n"
    '        {{ raise_exception("Conversation roles must alternate user/assistant/user/assistant/...") }}\n'
    "    {%- endif -%}\n    {%- if (message['role'] == 'assistant') -%}\n        {%- set role = \"model\" -%}\n"
    "    {%- else -%}\n        {%- set role = message['role'] -%}\n    {%- endif -%}\n"
    "    {{ '<start_of_turn>' + role + '\\n' + (first_user_prefix if loop.first else \"\") }}\n"
    "    {%- if message['content'] is string -%}\n        {{ message['content'] | trim }}\n"
    "    {%- elif message['content'] is iterable -%}\n        {%- for item in message['content'] -%}\n"
    "            {%- if item['type'] == 'image' -%}\n                {{ '<start_of_image>' }}\n"
    "            {%- elif item['type'] == 'text' -%}\n                {{ item['text'] | trim }}\n"
    "            {%- endif -%}\n        {%- endfor -%}\n    {%- else -%}\n"
    '        {{ raise_exception("Invalid content type") }}\n    {%- endif -%}\n'
    "    {{ '<end_of_turn>\\n' }}\n{%- endfor -%}\n{%- if add_generation_prompt -%}\n"
    "    {{'<start_of_turn>model\\n'}}\n{%- endif -%}\n"
)

# The tokenizer: Gemma's specials first (<pad> 0, <eos> 1, <bos> 2, <unk> 3, as the real vocabulary), the
# byte alphabet and BPE merges, then the turn and picture tokens.
SPECIALS = ["<pad>", "<eos>", "<bos>", "<unk>"]
BPE_VOCAB = 330
PICTURE_TOKENS = {"boi_token": "<start_of_image>", "eoi_token": "<end_of_image>", "image_token": "<image_soft_token>"}
ADDED = ["<start_of_turn>", "<end_of_turn>", *PICTURE_TOKENS.values()]
TRAINING_TEXT = [
    "user\nDescribe this picture in one sentence.\n\nmodel\nA small red square on a blue sky.",
    "user\nWhat is in this image?\n\nmodel\nThe cat sat on the mat and the dog ran in the park.",
    "user\nCompare these two images.\n\nmodel\nThe first is bright and the second is dark.",
    "How many colours are there? There are 3 colours: red, green and blue.",
]

IMAGE_SIZE = 84  # 6 x 6 patches of 14, pooled 2 x 2 into 3 x 3 = 9 tokens
MM_TOKENS = 9
# google/gemma-3-4b-it's preprocessor_config.json (896 there), nulls as the hub file has them: the
# processor's defaults (do_convert_rgb true, pan-and-scan off) decide those.
PREPROCESSOR = {
    "do_convert_rgb": None,
    "do_normalize": True,
    "do_pan_and_scan": None,
    "do_rescale": True,
    "do_resize": True,
    "image_mean": [0.5, 0.5, 0.5],
    "image_processor_type": "Gemma3ImageProcessor",
    "image_seq_length": MM_TOKENS,
    "image_std": [0.5, 0.5, 0.5],
    "pan_and_scan_max_num_crops": None,
    "pan_and_scan_min_crop_size": None,
    "pan_and_scan_min_ratio_to_activate": None,
    "processor_class": "Gemma3Processor",
    "resample": 2,  # PIL's BILINEAR
    "rescale_factor": 1 / 255,
    "size": {"height": IMAGE_SIZE, "width": IMAGE_SIZE},
}

VISION = dict(
    model_type="siglip_vision_model",
    hidden_size=32,
    intermediate_size=64,
    num_hidden_layers=2,
    num_attention_heads=2,
    image_size=IMAGE_SIZE,
    patch_size=14,
    layer_norm_eps=1e-6,
    hidden_act="gelu_pytorch_tanh",
    vision_use_head=False,
)
TEXT = dict(  # as tools/fixture_archs.py's gemma3, smaller; layer 0 slides (window 8), layer 1 is full
    model_type="gemma3_text",
    hidden_size=64,
    intermediate_size=96,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    head_dim=16,
    query_pre_attn_scalar=16,
    rms_norm_eps=1e-6,
    sliding_window=8,
    layer_types=["sliding_attention", "full_attention"],
    rope_parameters={
        "full_attention": {"rope_type": "linear", "factor": 8.0, "rope_theta": 1000000.0},
        "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
    },
    max_position_embeddings=256,
    hidden_activation="gelu_pytorch_tanh",
    tie_word_embeddings=False,
    bos_token_id=None,  # no eos: generation (HF's and the engine's) must never stop before NEW_TOKENS
    eos_token_id=None,
    pad_token_id=None,
    initializer_range=STD,
)

# The pictures: (file, PIL mode, width, height); each is resized to 84 x 84 (up in one direction, down in
# the other for the first two), the RGBA one composited onto white first.
IMAGES = [
    ("rgb_45x71.png", "RGB", 45, 71),
    ("rgba_110x33.png", "RGBA", 110, 33),
    ("rgb_97x90.png", "RGB", 97, 90),
]
PROMPTS = prompts(0, [1, 2])  # name -> (the pictures, the user message's content)


# ---- the tokenizer and the processor ----


def build_tokenizer():
    pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok = train_bpe(pre_tokenizer, BPE_VOCAB, SPECIALS, ADDED, TRAINING_TEXT)
    return PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token="<bos>",
        eos_token="<eos>",
        pad_token="<pad>",
        unk_token="<unk>",
        extra_special_tokens=dict(PICTURE_TOKENS),
        model_max_length=TEXT["max_position_embeddings"],
        chat_template=CHAT_TEMPLATE,
    )


def save_processor_files(tokenizer, out):
    """The processor's files as google/gemma-3-4b-it has them: preprocessor_config.json (written here, as
    the hub's), processor_config.json (image_seq_length), tokenizer.json and tokenizer_config.json (the
    picture tokens as top-level keys, as the hub's and transformers 5's files name them)."""
    (out / "preprocessor_config.json").write_text(json.dumps(PREPROCESSOR, indent=2, sort_keys=True) + "\n")
    proc = {"image_seq_length": MM_TOKENS, "processor_class": "Gemma3Processor"}
    (out / "processor_config.json").write_text(json.dumps(proc, indent=2) + "\n")
    save_tokenizer_files(tokenizer, out, CHAT_TEMPLATE, "Gemma3Processor", **PICTURE_TOKENS)


def load_processor(path):
    """The processor rebuilt from the saved files alone, with the PIL image processor."""
    image_processor = Gemma3ImageProcessorPil.from_dict(json.loads((path / "preprocessor_config.json").read_text()))
    tokenizer = PreTrainedTokenizerFast.from_pretrained(path)
    assert tokenizer.chat_template == CHAT_TEMPLATE
    assert (tokenizer.boi_token, tokenizer.eoi_token, tokenizer.image_token) == tuple(PICTURE_TOKENS.values())
    seq_len = json.loads((path / "processor_config.json").read_text())["image_seq_length"]
    processor = Gemma3Processor(image_processor, tokenizer, chat_template=CHAT_TEMPLATE, image_seq_length=seq_len)
    assert processor.image_processor.backend == "pil" and processor.image_processor.resample == 2
    return processor


# ---- the model ----


def model_config(tokenizer):
    ids = {key: tokenizer.convert_tokens_to_ids(token) for key, token in PICTURE_TOKENS.items()}
    text = {k: v for k, v in TEXT.items() if k != "model_type"}
    return Gemma3Config(
        vision_config=dict(VISION),
        text_config={"model_type": "gemma3_text", **text, "vocab_size": len(tokenizer)},
        mm_tokens_per_image=MM_TOKENS,
        boi_token_index=ids["boi_token"],
        eoi_token_index=ids["eoi_token"],
        image_token_index=ids["image_token"],
        tie_word_embeddings=False,
    )


def build_model(config, seed):
    """Random float32 weights: every matrix, embedding and bias N(0, STD); the SigLIP LayerNorms' weights
    1 + 0.1 N(0, 1); Gemma's (1 + w) RMSNorms (mm_soft_emb_norm included) 0.1 N(0, 1)."""
    torch.manual_seed(seed)
    model = Gemma3ForConditionalGeneration(config).to(torch.float32)
    with torch.no_grad():
        for name, param in model.named_parameters():
            layer_norm = "vision_tower" in name and ("layer_norm" in name or "layernorm" in name)
            if layer_norm and name.endswith(".weight"):
                param.copy_(1 + 0.1 * torch.randn_like(param))
            elif "norm" in name and not layer_norm:
                param.copy_(0.1 * torch.randn_like(param))
            else:
                param.normal_(0.0, STD)
    return model


# ---- the reference ----


def rendered(content):
    """The chat template, by hand, for one user message and the generation prompt."""
    parts = "".join("<start_of_image>" if p["type"] == "image" else p["text"].strip() for p in content)
    return f"<bos><start_of_turn>user\n{parts}<end_of_turn>\n<start_of_turn>model\n"


def expanded(processor, text):
    """The text with each <start_of_image> replaced by the processor's full image sequence, written out."""
    soft = PICTURE_TOKENS["image_token"] * MM_TOKENS
    full = f"\n\n{PICTURE_TOKENS['boi_token']}{soft}{PICTURE_TOKENS['eoi_token']}\n\n"
    assert processor.full_image_sequence == full
    return text.replace(PICTURE_TOKENS["boi_token"], full)


def process_with(processor, pictures, content):
    messages = [{"role": "user", "content": content}]
    text = processor.apply_chat_template(messages, add_generation_prompt=True)
    assert text == rendered(content), text
    inputs = processor(text=[text], images=[pictures], return_tensors="pt", add_special_tokens=False)
    return messages, text, inputs


def image_reference(processor, picture, arrays, key):
    """What the processor makes of one picture alone. Through the processor, not its image processor: the
    hub's null do_convert_rgb is the processor's default (true) there, but false in the image processor
    called alone, which then keeps an RGBA picture's 4 channels (and fails to normalize them)."""
    alone = processor(text=[PICTURE_TOKENS["boi_token"]], images=[[picture]], return_tensors="np")
    pixel_values = alone["pixel_values"]
    assert pixel_values.dtype == np.float32 and pixel_values.shape == (1, 3, IMAGE_SIZE, IMAGE_SIZE)
    arrays[key] = pixel_values
    return {"pixel_values": key, "pixel_values_shape": list(pixel_values.shape)}


@torch.no_grad()
def prompt_reference(model, sdpa, processor, images, indexes, content, arrays, key):
    """One prompt (the pictures `indexes` of `images`: their PIL images and references) through the model,
    or None when this seed is unusable for it."""
    pictures, image_refs = [images[0][i] for i in indexes], [images[1][i] for i in indexes]
    messages, text, inputs = process_with(processor, pictures, content)
    pixel_values = inputs["pixel_values"].numpy()
    assert np.array_equal(pixel_values, np.concatenate([arrays[ref["pixel_values"]] for ref in image_refs]))
    prompt = expanded(processor, text)
    ids = inputs["input_ids"][0].tolist()
    assert ids == processor.tokenizer(prompt, add_special_tokens=False)["input_ids"]
    types = inputs["token_type_ids"][0].tolist()
    assert types == [int(t == model.config.image_token_id) for t in ids]
    model_inputs = {k: inputs[k] for k in ("input_ids", "attention_mask", "pixel_values", "token_type_ids")}

    image_out = model.get_image_features(inputs["pixel_values"], return_dict=True)
    hidden, features = image_out.last_hidden_state, image_out.pooler_output
    logits = model(**model_inputs).logits[0, -1]
    assert torch.allclose(sdpa(**model_inputs).logits[0, -1], logits, atol=1e-4), "eager and sdpa disagree"
    causal = model(**{k: v for k, v in model_inputs.items() if k != "token_type_ids"}).logits[0, -1]
    mask_effect = (causal - logits).abs().max().item()
    moved = (model(**dict(model_inputs, pixel_values=-inputs["pixel_values"])).logits[0, -1] - logits).abs().max()
    greedy_ids, step_logits = greedy(
        model,
        model_inputs,
        [model.config.image_token_id, model.config.boi_token_id, model.config.eoi_token_id],
        "token_type_ids",
    )
    found = margins(greedy_ids, step_logits, moved.item())
    if found is None or mask_effect < MIN_MASK_EFFECT:
        return None
    arrays[f"{key}_vision_hidden"] = hidden.numpy()
    arrays[f"{key}_image_features"] = features.numpy()
    return {
        "images": indexes,
        "messages": messages,
        "text": text,
        "prompt": prompt,
        "input_ids": ids,
        "token_type_ids": types,
        # The prompt's pixel_values are its pictures' own, concatenated (the processor's for each alone).
        "pixel_values": [ref["pixel_values"] for ref in image_refs],
        "pixel_values_shape": list(pixel_values.shape),
        "vision_hidden": f"{key}_vision_hidden",
        "vision_hidden_shape": list(hidden.shape),
        "image_features": f"{key}_image_features",
        "image_features_shape": list(features.shape),
        **outcome(
            logits,
            {"causal_logits": f7(causal.numpy()), "mask_effect": float(f"{mask_effect:.4g}")},
            greedy_ids,
            found,
            moved.item(),
        ),
    }


def check_projector(model):
    """Gemma3MultiModalProjector, spelled out: a 2 x 2 average pool of the 6 x 6 patch grid (row-major), the
    (1 + w) RMSNorm, then x @ mm_input_projection_weight ([vision hidden, text hidden], not nn.Linear's)."""
    projector = model.model.multi_modal_projector
    side, k, d = 6, 2, VISION["hidden_size"]
    x = torch.randn(1, side * side, d, generator=torch.Generator().manual_seed(0))
    grid = x[0].view(side, side, d)
    pooled = torch.stack(
        [
            grid[i * k : (i + 1) * k, j * k : (j + 1) * k].mean((0, 1))
            for i in range(side // k)
            for j in range(side // k)
        ]
    )
    eps = projector.mm_soft_emb_norm.eps
    normed = pooled * torch.rsqrt(pooled.pow(2).mean(-1, keepdim=True) + eps) * (1 + projector.mm_soft_emb_norm.weight)
    want = normed @ projector.mm_input_projection_weight
    assert projector.mm_input_projection_weight.shape == (d, TEXT["hidden_size"])
    assert torch.allclose(projector(x)[0], want, atol=1e-5)


def write_model_and_reference(out, processor, images, arrays, seed):
    """Save this seed's model, run the prompts through it loaded back; (prompts, arrays) or None."""
    save_model(build_model(model_config(processor.tokenizer), seed), out)
    model, sdpa = (load_model(Gemma3ForConditionalGeneration, out, attn) for attn in (ATTN, "sdpa"))
    check_projector(model)
    return run_prompts(PROMPTS, arrays, lambda *prompt: prompt_reference(model, sdpa, processor, images, *prompt))


def check_saved_model(out):
    from safetensors import safe_open

    with safe_open(out / "model.safetensors", "pt") as f:
        names = set(f.keys())
        # transformers 5.24 saves the hub's older layout (language_model.model.*, language_model.lm_head, but
        # vision_tower.* without the hub's vision_model.: SiglipVisionModel's prefix is dropped).
        assert "language_model.lm_head.weight" in names, "the head should be stored (untied)"
        assert "vision_tower.embeddings.patch_embedding.weight" in names
        assert all(f.get_tensor(n).dtype == torch.float32 for n in names)
    cfg = json.loads((out / "config.json").read_text())
    assert cfg["architectures"] == ["Gemma3ForConditionalGeneration"] and cfg["mm_tokens_per_image"] == MM_TOKENS
    return sorted(names)


SKIPPED = "near-tied, degenerate or blind to the pictures or their mask, next one"
CLASSES = ("Gemma3ForConditionalGeneration", "Gemma3Processor (image processor Gemma3ImageProcessorPil)")


def token_ids(config, processor):
    return {
        "vocab_size": len(processor.tokenizer),
        "image_token_id": config["image_token_index"],
        "boi_token_id": config["boi_token_index"],
        "eoi_token_id": config["eoi_token_index"],
        "mm_tokens_per_image": MM_TOKENS,
    }


def main():
    make_fixture(__doc__, "tests/fixtures/gemma3vl-f32", "gemma3vl", sys.modules[__name__])


if __name__ == "__main__":
    main()
