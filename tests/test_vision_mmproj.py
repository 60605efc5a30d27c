"""SmolVLM as llama.cpp users have it: a text GGUF and its mmproj GGUF (tests/fixtures/smolvlm-gguf, made from
tests/fixtures/smolvlm-f32 by llama.cpp's converter: tools/make_vision_gguf.py). The pair answers the one- and
two-picture prompts as transformers does with the safetensors folder (reference.json: the prompt ids, logits
within 1e-3, the 16 greedy ids), through session.load(mmproj=) and `generate --mmproj`; files converted before
llama.cpp renamed the tower's ffn_up / ffn_down still read; a bad mmproj is one ModelFileError naming it."""

import asyncio
import json
from pathlib import Path

import gguf
import numpy as np
import pytest
from vision_ref import generate, generated, load, one_picture_chat, patch_rows, pictures_of

from py_engine import session
from py_engine.decode.answer_stream import place_pictures
from py_engine.errors import ModelFileError
from py_engine.formats.mmproj import mmproj_config, mmproj_settings, read_mmproj
from py_engine.formats.source import open_source
from py_engine.gpu.wgpu_host import open_wgpu_device
from py_engine.vision.encoder import load_vision_encoder
from py_engine.vision.smolvlm import smolvlm_settings

FIXTURE, REFERENCE, ARRAYS, _ = load("smolvlm-f32")
PAIR = Path(__file__).parent / "fixtures" / "smolvlm-gguf"
TEXT, MMPROJ = PAIR / "smolvlm-tiny-f32.gguf", PAIR / "mmproj-smolvlm-tiny-f32.gguf"
PROMPTS = ["one_image", "two_images"]


@pytest.fixture(scope="module")
def model():
    async def load():
        return await session.load(TEXT, await open_wgpu_device(), mmproj=MMPROJ, context=96, precision="exact")

    return asyncio.run(load())


def test_the_mmproj_gives_the_folders_processor_settings():
    """What the mmproj holds and the SmolVLM defaults it leaves out make the processor files' settings."""
    files = [json.loads((FIXTURE / f).read_text()) for f in ("preprocessor_config.json", "processor_config.json")]
    gguf_file = read_mmproj(open_source(MMPROJ))
    got = mmproj_settings(gguf_file, mmproj_config(gguf_file)[1])
    assert got == smolvlm_settings(*files, json.loads((FIXTURE / "config.json").read_text()))


@pytest.mark.parametrize("name", PROMPTS)
def test_the_pair_answers_as_transformers(model, name):
    """The chat template from the text GGUF, the pictures from their PNGs through the mmproj's tower:
    transformers' prompt ids, last logits and greedy tokens."""
    prompt = REFERENCE["prompts"][name]
    pictures = pictures_of(FIXTURE, REFERENCE, prompt)

    async def run():
        text, _ = model.vision.expand(model.tok.apply_chat_template(prompt["messages"]), pictures)
        ids = model.tok.encode(text, add_special_tokens=False)
        model.engine.reset()
        await place_pictures(model, ids, pictures)
        logits = np.array(await model.engine.prompt_logits(ids), np.float32)
        model.engine.reset()
        return ids, logits, [t async for t in model.engine.generate(ids, 16)]

    ids, logits, greedy = asyncio.run(run())
    assert ids == prompt["input_ids"]
    np.testing.assert_allclose(logits, np.array(prompt["logits"], np.float32), atol=1e-3)
    assert greedy == prompt["greedy"]


def rewrite(path: Path, out: Path, keys: dict | None = None, drop=(), rename=None, tensors=None) -> Path:
    """A copy of a GGUF with metadata `keys` set ({key: (value, GGUFValueType)}) or dropped, tensors
    renamed ({old: new}), replaced or added ({name: array}, None drops one)."""
    keys, rename, tensors = keys or {}, rename or {}, dict(tensors or {})
    reader = gguf.GGUFReader(path)
    writer = gguf.GGUFWriter(out, reader.fields["general.architecture"].contents())
    for key, field in reader.fields.items():
        if key.startswith("GGUF.") or key == "general.architecture" or key in drop or key in keys:
            continue
        sub_type = field.types[-1] if field.types[0] == gguf.GGUFValueType.ARRAY else None
        writer.add_key_value(key, field.contents(), field.types[0], sub_type=sub_type)
    for key, (value, vtype) in keys.items():  # an array's items: as the file's were, else f32
        sub_type = reader.fields[key].types[-1] if key in reader.fields else gguf.GGUFValueType.FLOAT32
        sub_type = sub_type if vtype == gguf.GGUFValueType.ARRAY else None
        writer.add_key_value(key, value, vtype, sub_type=sub_type)
    for tensor in reader.tensors:
        array = tensors.pop(tensor.name, np.array(tensor.data))
        if array is not None:
            writer.add_tensor(rename.get(tensor.name, tensor.name), array)
    for name, array in tensors.items():
        writer.add_tensor(name, array)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return out


def swapped_ffn(out: Path) -> Path:
    """The mmproj as converters before llama.cpp's renaming wrote it: fc1 as ffn_down, fc2 as ffn_up."""
    swap = {"ffn_up": "ffn_down", "ffn_down": "ffn_up"}
    names = {
        f"v.blk.{i}.{a}.{k}": f"v.blk.{i}.{b}.{k}"
        for i in range(2)
        for a, b in swap.items()
        for k in ("weight", "bias")
    }
    return rewrite(MMPROJ, out, rename=names)


@pytest.mark.parametrize("which", ["as converted", "ffn swapped"])
def test_the_tower_gives_transformers_features(tmp_path, which):
    """The processor's pixel values through the mmproj's tower: transformers' image features (both
    prompts' tiles). A file with ffn_up and ffn_down the other way round reads the same."""
    path = MMPROJ if which == "as converted" else swapped_ffn(tmp_path / "old.gguf")

    async def run():
        encoder = await load_vision_encoder(path, await open_wgpu_device())
        out = []
        for name in PROMPTS:
            prompt = REFERENCE["prompts"][name]
            tiles = [t for key in prompt["pixel_values"] for t in ARRAYS[key][0].astype(np.float32)]
            got = await encoder.encode([patch_rows(t, encoder.geometry["patch_size"]) for t in tiles])
            out.append((np.array(got, np.float32), ARRAYS[prompt["image_features"]]))
        return out

    for got, want in asyncio.run(run()):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * np.abs(want).max())


def test_cli_generate_with_mmproj(tmp_path):
    """`generate --model text.gguf --mmproj mmproj.gguf --chat --image`: transformers' tokens; a bad
    mmproj is one line on stderr naming it, exit code 2."""
    one = REFERENCE["prompts"]["one_image"]
    args = ("--model", str(TEXT), *one_picture_chat(REFERENCE, FIXTURE))
    result = generate(*args, "--mmproj", str(MMPROJ))
    assert generated(result) == one["greedy"], result.stderr
    bad = rewrite(
        MMPROJ, tmp_path / "bad.gguf", keys={"clip.projector_type": ("qwen2vl_merger", gguf.GGUFValueType.STRING)}
    )
    result = generate(*args, "--mmproj", str(bad))
    assert result.returncode == 2 and result.stderr.count("\n") == 1, result.stderr
    assert str(bad) in result.stderr and "projector type 'qwen2vl_merger'" in result.stderr
    result = generate(*args)
    assert result.returncode == 2 and "--image needs a vision model" in result.stderr, result.stderr


STRING, U32, F32, BOOL = (gguf.GGUFValueType[k] for k in ("STRING", "UINT32", "FLOAT32", "BOOL"))
ARRAY = gguf.GGUFValueType.ARRAY
BAD_MMPROJ = {  # name: (rewrite's arguments, words of the one error)
    "no patch size": ({"drop": ["clip.vision.patch_size"]}, "missing metadata key 'clip.vision.patch_size'"),
    "no eps": ({"drop": ["clip.vision.attention.layer_norm_epsilon"]}, "layer_norm_epsilon"),
    "no vision tower": ({"drop": ["clip.has_vision_encoder"]}, "has no vision tower"),
    "another projector": ({"keys": {"clip.projector_type": ("ldp", STRING)}}, "projector type 'ldp' is not supported"),
    "patch size a string": ({"keys": {"clip.vision.patch_size": ("8", STRING)}}, "should be an integer"),
    "patch size not dividing": ({"keys": {"clip.vision.patch_size": (5, U32)}}, "must be a multiple of patch_size 5"),
    "heads not dividing": ({"keys": {"clip.vision.attention.head_count": (3, U32)}}, "not a multiple"),
    "grouped heads": ({"keys": {"clip.vision.attention.head_count_kv": (1, U32)}}, "head_count_kv"),
    "quick gelu": ({"drop": ["clip.use_gelu"]}, "clip.use_gelu is not true"),
    "eps not finite": ({"keys": {"clip.vision.attention.layer_norm_epsilon": (float("nan"), F32)}}, "finite"),
    "two means": ({"keys": {"clip.vision.image_mean": ([0.5, 0.5], ARRAY)}}, "image_mean has 2 entries"),
    "zero std": ({"keys": {"clip.vision.image_std": ([0.5, 0.0, 0.5], ARRAY)}}, "divide by zero"),
    "more layers": ({"keys": {"clip.vision.block_count": (3, U32)}}, "missing tensor 'v.blk.2."),
    "no projection": ({"tensors": {"mm.model.fc.weight": None}}, "missing tensor 'mm.model.fc.weight'"),
    "no attention bias": ({"tensors": {"v.blk.1.attn_q.bias": None}}, "missing tensor 'v.blk.1.attn_q.bias'"),
    "a short position table": (
        {"tensors": {"v.position_embd.weight": np.zeros((15, 32), np.float32)}},
        "tensor 'v.position_embd.weight' has shape [15, 32], but the metadata makes it [16, 32]",
    ),
    "projection_dim disagrees": ({"keys": {"clip.vision.projection_dim": (32, U32)}}, "[32, 128]"),
    "a pre-norm": ({"tensors": {"v.pre_ln.weight": np.ones(32, np.float32)}}, "'v.pre_ln.weight' is not part of"),
    "made for another model": (
        {
            "keys": {"clip.vision.projection_dim": (32, U32)},
            "tensors": {"mm.model.fc.weight": np.zeros((32, 128), np.float32)},
        },
        "its image embeddings are 32 wide, but the text model's",
    ),
}


@pytest.mark.parametrize("case", BAD_MMPROJ)
def test_a_bad_mmproj_is_one_clear_error(tmp_path, case):
    changes, words = BAD_MMPROJ[case]
    bad = rewrite(MMPROJ, tmp_path / "bad.gguf", **changes)
    with pytest.raises(ModelFileError) as caught:
        session.read_model_files(TEXT, mmproj=bad)
    assert caught.value.path == str(bad) and words in caught.value.problem, caught.value


def test_files_given_the_wrong_way_round(tmp_path):
    """The text GGUF as the mmproj, the mmproj as the model, a file that is not GGUF, a cut-short
    mmproj, a text model without the picture tokens: each one error naming the file."""
    cases = [((TEXT, TEXT), TEXT, "general.architecture is 'llama': not a vision projector")]
    cases.append(((MMPROJ, MMPROJ), MMPROJ, "a vision projector (mmproj) file: give it beside its text model"))
    (tmp_path / "notes.txt").write_text("not a model")
    cases.append(((TEXT, tmp_path / "notes.txt"), tmp_path / "notes.txt", "not a GGUF file"))
    (tmp_path / "short.gguf").write_bytes(MMPROJ.read_bytes()[:4000])
    cases.append(((TEXT, tmp_path / "short.gguf"), tmp_path / "short.gguf", "truncated"))
    tokens = gguf.GGUFReader(TEXT).fields["tokenizer.ggml.tokens"].contents()
    renamed = [t if t != "<global-img>" else "<global-image>" for t in tokens]
    other = rewrite(TEXT, tmp_path / "other.gguf", keys={"tokenizer.ggml.tokens": (renamed, ARRAY)})
    cases.append(((other, MMPROJ), other, "does not have the picture token <global-img> as one token"))
    for (model, mmproj), path, words in cases:
        with pytest.raises(ModelFileError) as caught:
            session.read_model_files(model, mmproj=mmproj)
        assert caught.value.path == str(path) and words in caught.value.problem, caught.value
