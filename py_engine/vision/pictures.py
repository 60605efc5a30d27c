"""A picture into a vision-language model's image embeddings, on the GPU end to end: the processor's
resizes (vision/resample.py, Pillow's arithmetic), its tiles cut, rescaled and normalized into patch
rows (vision/patches.py), and the vision tower over each tile (vision/encoder.py), whose rows land
in the text engine's image_embeds (Engine.place_images then points the prompt's picture tokens at
them). The picture's pixels reach the GPU once, as RGBA8 with straight alpha (the browser's
ImageBitmap bytes with premultiplyAlpha "none"); a transparent picture is composited onto white
first, as the processor's convert_rgb does (shaders/image_composite.wgsl)."""

from __future__ import annotations

from ..gpu import Dispatch
from .encoder import VisionEncoder
from .patches import encode, level_buffer, picture_grids
from .qwen3_5 import Qwen35Plan, Qwen35Settings
from .qwen3_5_tower import Qwen35VisionEncoder
from .resample import resize
from .smolvlm import ImagePlan, SmolVLMSettings, image_plan

GROUP = 16  # image_patches_merged.wgsl's workgroup is GROUP x GROUP pixels


async def picture_embeddings(
    encoder: VisionEncoder,
    rgba: bytes,
    width: int,
    height: int,
    settings: SmolVLMSettings,  # or vision/gemma3.py's Gemma3Settings (the same names for pixels)
    into,
    first_row: int,
    plan: ImagePlan | None = None,
) -> ImagePlan:
    """Encode a picture (height rows of width RGBA8 pixels) as the processor plans it (its tiles,
    then its global view; plan: SmolVLM's image_plan unless given, e.g. Gemma 3's one square) into
    `into` (an Engine's image_embeds) from row first_row: the plan's num_image_tokens rows.
    Submitted, not awaited."""
    device, kernels = encoder.device, encoder.kernels
    if len(rgba) != 4 * width * height:
        raise ValueError(f"a {width} x {height} picture is {4 * width * height} bytes of RGBA8, not {len(rgba)}")
    plan = image_plan(height, width, settings) if plan is None else plan
    tower = encoder.geometry
    if plan.tile != tower["image_size"] or plan.image_seq_len != encoder.tokens:
        raise ValueError(
            f"the processor's tiles ({plan.tile} pixels, {plan.image_seq_len} tokens) are not the vision tower's "
            f"({tower['image_size']} pixels, {encoder.tokens} tokens)"
        )
    src = device.create_buffer(len(rgba), label="picture")
    device.write_buffer(src, 0, rgba)
    made = [src]
    if settings.do_convert_rgb:
        made.append(await composite_on_white(device, kernels, src, width * height))

    async def resized(buffer, size_from: tuple[int, int], size_to: tuple[int, int]):
        (in_h, in_w), (out_h, out_w) = size_from, size_to
        out = await resize(device, kernels, buffer, in_w, in_h, out_w, out_h, settings.resample)
        made.append(out)
        return out

    first = await resized(src, plan.original, plan.resized) if settings.do_resize else src
    sources = []
    if plan.split:
        split = await resized(first, plan.resized, plan.encoder)
        sources.append(split)
        global_from = (split, plan.encoder) if plan.global_from == "encoder" else (first, plan.resized)
    else:
        global_from = (first, plan.resized)
    sources.append(await resized(*global_from, (plan.tile, plan.tile)))
    levels = level_buffer(device, settings)
    made.append(levels)
    commands, temporaries, row = [], [], first_row
    for buffer, grid in zip(sources, picture_grids(plan)):
        for tile in grid.each_tile():
            patched = encode(
                device, kernels, [(buffer, tile)], levels, encoder.patches, encoder.rows, tower["patch_size"]
            )
            commands += patched.commands + encoder.commands_into(into, row)
            temporaries += patched.temporaries
            row += encoder.tokens
    await device.prepare()
    device.submit(commands)
    for buffer in made + temporaries:  # freed once the submitted work is done with them
        device.destroy_buffer(buffer)
    return plan


async def composite_on_white(device, kernels, pixels, count: int):
    """Submit the RGBA8 `pixels` (count of them) composited onto white in place, as Pillow's
    alpha_composite then convert("RGB") (shaders/image_composite.wgsl); returns the params buffer
    to destroy after the work that follows it is submitted."""
    kernel = kernels.get("image_composite")
    params = kernel.pack_params({"count": count, "pad0": 0, "pad1": 0, "pad2": 0})
    uniform = device.create_buffer(len(params), "uniform", label="image_composite.params")
    device.write_buffer(uniform, 0, params)
    group = device.create_bind_group(kernel.handle, [(uniform, 0, len(params)), (pixels, 0, 4 * count)])
    groups = -(-count // 256)
    await device.prepare()  # the browser compiles kernels asynchronously
    device.submit([Dispatch(kernel.handle, group, (min(groups, 65535), -(-groups // 65535), 1))])
    return uniform


async def qwen3_5_embeddings(
    encoder: Qwen35VisionEncoder,
    rgba: bytes,
    width: int,
    height: int,
    settings: Qwen35Settings,
    into,
    first_row: int,
    plan: Qwen35Plan,
) -> Qwen35Plan:
    """Encode a picture (height rows of width RGBA8 pixels) as Qwen3.5's processor plans it (one resize,
    then its patches in merge-block order, each frame repeated: shaders/image_patches_merged.wgsl) into
    `into` (an Engine's image_embeds) from row first_row: plan.num_image_tokens rows. Submitted, not
    awaited."""
    device, kernels = encoder.device, encoder.kernels
    if len(rgba) != 4 * width * height:
        raise ValueError(f"a {width} x {height} picture is {4 * width * height} bytes of RGBA8, not {len(rgba)}")
    src = device.create_buffer(len(rgba), label="picture")
    device.write_buffer(src, 0, rgba)
    made = [src]
    if settings.do_convert_rgb:
        made.append(await composite_on_white(device, kernels, src, width * height))
    (out_h, out_w), image = plan.resized, src
    if (out_h, out_w) != (height, width):
        image = await resize(device, kernels, src, width, height, out_w, out_h, settings.resample)
        made.append(image)
    levels = level_buffer(device, settings)
    kernel = kernels.get("image_patches_merged")
    params = kernel.pack_params(
        {"image_w": out_w, "image_h": out_h, "patch_side": settings.patch_size, "merge": settings.merge}
        | {"temporal": encoder.frames, "pad0": 0, "pad1": 0, "pad2": 0}
    )
    uniform = device.create_buffer(len(params), "uniform", label="image_patches_merged.params")
    device.write_buffer(uniform, 0, params)
    made += [levels, uniform]
    resources = [
        (uniform, 0, len(params)),
        (image, 0, out_w * out_h * 4),
        (levels, 0, 3 * 256 * 4),
        (encoder.patches, 0, encoder.rows * encoder.row_values * 4),
    ]
    group = device.create_bind_group(kernel.handle, resources)
    patches = Dispatch(kernel.handle, group, (-(-out_w // GROUP), -(-out_h // GROUP), 1))
    commands = [patches] + encoder.commands_into(plan.grid, into, first_row)
    await device.prepare()  # the browser compiles kernels asynchronously
    device.submit(commands)
    for buffer in made:  # freed once the submitted work is done with them
        device.destroy_buffer(buffer)
    return plan
