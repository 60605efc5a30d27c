"""What the vision fixture tools share (tools/make_vision_fixtures.py for SmolVLM,
make_gemma3_vision_fixture.py, make_qwen3_5_vision_fixture.py): the bars a seed must clear, the prompts, the
synthetic pictures, the tokenizer's training and files, greedy generation cross-checked, the model's saving,
the seed search and the reference's writing (reference.json + reference.npz)."""

import argparse
import json
import shutil
from pathlib import Path

import numpy as np
import torch
import transformers
from make_fixtures import min_margins
from PIL import Image
from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import GenerationConfig

NEW_TOKENS = 16
MIN_REL_MARGIN = 1e-3  # (top1 - top2) / max|logit| at every greedy step, as make_fixtures.py
MIN_DISTINCT_GREEDY = 4
MIN_IMAGE_EFFECT = 0.05  # the last logits must move by more than this (max abs) when the pictures change
ATTN = "eager"
STD = 0.2  # weights' N(0, STD): as make_fixtures.py's initializer_range (0.02 gives near-tied logits)
CHAT_MESSAGES = "[{'role': 'user', 'content': [parts]}], add_generation_prompt=True"
TWO_IMAGES = [
    {"type": "text", "text": "Compare"},
    {"type": "image"},
    {"type": "text", "text": "and"},
    {"type": "image"},
    {"type": "text", "text": "in one sentence."},
]


def prompts(one, two):
    """name -> (the pictures, the user message's content): picture `one` alone, then the pictures `two`."""
    one_image = [{"type": "image"}, {"type": "text", "text": "What is in this image?"}]
    return {"one_image": ([one], one_image), "two_images": (list(two), TWO_IMAGES)}


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


def prepare(doc, default):
    """The command line (a tool's `doc`, --out `default`); deterministic torch, quiet transformers, and the
    folder emptied with its images/ folder: the folder."""
    parser = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=Path(default))
    out = parser.parse_args().out
    torch.use_deterministic_algorithms(True)
    transformers.logging.set_verbosity_error()
    transformers.utils.logging.disable_progress_bar()
    shutil.rmtree(out, ignore_errors=True)
    (out / "images").mkdir(parents=True)
    return out


# ---- the tokenizer ----


def train_bpe(pre_tokenizer, vocab_size, specials, added, text, normalizer=None):
    """A byte-level BPE trained on `text`: `specials` first, the byte alphabet and merges up to `vocab_size`,
    then the special tokens `added`."""
    tok = Tokenizer(models.BPE())
    if normalizer is not None:
        tok.normalizer = normalizer
    tok.pre_tokenizer = pre_tokenizer
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=specials,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(text, trainer)
    assert tok.get_vocab_size() == vocab_size, f"the training text gives only {tok.get_vocab_size()} tokens"
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in added])
    return tok


def save_tokenizer_files(tokenizer, out, chat_template, processor_class, **keys):
    """tokenizer.json and tokenizer_config.json, the chat template, `keys` and the processor's class in the
    latter (no chat_template.jinja)."""
    tokenizer.save_pretrained(out)
    (out / "chat_template.jinja").unlink(missing_ok=True)  # the template lives in tokenizer_config.json
    cfg_path = out / "tokenizer_config.json"
    cfg = json.loads(cfg_path.read_text())
    cfg["chat_template"] = chat_template
    cfg.update(keys)
    cfg["processor_class"] = processor_class
    cfg_path.write_text(json.dumps(cfg, indent=2, sort_keys=True) + "\n")


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


def write_pictures(out, images, reference):
    """Each (file, mode, width, height) of `images` made, saved in out/images and read back; (the pictures,
    their references, the arrays `reference(picture, arrays, index)` stored for them)."""
    pictures, image_refs, arrays = [], [], {}
    for index, (name, mode, width, height) in enumerate(images):
        make_image(index, mode, width, height).save(out / "images" / name, optimize=True)
        picture = Image.open(out / "images" / name)
        picture.load()
        assert (picture.mode, picture.size) == (mode, (width, height))
        pictures.append(picture)
        ref = {"file": f"images/{name}", "mode": mode, "height": height, "width": width}
        ref.update(reference(picture, arrays, index))
        image_refs.append(ref)
    return pictures, image_refs, arrays


# ---- the model and its outputs ----


def save_model(model, out):
    for name in list(out.glob("model*.safetensors")) + [out / "config.json", out / "generation_config.json"]:
        name.unlink(missing_ok=True)
    model.save_pretrained(out)


def load_model(model_class, path, attn=ATTN):
    return model_class.from_pretrained(path, dtype=torch.float32, attn_implementation=attn).eval()


@torch.no_grad()
def greedy(model, inputs, picture_ids, types=None):
    """16 greedy ids plus their step logits, cross-checked against a cache-free recompute of the whole
    sequence with the pictures (the generated tokens text in the token-type input `types`, if any); the
    logits are None when a picture token was generated (one more placeholder than features: unusable)."""
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
    if set(picture_ids) & set(ids):
        return ids, None
    rest = {k: v for k, v in inputs.items() if k not in ("input_ids", "attention_mask")}
    if types is not None:
        rest[types] = torch.cat([inputs[types], torch.zeros_like(out.sequences[:, n:-1])], dim=1)
    full = model(input_ids=out.sequences[:, :-1], **rest, use_cache=False).logits[0, n - 1 :]
    assert full.argmax(-1).tolist() == ids, "cached generate disagrees with full recompute"
    return ids, torch.stack(out.logits)[:, 0]


def margins(greedy_ids, step_logits, moved):
    """The greedy steps' smallest (absolute, relative) top-2 margins, or None when the seed is unusable:
    a picture token generated, a near-tied step, too few distinct ids or pictures that barely matter."""
    if step_logits is None:
        return None
    abs_margin, rel_margin = min_margins(step_logits)
    if len(set(greedy_ids)) < MIN_DISTINCT_GREEDY or rel_margin < MIN_REL_MARGIN or moved < MIN_IMAGE_EFFECT:
        return None
    return abs_margin, rel_margin


def outcome(logits, extra, greedy_ids, found, moved):
    """A prompt reference's tail: the last logits, the family's `extra`, the greedy ids and the margins."""
    return {
        "logits": f7(logits.numpy()),
        **extra,
        "greedy": greedy_ids,
        "min_top2_margin": float(f"{found[0]:.4g}"),
        "min_top2_margin_rel": float(f"{found[1]:.4g}"),
        "image_effect": float(f"{moved:.4g}"),
    }


def run_prompts(prompt_table, arrays, reference):
    """Each prompt's `reference(indexes, content, arrays, key)`; (the references, the arrays they added to
    `arrays`), or None when one is None."""
    prompt_arrays, results = dict(arrays), {}
    for key, (indexes, content) in prompt_table.items():
        results[key] = reference(indexes, content, prompt_arrays, key)
        if results[key] is None:
            return None
    return results, {k: v for k, v in prompt_arrays.items() if k not in arrays}


def find_seed(tag, first_seed, attempt, skipped):
    """The first of 50 seeds from `first_seed` for which `attempt(seed)` is not None: (seed, its result)."""
    for seed in range(first_seed, first_seed + 50):
        found = attempt(seed)
        if found is not None:
            return seed, found
        print(f"{tag}: seed {seed} {skipped}")
    raise RuntimeError("no usable seed")


def make_fixture(doc, default_out, tag, recipe):
    """A vision fixture tool's main: the folder prepared (--out, default `default_out`), the processor's
    files saved and loaded back, the pictures written with their references, the first usable seed's model
    and prompts (from recipe.first_seed), the saved model checked, reference.json / .npz written.
    recipe: a module (the tool's) with build_tokenizer, save_processor_files, load_processor, IMAGES, image_reference,
    write_model_and_reference, FIRST_SEED, SKIPPED (why a seed is passed over), check_saved_model, CLASSES
    and token_ids(config, processor)."""
    out = prepare(doc, default_out)
    recipe.save_processor_files(recipe.build_tokenizer(), out)
    processor = recipe.load_processor(out)
    pictures, image_refs, arrays = write_pictures(
        out, recipe.IMAGES, lambda p, a, index: recipe.image_reference(processor, p, a, f"image{index}_pixel_values")
    )
    seed, (prompts, prompt_arrays) = find_seed(
        tag,
        recipe.FIRST_SEED,
        lambda seed: recipe.write_model_and_reference(out, processor, (pictures, image_refs), arrays, seed),
        recipe.SKIPPED,
    )
    tensor_names = recipe.check_saved_model(out)
    config = json.loads((out / "config.json").read_text())
    rest = {"images": image_refs, "prompts": prompts, "tensors": tensor_names}
    ids = recipe.token_ids(config, processor)
    write_reference(out, tag, seed, recipe.CLASSES, ids, rest, {**arrays, **prompt_arrays})


def write_reference(out, tag, seed, classes, ids, rest, arrays):
    """reference.json (the versions, `classes` (model, processor), the seed, `ids`, the chat call, `rest`)
    and reference.npz (`arrays`)."""
    reference = {
        "transformers": transformers.__version__,
        "torch": torch.__version__,
        "model_class": classes[0],
        "processor_class": classes[1],
        "attn_implementation": ATTN,
        "dtype": "f32",
        "seed": seed,
        **ids,
        "chat_template_messages": CHAT_MESSAGES,
        **rest,
        "arrays": "reference.npz",
    }
    (out / "reference.json").write_text(dumps(reference) + "\n")
    np.savez_compressed(out / "reference.npz", **arrays)
    total = sum(p.stat().st_size for p in out.rglob("*") if p.is_file())
    print(f"{tag}: wrote {out} (seed {seed}, {total / 1024:.0f} KiB)")
