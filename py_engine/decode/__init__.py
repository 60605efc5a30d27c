"""Choosing tokens and turning them into text: the decode loops the engine runs (on_gpu.py:
GPU-fed; on_host.py: the host picks each token, as constrained decoding needs; prompt_lookup.py:
drafts verified in one forward), sampling (sampling.py; token_choice.py, the draw's reference;
row_draw.py, the draw on the GPU), the prompt cache kept between requests (prompt_cache.py) and the
answer as text (answer_stream.py, ended by stop_strings.py)."""
