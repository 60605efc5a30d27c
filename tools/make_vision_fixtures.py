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
- images/*.png: three seeded synthetic pictures of odd sizes;
- reference.json + reference.npz: what SmolVLMProcessor makes of each picture, and for a one-image and a
  two-image prompt the model's image features, last logits and 16 greedy ids (tests/fixtures/README.md).

SmolVLMProcessor's video processor needs torchvision and its constructor num2words; neither is used for
images and text, so the processor is built without them (ImageOnlyProcessor) and saved file by file.
A seed is skipped when a greedy step is near-tied (as tools/make_fixtures.py does), when greedy emits the
image token, or when the picture has too little effect on the logits.
"""

import argparse
import json
import shutil
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import torch
import transformers
from make_fixtures import min_margins
from PIL import Image
from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import GenerationConfig, PreTrainedTokenizerFast, SmolVLMConfig, SmolVLMForConditionalGeneration
from transformers.models.smolvlm import processing_smolvlm
from transformers.models.smolvlm.image_processing_pil_smolvlm import SmolVLMImageProcessorPil

NEW_TOKENS = 16
MIN_REL_MARGIN = 1e-3  # (top1 - top2) / max|logit| at every greedy step, as make_fixtures.py
MIN_DISTINCT_GREEDY = 4
MIN_IMAGE_EFFECT = 0.05  # the last logits must move by more than this (max abs) when the picture changes
ATTN = "eager"
FIRST_SEED = 20000
STD = 0.2  # weights' N(0, STD): as make_fixtures.py's initializer_range (0.02 gives near-tied logits)

# SmolVLM-256M-Instruct's chat template (Idefics3's; SmolVLM2's adds a video branch). Message contents must
# be lists of parts: a plain string content fails on content[0]['type'].
CHAT_TEMPLATE = (
    "<|im_start|>{% for message in messages %}{{message['role'] | capitalize}}"
    "{% if message['content'][0]['type'] == 'image' %}{{':'}}{% else %}{{': '}}{% endif %}"
    "{% for line in message['content'] %}{% if line['type'] == 'text' %}{{line['text']}}"
    "{% elif line['type'] == 'image' %}{{ '<image>' }}{% endif %}{% endfor %}<end_of_utterance>\n"
    "{% endfor %}{% if add_generation_prompt %}{{ 'Assistant:' }}{% endif %}"
)

# The tokenizer: SmolLM2's specials first (ids 0-2), the byte alphabet and BPE merges, then SmolVLM's added
# tokens in the real vocabulary's order (<global-img>, the 36 <row_R_col_C>, the fake token, <image>, ...,
# <end_of_utterance> last).
SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
BPE_VOCAB = 336  # specials + 256 bytes + 77 merges; with the 40 added tokens the vocabulary is 376
ROW_COL = [f"<row_{r}_col_{c}>" for r in range(1, 7) for c in range(1, 7)]
ADDED = ["<global-img>", *ROW_COL, "<fake_token_around_image>", "<image>", "<end_of_utterance>"]
NAMED_TOKENS = {  # tokenizer_config.json's named tokens, as the SmolVLM repos name them
    "end_of_utterance_token": "<end_of_utterance>",
    "fake_image_token": "<fake_token_around_image>",
    "global_image_token": "<global-img>",
    "image_token": "<image>",
}
TRAINING_TEXT = [
    "User: Describe this picture in one sentence.\nAssistant: A small red square on a blue sky.",
    "User: What is in this image?\nAssistant: The cat sat on the mat and the dog ran in the park.",
    "User: Compare these two images.\nAssistant: The first is bright and the second is dark.",
    "User: How many colours are there? Assistant: There are 3 colours: red, green and blue.",
    "The picture shows a house, a tree and the sun. This image has a white background.",
]

# The processor: SmolVLM-256M-Instruct's preprocessor_config.json with size and max_image_size scaled down.
PREPROCESSOR = {
    "do_convert_rgb": True,
    "do_image_splitting": True,
    "do_normalize": True,
    "do_pad": True,
    "do_rescale": True,
    "do_resize": True,
    "image_mean": [0.5, 0.5, 0.5],
    "image_std": [0.5, 0.5, 0.5],
    "max_image_size": {"longest_edge": 32},
    "resample": 1,  # PIL's LANCZOS
    "rescale_factor": 1 / 255,
    "size": {"longest_edge": 64},
}
IMAGE_SEQ_LEN = 4  # (32 // 8) ** 2 / 2 ** 2

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
    max_position_embeddings=512,  # 8192 in SmolVLM-256M: a capacity, small here so engines allocate little
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
PROMPTS = {  # name -> (the pictures, the user message's content)
    "one_image": ([0], [{"type": "image"}, {"type": "text", "text": "What is in this image?"}]),
    "two_images": (
        [1, 2],
        [
            {"type": "text", "text": "Compare"},
            {"type": "image"},
            {"type": "text", "text": "and"},
            {"type": "image"},
            {"type": "text", "text": "in one sentence."},
        ],
    ),
}


def f7(values):
    """float32 values as JSON numbers with 7 significant digits (as make_fixtures.py)."""
    return [float(f"{x:.7g}") for x in np.asarray(values, dtype=np.float32).ravel().tolist()]


def dumps(value, indent=""):
    """JSON with one key a line and lists of numbers or strings on one line."""
    inner = indent + " "
    if isinstance(value, dict) and value:
        items = [f"{inner}{json.dumps(k)}: {dumps(v, inner)}" for k, v in value.items()]
        return "{\n" + ",\n".join(items) + "\n" + indent + "}"
    if isinstance(value, list) and any(isinstance(v, (dict, list)) for v in value):
        return "[\n" + ",\n".join(inner + dumps(v, inner) for v in value) + "\n" + indent + "]"
    return json.dumps(value)


# ---- the tokenizer and the processor ----


def build_tokenizer():
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [pre_tokenizers.Digits(individual_digits=True), pre_tokenizers.ByteLevel(add_prefix_space=False)]
    )
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=BPE_VOCAB,
        special_tokens=SPECIALS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(TRAINING_TEXT, trainer)
    assert tok.get_vocab_size() == BPE_VOCAB, f"the training text gives only {tok.get_vocab_size()} tokens"
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in ADDED])
    return PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token="<|im_start|>",
        eos_token="<end_of_utterance>",
        pad_token="<|im_end|>",
        unk_token="<|endoftext|>",
        extra_special_tokens=NAMED_TOKENS,
        model_max_length=TEXT["max_position_embeddings"],
        chat_template=CHAT_TEMPLATE,
    )


class ImageOnlyProcessor(processing_smolvlm.SmolVLMProcessor):
    """SmolVLMProcessor with a stand-in for its video processor (a torchvision class, and torchvision is not
    needed for images): the image and text paths are the processor's own."""

    def check_argument_for_proper_class(self, argument_name, argument):
        if argument_name == "video_processor":
            return type(argument)
        return super().check_argument_for_proper_class(argument_name, argument)


class RecordingImageProcessor(SmolVLMImageProcessorPil):
    """The PIL image processor, noting each resize's input and output (height, width)."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.resizes = []

    def resize(self, image, size, resample=None, **kwargs):
        out = super().resize(image, size, resample=resample, **kwargs)
        self.resizes.append([list(image.shape[-2:]), list(out.shape[-2:])])
        return out


def build_processor(tokenizer, image_processor):
    if processing_smolvlm.num2words is None:  # used for videos only; the constructor insists on it
        processing_smolvlm.num2words = str
    video = SimpleNamespace(num_frames=None, fps=None)  # apply_chat_template reads these two
    return ImageOnlyProcessor(
        image_processor, tokenizer, video, image_seq_len=IMAGE_SEQ_LEN, chat_template=CHAT_TEMPLATE
    )


def save_processor_files(processor, out):
    """The processor's files as the SmolVLM repos have them: preprocessor_config.json (the image
    processor's), processor_config.json (image_seq_len), tokenizer.json and tokenizer_config.json (whose
    extra_special_tokens object names the image tokens, as the hub's SmolVLM2 files do; transformers 5
    itself writes them as top-level keys and an empty extra_special_tokens list)."""
    image_processor = SmolVLMImageProcessorPil(**PREPROCESSOR)
    image_processor.save_pretrained(out)
    pre = json.loads((out / "preprocessor_config.json").read_text())
    pre["processor_class"] = "SmolVLMProcessor"
    (out / "preprocessor_config.json").write_text(json.dumps(pre, indent=2, sort_keys=True) + "\n")
    proc = {"image_seq_len": IMAGE_SEQ_LEN, "processor_class": "SmolVLMProcessor"}
    (out / "processor_config.json").write_text(json.dumps(proc, indent=2) + "\n")
    processor.tokenizer.save_pretrained(out)
    (out / "chat_template.jinja").unlink(missing_ok=True)  # the template lives in tokenizer_config.json
    cfg_path = out / "tokenizer_config.json"
    cfg = json.loads(cfg_path.read_text())
    cfg["chat_template"] = CHAT_TEMPLATE
    cfg["extra_special_tokens"] = dict(NAMED_TOKENS)
    cfg["additional_special_tokens"] = ["<fake_token_around_image>", "<image>", "<end_of_utterance>"]
    cfg["processor_class"] = "SmolVLMProcessor"
    cfg_path.write_text(json.dumps(cfg, indent=2, sort_keys=True) + "\n")


def load_processor(path):
    """The processor rebuilt from the saved files alone (its image processor recording its resizes)."""
    image_processor = RecordingImageProcessor.from_dict(json.loads((path / "preprocessor_config.json").read_text()))
    tokenizer = PreTrainedTokenizerFast.from_pretrained(path)
    assert tokenizer.chat_template == CHAT_TEMPLATE
    seq_len = json.loads((path / "processor_config.json").read_text())["image_seq_len"]
    assert seq_len == IMAGE_SEQ_LEN
    processor = build_processor(tokenizer, image_processor)
    assert processor.image_processor.backend == "pil" and processor.image_processor.resample == 1
    assert (processor.fake_image_token, processor.image_token, processor.global_image_token) == (
        NAMED_TOKENS["fake_image_token"],
        NAMED_TOKENS["image_token"],
        NAMED_TOKENS["global_image_token"],
    )
    return processor


# ---- the pictures ----


def make_image(index, mode, width, height):
    """Smooth gradients, solid blocks (sharp edges: LANCZOS rings and clips) and noise, from a seeded RNG;
    the RGBA one is opaque, fully transparent and half transparent in places."""
    rng = np.random.default_rng(1000 + index)
    y, x = np.mgrid[0:height, 0:width].astype(np.float64)
    rgb = np.stack(
        [
            255 * x / max(width - 1, 1),
            255 * y / max(height - 1, 1),
            127.5 + 127.5 * np.sin((x + 2 * y) / 5.0),
        ],
        axis=-1,
    )
    for _ in range(3):
        top, left = rng.integers(0, height - 4), rng.integers(0, width - 4)
        rgb[top : top + rng.integers(3, height // 2), left : left + rng.integers(3, width // 2)] = rng.integers(
            0, 256, 3
        )
    rgb += rng.normal(0, 24, rgb.shape)
    pixels = np.clip(np.rint(rgb), 0, 255).astype(np.uint8)
    if mode == "RGBA":
        alpha = np.full((height, width), 255, np.uint8)
        alpha[:, : width // 4] = 0  # transparent: becomes white whatever its colour
        alpha[height // 3 : 2 * height // 3, width // 2 :] = rng.integers(
            1, 255, (2 * height // 3 - height // 3, width - width // 2)
        )
        pixels = np.concatenate([pixels, alpha[..., None]], axis=-1)
    return Image.fromarray(pixels, mode)


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


def load_model(path, attn=ATTN):
    model = SmolVLMForConditionalGeneration.from_pretrained(path, dtype=torch.float32, attn_implementation=attn)
    return model.eval()


@torch.no_grad()
def image_features(model, inputs):
    out = model.get_image_features(inputs["pixel_values"], inputs["pixel_attention_mask"], return_dict=True)
    (features,) = out.pooler_output  # one list entry per batch row; one row here
    return out.last_hidden_state, features


@torch.no_grad()
def greedy(model, inputs):
    """16 greedy ids plus their step logits, cross-checked against a cache-free recompute of the whole
    sequence with the pictures."""
    gen_cfg = GenerationConfig(
        max_new_tokens=NEW_TOKENS,
        do_sample=False,
        return_dict_in_generate=True,
        output_logits=True,
        bos_token_id=None,
        eos_token_id=None,
        pad_token_id=None,
    )
    out = model.generate(**inputs, generation_config=gen_cfg)
    n = inputs["input_ids"].shape[1]
    ids = out.sequences[0, n:].tolist()
    assert len(ids) == NEW_TOKENS, f"generated {len(ids)} tokens"
    if model.config.image_token_id in ids:
        return ids, None  # a generated <image> would be one more placeholder than features: unusable
    full = model(
        input_ids=out.sequences[:, :-1],
        pixel_values=inputs["pixel_values"],
        pixel_attention_mask=inputs["pixel_attention_mask"],
        use_cache=False,
    ).logits[0, n - 1 :]
    assert full.argmax(-1).tolist() == ids, "cached generate disagrees with full recompute"
    return ids, torch.stack(out.logits)[:, 0]


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
    """One prompt (the pictures `indexes` of `images`: their PIL images, references and arrays) through
    the model, or None when this seed is unusable for it."""
    pictures, image_refs, image_arrays = images
    pictures, image_refs = [pictures[i] for i in indexes], [image_refs[i] for i in indexes]
    messages, text, inputs = process_with(processor, pictures, content)
    pixel_values = inputs["pixel_values"].numpy()
    assert np.array_equal(
        pixel_values, np.concatenate([image_arrays[ref["pixel_values"]] for ref in image_refs], axis=1)
    ), "a prompt's pixel_values are not its pictures' own, in order"
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
    greedy_ids, step_logits = greedy(model, model_inputs)
    if step_logits is None:
        return None
    abs_margin, rel_margin = min_margins(step_logits)
    if len(set(greedy_ids)) < MIN_DISTINCT_GREEDY or rel_margin < MIN_REL_MARGIN or moved < MIN_IMAGE_EFFECT:
        return None
    mask = inputs["pixel_attention_mask"].numpy()
    assert np.array_equal(
        mask, np.concatenate([image_arrays[ref["pixel_attention_mask"]] for ref in image_refs], axis=1)
    )
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
        "logits": f7(logits.numpy()),
        "greedy": greedy_ids,
        "min_top2_margin": float(f"{abs_margin:.4g}"),
        "min_top2_margin_rel": float(f"{rel_margin:.4g}"),
        "image_effect": float(f"{moved:.4g}"),
    }


def write_model_and_reference(out, processor, images, seed):
    """Save this seed's model, run the prompts through it loaded back; the reference or None."""
    config = model_config(len(processor.tokenizer), processor.image_token_id)
    model = build_model(config, seed)
    for name in list(out.glob("model*.safetensors")) + [out / "config.json", out / "generation_config.json"]:
        name.unlink(missing_ok=True)
    model.save_pretrained(out)
    spell_pad_token_id(out / "config.json")
    model, sdpa = load_model(out), load_model(out, attn="sdpa")
    check_pixel_shuffle(model)
    arrays, prompts = {}, {}
    for key, (indexes, content) in PROMPTS.items():
        prompts[key] = prompt_reference(model, sdpa, processor, images, indexes, content, arrays, key)
        if prompts[key] is None:
            return None
    return prompts, arrays


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
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=Path("tests/fixtures/smolvlm-f32"))
    args = parser.parse_args()
    out = args.out
    torch.use_deterministic_algorithms(True)
    transformers.logging.set_verbosity_error()
    transformers.utils.logging.disable_progress_bar()
    shutil.rmtree(out, ignore_errors=True)
    (out / "images").mkdir(parents=True)

    tokenizer = build_tokenizer()
    save_processor_files(build_processor(tokenizer, SmolVLMImageProcessorPil(**PREPROCESSOR)), out)
    processor = load_processor(out)

    pictures, image_refs, arrays = [], [], {}
    for index, (name, mode, width, height) in enumerate(IMAGES):
        make_image(index, mode, width, height).save(out / "images" / name, optimize=True)
        picture = Image.open(out / "images" / name)
        picture.load()
        assert (picture.mode, picture.size) == (mode, (width, height))
        pictures.append(picture)
        ref = {"file": f"images/{name}", "mode": mode, "height": height, "width": width}
        ref.update(image_reference(processor, picture, arrays, f"image{index}"))
        image_refs.append(ref)
    unsplit = {"image": UNSPLIT_IMAGE, "do_image_splitting": False}
    unsplit.update(image_reference(processor, pictures[UNSPLIT_IMAGE], arrays, "unsplit", do_image_splitting=False))
    assert (unsplit["rows"], unsplit["cols"], unsplit["num_images"]) == (0, 0, 1)
    assert all(ref["rows"] * ref["cols"] > 0 for ref in image_refs), "every picture should be split"

    for seed in range(FIRST_SEED, FIRST_SEED + 50):
        found = write_model_and_reference(out, processor, (pictures, image_refs, arrays), seed)
        if found is not None:
            break
        print(f"smolvlm: seed {seed} near-tied, degenerate or blind to the picture, trying the next one")
    else:
        raise RuntimeError("no usable seed")
    prompts, prompt_arrays = found
    tensor_names = check_saved_model(out)

    reference = {
        "transformers": transformers.__version__,
        "torch": torch.__version__,
        "model_class": "SmolVLMForConditionalGeneration",
        "processor_class": "SmolVLMProcessor (image processor SmolVLMImageProcessorPil)",
        "attn_implementation": ATTN,
        "dtype": "f32",
        "seed": seed,
        "vocab_size": len(processor.tokenizer),
        "image_token_id": processor.image_token_id,
        "image_seq_len": IMAGE_SEQ_LEN,
        "chat_template_messages": "[{'role': 'user', 'content': [parts]}], add_generation_prompt=True",
        "one_image_text": ONE_IMAGE_TEXT,
        "images": image_refs,
        "unsplit": unsplit,
        "prompts": prompts,
        "tensors": tensor_names,
        "arrays": "reference.npz",
    }
    (out / "reference.json").write_text(dumps(reference) + "\n")
    np.savez_compressed(out / "reference.npz", **arrays, **prompt_arrays)
    total = sum(p.stat().st_size for p in out.rglob("*") if p.is_file())
    print(f"smolvlm: wrote {out} (seed {seed}, {total / 1024:.0f} KiB)")


if __name__ == "__main__":
    main()
