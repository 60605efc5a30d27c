"""SmolVLM's processor for tools/make_vision_fixtures.py (tests/fixtures/smolvlm-f32): the tiny byte-level BPE
with SmolVLM's special and added tokens and SmolVLM-256M-Instruct's chat template, the image processor's
settings (size 64, tiles of 32, 4 tokens a tile), the processor's files as the SmolVLM repos have them, and
the processor rebuilt from those files alone.

SmolVLMProcessor's video processor needs torchvision and its constructor num2words; neither is used for
images and text, so the processor is built without them (ImageOnlyProcessor) and saved file by file.
"""

import json
from types import SimpleNamespace

from tokenizers import pre_tokenizers
from transformers import PreTrainedTokenizerFast
from transformers.models.smolvlm import processing_smolvlm
from transformers.models.smolvlm.image_processing_pil_smolvlm import SmolVLMImageProcessorPil
from vision_fixture_common import save_tokenizer_files, train_bpe

MAX_POSITIONS = 512  # the tokenizer's model_max_length and the text model's max_position_embeddings

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


def build_tokenizer():
    pre_tokenizer = pre_tokenizers.Sequence(
        [pre_tokenizers.Digits(individual_digits=True), pre_tokenizers.ByteLevel(add_prefix_space=False)]
    )
    tok = train_bpe(pre_tokenizer, BPE_VOCAB, SPECIALS, ADDED, TRAINING_TEXT)
    return PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token="<|im_start|>",
        eos_token="<end_of_utterance>",
        pad_token="<|im_end|>",
        unk_token="<|endoftext|>",
        extra_special_tokens=NAMED_TOKENS,
        model_max_length=MAX_POSITIONS,
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
    save_tokenizer_files(
        processor.tokenizer,
        out,
        CHAT_TEMPLATE,
        "SmolVLMProcessor",
        extra_special_tokens=dict(NAMED_TOKENS),
        additional_special_tokens=["<fake_token_around_image>", "<image>", "<end_of_utterance>"],
    )


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
