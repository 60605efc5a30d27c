"""The host-in-the-loop decode loop: one token per round trip, the host picking it.

Constrained decoding needs it (every answer token drawn from the tokens a constrain.Constraint
allows: JSON of a schema, a tool call): the mask depends on the token just chosen, so the GPU-fed
loop (on_gpu.py) cannot be used. Its cost is hidden where it can be: the forward that scores
a token is submitted first, the host computes the mask while the GPU runs it, and a second submit
masks the row (logit_mask.wgsl) and samples it with the usual kernels. Without a constraint it is
the reference the GPU-fed loop is tested against (Sampler.commands + pick decide in Python), and
benchmarks/decode.py's --round-trip. One of the engine's decode loops, driving it through its
decode-loop interface only.
"""

from __future__ import annotations

import time


async def decode_on_host(engine, prompt, max_new_tokens, sampling, stop_ids, history, stats, constraint=None):
    """Engine.generate's tokens after `prompt`; the last token yielded is not fed (pos stays before
    it). history: the penalty's tokens, appended to. stats: the engine's DecodeStats, added to (its
    constraint_seconds: the host's time in the constraint). constraint: draw each token under its
    mask; the answer ends once it is finished."""
    sampler = engine.sampler
    commands = engine.prefill_commands(prompt)
    token = None
    for i in range(max_new_tokens):
        start = time.perf_counter()
        if i:
            commands = engine.forward_commands([token])
        if constraint is None:
            engine.device.submit(commands + sampler.commands(sampling, history))
        else:
            engine.device.submit(commands)
            masked = time.perf_counter()
            allowed = constraint.mask()
            stats.constraint_seconds += time.perf_counter() - masked
            engine.device.submit(sampler.mask(allowed) + sampler.commands(sampling, history))
        if i:
            stats.host_seconds += time.perf_counter() - start
            stats.tokens += 1
        token = await sampler.pick(sampling)
        history.append(token)
        if constraint is not None and token not in stop_ids:
            advanced = time.perf_counter()
            constraint.advance(token)
            stats.constraint_seconds += time.perf_counter() - advanced
        yield token
        if token in stop_ids or (constraint is not None and constraint.finished) or engine.pos >= engine.context:
            return
