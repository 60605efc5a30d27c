"""Generate tests/fixtures/smolvlm-f32/: a tiny random SmolVLM (transformers' SmolVLMForConditionalGeneration,
the Idefics3 family) with its processor's files, three synthetic test pictures and float32 reference outputs
of HF transformers, so Wisp's vision code can be tested against transformers without transformers.

    /work/refenv/bin/python tools/make_vision_fixtures.py [--out tests/fixtures/smolvlm-f32]

(any Python with torch, transformers 5, tokenizers, safetensors, numpy and Pillow; offline, deterministic,
a few seconds on CPU). It writes:

- config.json, generation_config.json, model.safetensors: the random model in float32;
- tokenizer.json, tokenizer_config.json: a tiny byte-level BPE (SmolLM2's pipeline) trained on TRAINING_TEXT,
  with SmolVLM's special and added tokens; the chat template is SmolVLM-256M-Instruct's;
- preprocessor_config.json, processor_config.json: the processor (size 64, tiles of 32, 4 tokens a tile);
  these and the processor's files are tools/smolvlm_processor.py's;
- images/*.png: three seeded synthetic pictures of odd sizes;
- reference.json + reference.npz: what SmolVLMProcessor makes of each picture, and for a one-image and a
  two-image prompt the model's image features, last logits and 16 greedy ids (tests/fixtures/README.md).

SmolVLMProcessor's video processor needs torchvision and its constructor num2words; neither is used for
images and text, so the processor is built without them (smolvlm_processor.ImageOnlyProcessor) and saved file
by file. A seed is skipped when a greedy step is near-tied (as tools/make_fixtures.py does), when greedy emits the
image token, or when the picture has too little effect on the logits.
"""

import json

import numpy as np
import torch
from smolvlm_processor import (
    IMAGE_SEQ_LEN,
    MAX_POSITIONS,
    PREPROCESSOR,
    build_processor,
    build_tokenizer,
    load_processor,
    save_processor_files,
)
from transformers import SmolVLMConfig, SmolVLMForConditionalGeneration
from transformers.models.smolvlm import processing_smolvlm
from transformers.models.smolvlm.image_processing_pil_smolvlm import SmolVLMImageProcessorPil
from vision_fixture_common import (
    ATTN,
    STD,
    find_seed,
    greedy,
    load_model,
    margins,
    outcome,
    prepare,
    prompts,
    run_prompts,
    save_model,
    write_pictures,
    write_reference,
)

FIRST_SEED = 20000

VISION = dict(
    hidden_size=32,
    intermediate_size=64,
    num_hidden_layers=2,
    num_attention_heads=2,
    num_channels=3,
    image_size=32,
    patch_size=8,
    hidden_act="gelu_pytorch_tanh",
    layer_norm_eps=1e-6,  # SmolVLM-256M's
    initializer_range=STD,
)
TEXT = dict(  # a tiny Llama; rope_theta, eps, untied head and SiLU as SmolVLM-256M's text model
    model_type="llama",
    hidden_size=64,
    intermediate_size=128,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    head_dim=16,
    max_position_embeddings=MAX_POSITIONS,  # 8192 in SmolVLM-256M: a capacity, small here so engines allocate little
    rms_norm_eps=1e-5,
    rope_parameters={"rope_type": "default", "rope_theta": 100000.0},
    hidden_act="silu",
    attention_bias=False,
    mlp_bias=False,
    tie_word_embeddings=False,
    initializer_range=STD,
    bos_token_id=None,  # no eos: generation (HF's and the engine's) must never stop before NEW_TOKENS
    eos_token_id=None,
    pad_token_id=None,
)
SCALE_FACTOR = 2

# The pictures: (file, PIL mode, width, height). Every picture's longest side is scaled to 64 (up or down),
# so with tiles of 32 every picture is split; the last is also processed with do_image_splitting false.
IMAGES = [
    ("rgb_45x71.png", "RGB", 45, 71),  # portrait: 64 x 40 -> 64 x 64, 2 x 2 tiles
    ("rgba_70x33.png", "RGBA", 70, 33),  # landscape, transparent parts: 30 x 64 -> 32 x 64, 1 x 2 tiles
    ("rgb_20x41.png", "RGB", 20, 41),  # narrow: 64 x 31 -> 64 x 32 (odd made even), 2 x 1 tiles
]
UNSPLIT_IMAGE = 2
ONE_IMAGE_TEXT = "Describe this picture."
PROMPTS = prompts(0, [1, 2])  # name -> (the pictures, the user message's content)


# ---- the model ----


def model_config(vocab_size, image_token_id):
    text = {k: v for k, v in TEXT.items() if k != "model_type"}
    return SmolVLMConfig(
        vision_config=dict(VISION),
        text_config={"model_type": "llama", **text, "vocab_size": vocab_size},
        scale_factor=SCALE_FACTOR,
        image_token_id=image_token_id,
        tie_word_embeddings=False,
        use_cache=True,
    )


def build_model(config, seed):
    """Random float32 weights: every matrix, embedding and bias N(0, STD), every norm weight 1 + 0.1 N(0, 1)
    (HF inits norms to 1 and biases to 0: a skipped norm weight or bias would go unnoticed)."""
    torch.manual_seed(seed)
    model = SmolVLMForConditionalGeneration(config).to(torch.float32)
    with torch.no_grad():
        for name, param in model.named_parameters():
            if name.endswith("norm.weight") or "layer_norm" in name or "layernorm" in name:
                if name.endswith(".weight"):
                    param.copy_(1 + 0.1 * torch.randn_like(param))
                else:
                    param.normal_(0.0, STD)
            else:
                param.normal_(0.0, STD)
    return model


def spell_pad_token_id(path):
    """transformers 5.24 saves SmolVLMConfig's deprecated top-level pad id as "_pad_token_id"; the hub's
    files (and transformers, reading them) spell it "pad_token_id" (128002, outside the vocabulary: unused)."""
    cfg = json.loads(path.read_text())
    if "_pad_token_id" in cfg:
        cfg["pad_token_id"] = cfg.pop("_pad_token_id")
    path.write_text(json.dumps(cfg, indent=2, sort_keys=True) + "\n")


@torch.no_grad()
def image_features(model, inputs):
    out = model.get_image_features(inputs["pixel_values"], inputs["pixel_attention_mask"], return_dict=True)
    (features,) = out.pooler_output  # one list entry per batch row; one row here
    return out.last_hidden_state, features


def check_pixel_shuffle(model):
    """The connector's pixel shuffle, spelled out: output token (I, J) of the (side/s)^2 grid (row-major) is
    the concatenation of the s x s patches (I*s + m, J*s + k) in row-major (m, k) order, each d wide."""
    side, s, d = 4, SCALE_FACTOR, VISION["hidden_size"]
    x = torch.randn(1, side * side, d, generator=torch.Generator().manual_seed(0))
    got = model.model.connector.pixel_shuffle(x, s)[0]
    grid = x[0].view(side, side, d)
    for i in range(side // s):
        for j in range(side // s):
            want = torch.cat([grid[i * s + m, j * s + k] for m in range(s) for k in range(s)])
            assert torch.equal(got[i * (side // s) + j], want)


# ---- the reference ----


def rendered(content):
    """The chat template, by hand, for one user message and the generation prompt."""
    parts = "".join("<image>" if p["type"] == "image" else p["text"] for p in content)
    sep = ":" if content[0]["type"] == "image" else ": "
    return f"<|im_start|>User{sep}{parts}<end_of_utterance>\nAssistant:"


def expanded_text(processor, text, rows, cols):
    """The text with each <image> replaced by the processor's own expansion (get_image_prompt_string)."""
    pieces = text.split(processor.image_token)
    assert len(pieces) == len(rows) + 1
    out = pieces[0]
    for r, c, piece in zip(rows, cols, pieces[1:]):
        out += processing_smolvlm.get_image_prompt_string(
            r, c, IMAGE_SEQ_LEN, processor.fake_image_token, processor.image_token, processor.global_image_token
        )
        out += piece
    return out


def image_reference(processor, picture, arrays, key, **image_kwargs):
    """What the processor makes of one picture alone, in a one-image user message."""
    content = [{"type": "image"}, {"type": "text", "text": ONE_IMAGE_TEXT}]
    processor.image_processor.resizes = []
    alone = processor.image_processor(images=[[picture]], return_row_col_info=True, return_tensors="np", **image_kwargs)
    resizes = list(processor.image_processor.resizes)
    _, text, inputs = process_with(processor, [picture], content, **image_kwargs)
    pixel_values = inputs["pixel_values"].numpy()
    mask = inputs["pixel_attention_mask"].numpy()
    assert pixel_values.dtype == np.float32 and np.array_equal(pixel_values, alone["pixel_values"])
    assert np.array_equal(mask, alone["pixel_attention_mask"]) and mask.all()
    rows, cols = alone["rows"][0][0], alone["cols"][0][0]
    prompt = expanded_text(processor, text, [rows], [cols])
    ids = inputs["input_ids"][0].tolist()
    assert ids == processor.tokenizer(prompt, add_special_tokens=False)["input_ids"]
    assert ids.count(processor.image_token_id) == pixel_values.shape[1] * IMAGE_SEQ_LEN
    arrays[f"{key}_pixel_values"] = pixel_values
    arrays[f"{key}_pixel_attention_mask"] = mask.astype(np.uint8)
    return {
        "rows": rows,
        "cols": cols,
        "num_images": pixel_values.shape[1],
        "resizes": resizes,
        "pixel_values": f"{key}_pixel_values",
        "pixel_values_shape": list(pixel_values.shape),
        "pixel_attention_mask": f"{key}_pixel_attention_mask",
        "pixel_attention_mask_shape": list(mask.shape),
        "text": text,
        "prompt": prompt,
        "input_ids": ids,
    }


def process_with(processor, pictures, content, **image_kwargs):
    messages = [{"role": "user", "content": content}]
    text = processor.apply_chat_template(messages, add_generation_prompt=True)
    assert text == rendered(content)
    inputs = processor(text=[text], images=[pictures], return_tensors="pt", **image_kwargs)
    return messages, text, inputs


def prompt_reference(model, sdpa, processor, images, indexes, content, arrays, key):
    """One prompt (the pictures `indexes` of `images`: their PIL images and references, their arrays in
    `arrays`) through the model, or None when this seed is unusable for it."""
    pictures, image_refs = [images[0][i] for i in indexes], [images[1][i] for i in indexes]
    messages, text, inputs = process_with(processor, pictures, content)
    pixel_values = inputs["pixel_values"].numpy()
    assert np.array_equal(pixel_values, np.concatenate([arrays[ref["pixel_values"]] for ref in image_refs], axis=1)), (
        "a prompt's pixel_values are not its pictures' own, in order"
    )
    prompt = expanded_text(processor, text, [r["rows"] for r in image_refs], [r["cols"] for r in image_refs])
    ids = inputs["input_ids"][0].tolist()
    assert ids == processor.tokenizer(prompt, add_special_tokens=False)["input_ids"]
    model_inputs = {k: inputs[k] for k in ("input_ids", "attention_mask", "pixel_values", "pixel_attention_mask")}

    hidden, features = image_features(model, model_inputs)
    with torch.no_grad():
        logits = model(**model_inputs).logits[0, -1]
    with torch.no_grad():
        assert torch.allclose(sdpa(**model_inputs).logits[0, -1], logits, atol=1e-4), "eager and sdpa disagree"
    # The picture must matter: the last logits move when its pixels do.
    with torch.no_grad():
        other = dict(model_inputs, pixel_values=-model_inputs["pixel_values"])
        moved = (model(**other).logits[0, -1] - logits).abs().max().item()
    greedy_ids, step_logits = greedy(model, model_inputs, [model.config.image_token_id])
    found = margins(greedy_ids, step_logits, moved)
    if found is None:
        return None
    mask = inputs["pixel_attention_mask"].numpy()
    assert np.array_equal(mask, np.concatenate([arrays[ref["pixel_attention_mask"]] for ref in image_refs], axis=1))
    arrays[f"{key}_vision_hidden"] = hidden.numpy()
    arrays[f"{key}_image_features"] = features.numpy()
    return {
        "images": indexes,
        "messages": messages,
        "text": text,
        "prompt": prompt,
        "input_ids": ids,
        # The prompt's pixel_values and pixel_attention_mask are its pictures' own, concatenated on axis 1
        # (the processor's for each picture alone): the arrays are not stored twice.
        "pixel_values": [ref["pixel_values"] for ref in image_refs],
        "pixel_values_shape": list(pixel_values.shape),
        "pixel_attention_mask": [ref["pixel_attention_mask"] for ref in image_refs],
        "vision_hidden": f"{key}_vision_hidden",
        "vision_hidden_shape": list(hidden.shape),
        "image_features": f"{key}_image_features",
        "image_features_shape": list(features.shape),
        **outcome(logits, {}, greedy_ids, found, moved),
    }


def write_model_and_reference(out, processor, images, arrays, seed):
    """Save this seed's model, run the prompts through it loaded back; (prompts, arrays) or None."""
    config = model_config(len(processor.tokenizer), processor.image_token_id)
    save_model(build_model(config, seed), out)
    spell_pad_token_id(out / "config.json")
    model, sdpa = (load_model(SmolVLMForConditionalGeneration, out, attn) for attn in (ATTN, "sdpa"))
    check_pixel_shuffle(model)
    return run_prompts(PROMPTS, arrays, lambda *prompt: prompt_reference(model, sdpa, processor, images, *prompt))


def check_saved_model(out):
    from safetensors import safe_open

    with safe_open(out / "model.safetensors", "pt") as f:
        names = set(f.keys())
        assert "lm_head.weight" in names, "the head should be stored (untied)"
        assert not torch.equal(f.get_tensor("lm_head.weight"), f.get_tensor("model.text_model.embed_tokens.weight"))
        assert all(f.get_tensor(n).dtype == torch.float32 for n in names)
    cfg = json.loads((out / "config.json").read_text())
    assert cfg["tie_word_embeddings"] is False and cfg["text_config"]["tie_word_embeddings"] is False
    return sorted(names)


def main():
    out = prepare(__doc__, "tests/fixtures/smolvlm-f32")

    tokenizer = build_tokenizer()
    save_processor_files(build_processor(tokenizer, SmolVLMImageProcessorPil(**PREPROCESSOR)), out)
    processor = load_processor(out)

    pictures, image_refs, arrays = write_pictures(
        out, IMAGES, lambda picture, arrays, index: image_reference(processor, picture, arrays, f"image{index}")
    )
    unsplit = {"image": UNSPLIT_IMAGE, "do_image_splitting": False}
    unsplit.update(image_reference(processor, pictures[UNSPLIT_IMAGE], arrays, "unsplit", do_image_splitting=False))
    assert (unsplit["rows"], unsplit["cols"], unsplit["num_images"]) == (0, 0, 1)
    assert all(ref["rows"] * ref["cols"] > 0 for ref in image_refs), "every picture should be split"

    seed, (prompts, prompt_arrays) = find_seed(
        "smolvlm",
        FIRST_SEED,
        lambda seed: write_model_and_reference(out, processor, (pictures, image_refs), arrays, seed),
        "near-tied, degenerate or blind to the picture, trying the next one",
    )
    tensor_names = check_saved_model(out)

    classes = ("SmolVLMForConditionalGeneration", "SmolVLMProcessor (image processor SmolVLMImageProcessorPil)")
    ids = {
        "vocab_size": len(processor.tokenizer),
        "image_token_id": processor.image_token_id,
        "image_seq_len": IMAGE_SEQ_LEN,
    }
    rest = {
        "one_image_text": ONE_IMAGE_TEXT,
        "images": image_refs,
        "unsplit": unsplit,
        "prompts": prompts,
        "tensors": tensor_names,
    }
    write_reference(out, "smolvlm", seed, classes, ids, rest, {**arrays, **prompt_arrays})


if __name__ == "__main__":
    main()
