"""Constrained decoding: every answer token drawn from the tokens a constrain.Constraint allows
(JSON of a schema, a tool call), so the answer parses whatever the model would rather say.

The mask depends on the token just chosen, so the host is in the loop once per token (the GPU-fed
loop of Engine._on_gpu cannot be used). Its cost is hidden where it can be: the forward that
scores a token is submitted first, the host computes the mask while the GPU runs it, and a second
submit masks the row (logit_mask.wgsl) and samples it with the usual kernels."""

from __future__ import annotations

import time


async def constrained_decode(engine, prompt, max_new_tokens, sampling, stop_ids, history, constraint):
    """Engine.generate's inner loop under `constraint`: yields token ids; ends after a stop id or
    once the constraint is finished. As Engine._sampled, the last token yielded is not fed (pos
    stays before it). engine.constraint_seconds: host seconds spent in the constraint."""
    engine.constraint_seconds = 0.0
    sampler, device = engine.sampler, engine.device
    commands = engine.prefill_commands(prompt)
    token = None
    for i in range(max_new_tokens):
        start = time.perf_counter()
        if i:
            commands = engine.forward_commands([token])
        device.submit(commands)
        masked = time.perf_counter()
        allowed = constraint.mask()
        engine.constraint_seconds += time.perf_counter() - masked
        device.submit(sampler.mask(allowed) + sampler.commands(sampling, history))
        if i:
            engine.decode_host_seconds += time.perf_counter() - start
            engine.decode_tokens += 1
        token = await sampler.pick(sampling)
        history.append(token)
        if token not in stop_ids:
            advanced = time.perf_counter()
            constraint.advance(token)
            engine.constraint_seconds += time.perf_counter() - advanced
        yield token
        if token in stop_ids or constraint.finished or engine.pos >= engine.context:
            return
