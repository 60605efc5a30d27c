"""The GPU-fed decode loop: decoding whose next input never waits for the host.

Each forward's chosen token (argmax, or sample_pick's draw) feeds the next forward's embedding on
the GPU (Engine.gpu_feedback); a submit carries a group of forwards (Engine.decode_group:
engine.tokens_per_submit of them, or as many as last about LIVE_SECONDS at the last group's time
per token), and where reads overlap (Device.reads_overlap) the host encodes group i + 1 while the
GPU runs group i. Forwards submitted past a stop are discarded: the engine is rolled back to the
last token yielded. One of the engine's decode loops (on_host.py, prompt_lookup.py), driving
it through its decode-loop interface only.
"""

from __future__ import annotations

import time
from collections import deque

from ..runtime.kv_cache import SUBMITS_AHEAD, TOKENS_PER_SUBMIT

# How often a group's tokens must reach the page: each group (at most TOKENS_PER_SUBMIT forwards)
# is sized from the last one's time per token so that it lasts about LIVE_SECONDS.
LIVE_SECONDS = 0.1
# A group has at most RAMP times the forwards in flight when it is encoded: the host encodes it
# while the GPU runs those, and a decode forward takes the host less time to encode than the GPU
# to run (the 8B shape on an H200: 1.2 against 2.8 ms). Sized at once from one forward to eight
# (TOKENS_PER_SUBMIT), the GPU waited ~7 ms for the host after the answer's first tokens: the
# 8B's decode.py at depth 0 (128 tokens) read 346.9 tok/s where its forwards run at 2.79 ms a
# token once the loop is under way.
RAMP = 2


async def decode_on_gpu(engine, prompt, max_new_tokens, sampling, stop_ids, history, stats, most=None):
    """Engine.generate's tokens after `prompt`, each yielded as its read lands; pos ends after
    every yielded token but the last. stats: the engine's DecodeStats, added to. most(): the most
    forwards the next submit may carry (None: no bound; 0: submit no more, end when those in
    flight have been yielded — prompt lookup takes over from there)."""
    first_input = engine.pos + len(prompt)  # the position the first answer token is fed at
    ahead = SUBMITS_AHEAD if engine.device.reads_overlap else 1  # submits in flight
    feedback = engine.gpu_feedback(sampling, history)
    groups = deque()  # each submit in flight: its pending reads, one per forward
    group_size = engine.tokens_per_submit or 1
    submitted = yielded = 0
    last_done = None
    try:
        while yielded < max_new_tokens:
            while len(groups) < ahead:
                start = time.perf_counter()
                if submitted == 0:
                    engine.sampler.next_draw(sampling)
                    count, commands = 1, engine.prefill_commands(prompt) + feedback
                else:  # forwards still to submit; forward j (j >= 1) feeds position first_input + j - 1
                    bound = most() if most else None
                    # (a fixed engine.tokens_per_submit is a benchmark's choice: kept as given)
                    ramp = RAMP * sum(c for c, _ in groups) if engine.tokens_per_submit is None else group_size
                    count = min(
                        max_new_tokens - submitted,
                        engine.context - (first_input + submitted - 1),
                        group_size if bound is None else bound,
                        max(1, ramp),
                    )
                    if count <= 0:
                        break
                    commands = engine.decode_group(count, sampling, feedback)
                groups.append((count, deque(engine.device.submit(commands))))
                if submitted:
                    stats.host_seconds += time.perf_counter() - start
                    stats.tokens += count
                submitted += count
            if not groups:  # most() was 0
                return
            start = time.perf_counter()
            token = await engine.read_fed_token(groups[0][1].popleft())
            stats.wait_seconds += time.perf_counter() - start
            if not groups[0][1]:  # a submit done: size the next groups by its time per token
                done, count = time.perf_counter(), groups.popleft()[0]
                if last_done is not None and engine.tokens_per_submit is None:
                    per_token = (done - last_done) / count
                    group_size = max(1, min(TOKENS_PER_SUBMIT, int(LIVE_SECONDS / max(per_token, 1e-6))))
                last_done = done
            yielded += 1
            yield token
            if token in stop_ids or first_input + yielded - 1 >= engine.context:
                return
    finally:  # closed early (a stop, a cancel): back to the last token yielded, now
        engine.roll_back(first_input + max(yielded - 1, 0) if submitted else first_input - len(prompt))
