"""Kani-TTS-2's codec-LM: the engine's LFM2 (Engine, models/lfm2.py) with Kani's RoPE rows
(models/kani_tts.py): each forward's cos/sin at the frame-level positions of its tokens, each
attention layer's with its learnable frequencies. Everything else (prefill, the KV cache and the
short convolutions' state, the host-driven decode loop, sampling) is the Engine's."""

from __future__ import annotations

from ..engine import Engine
from ..models.kani_tts import frame_positions, learnable_inv_freq, rope_rows, rope_table_name


class KaniEngine(Engine):
    """Engine.load(...) then use_kani(...) before the first forward. Its decode loop must know each
    token before the forward that feeds it (the position depends on it): generate with a constraint
    (decode/on_host.py), as the Speaker does; the GPU-fed loop never runs here."""

    def use_kani(self, settings, alphas: dict[int, float]) -> None:
        """settings: kani_files.KaniSettings; alphas: each attention layer's alpha_weight (learnable RoPE)."""
        self.kani = settings
        for layer, weight in alphas.items():
            rotary = self.executor.graph.rotary[rope_table_name(self.cfg, layer)]
            rotary.inv_freq = learnable_inv_freq(rotary.inv_freq, weight, settings.alpha_min, settings.alpha_max)

    def _rope_table(self, rotary, first: int, rows: int) -> bytes:
        k = self.kani
        positions = frame_positions(self.tokens, first, rows, k.audio_start, k.per_frame, k.audio_step)
        return rope_rows(rotary.inv_freq, positions)
