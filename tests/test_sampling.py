"""Sampling against numpy: argmax, repetition penalty, the top-k candidates and lse, the exact
full-vocabulary draw, and the distribution of whole draws (candidate path and GPU fallback)."""

import asyncio
import re

import numpy as np
import pytest
from gpu_harness import device

from py_engine.decode.row_draw import CANDIDATES
from py_engine.decode.sampling import Sampler
from py_engine.decode.token_choice import FullDraw, SamplingParams
from py_engine.runtime.kernels import SHADER_DIR

ROW = 3  # the row under test sits after two others, at an offset that is not 256-aligned for most vocabs


def make_sampler(logits: np.ndarray, subgroups: bool = True):
    """A Sampler over row ROW of a [ROW + 1, vocab] buffer holding `logits` (other rows are noise);
    subgroups=False: on a device without them (the kernels' workgroup-memory reductions)."""
    dev, kernels = device(subgroups=subgroups)
    vocab = logits.size
    rows = np.random.default_rng(vocab).standard_normal((ROW + 1, vocab)).astype(np.float32) * 50
    rows[ROW] = logits
    buf = dev.create_buffer(rows.nbytes)
    dev.write_buffer(buf, 0, rows.tobytes())
    sampler = Sampler(dev, kernels, vocab, buf, logits_offset=ROW * vocab * 4)

    def read_row() -> np.ndarray:
        raw = asyncio.run(dev.read_buffer(buf, ROW * vocab * 4, vocab * 4))
        return np.frombuffer(raw, np.float32)

    return sampler, read_row


def rank_order(logits: np.ndarray) -> np.ndarray:
    """Token ids in the sampling order: logit descending, ties → lower id."""
    return np.lexsort((np.arange(logits.size), -logits))


def reference_probs(logits, temperature, top_k=0, top_p=1.0) -> np.ndarray:
    """HF's temperature → top-k (ties at the cut kept) → top-p (ties split by lower id), in float64."""
    scaled = logits.astype(np.float64) / temperature
    keep = np.isfinite(scaled)
    if 0 < top_k < logits.size:
        keep &= logits >= logits[rank_order(logits)[top_k - 1]]
    p = np.where(keep, np.exp(scaled - scaled[keep].max()), 0.0)
    p /= p.sum()
    if top_p < 1:
        order = rank_order(logits)
        before = np.cumsum(p[order]) - p[order]
        nucleus = order[(before < top_p) | (np.arange(order.size) == 0)]
        p = np.where(np.isin(np.arange(p.size), nucleus), p, 0.0)
        p /= p.sum()
    return p


def logits_with_ties(vocab: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal(vocab) * 3).astype(np.float32)
    order = rank_order(x)
    x[order[1]] = x[order[0]]  # a tie for the max, the higher id of the two listed first by index
    if vocab > CANDIDATES + 3:
        x[order[CANDIDATES - 3 : CANDIDATES + 3]] = x[order[CANDIDATES - 3]]  # a tie across the candidates' end
    x[rng.choice(vocab, 5, replace=False)] = -np.inf  # masked tokens
    return x


SUBGROUPS = pytest.mark.parametrize("subgroups", [True, False], ids=["subgroups", "workgroup-memory"])


@SUBGROUPS
@pytest.mark.parametrize("vocab", [384, 5000, 151936])
def test_argmax_lowest_id_on_ties(vocab, subgroups):
    x = logits_with_ties(vocab, 1)
    top = np.flatnonzero(x == x.max())
    assert len(top) >= 2
    sampler, _ = make_sampler(x, subgroups)
    assert asyncio.run(sampler.sample(SamplingParams(), [])) == np.argmax(x) == top[0]


def test_repetition_penalty_matches_hf_formula():
    vocab = 5000
    x = logits_with_ties(vocab, 2)
    x[[10, 11]] = [0.0, -0.0]
    history = [10, 11, 7, 4999, 7, 123, vocab + 5, 7, 3000, 42]  # repeats count once; ids past vocab are ignored
    sampler, read_row = make_sampler(x)
    token = asyncio.run(sampler.sample(SamplingParams(repetition_penalty=1.3), history))
    expected = x.copy()
    seen = np.unique([t for t in history if t < vocab])
    expected[seen] = np.where(x[seen] < 0, x[seen] * np.float32(1.3), x[seen] / np.float32(1.3))
    np.testing.assert_allclose(read_row(), expected, rtol=1e-6)
    assert token == np.argmax(expected)


@pytest.mark.parametrize("vocab,temperature", [(50, 1.0), (384, 1.0), (5000, 0.7), (151936, 1.3)])
@SUBGROUPS
def test_candidates_and_lse(vocab, temperature, subgroups):
    x = logits_with_ties(vocab, 3)
    sampler, _ = make_sampler(x, subgroups)
    sampler.device.submit(sampler.commands(SamplingParams(temperature=temperature), []))
    values, ids, lse = asyncio.run(sampler.read_candidates())
    order = rank_order(x)[:CANDIDATES]
    assert ids == order.tolist()
    np.testing.assert_array_equal(np.array(values, np.float32), x[order])
    scaled = x[np.isfinite(x)].astype(np.float64) / temperature
    assert lse == pytest.approx(scaled.max() + np.log(np.exp(scaled - scaled.max()).sum()), rel=1e-6)


def full_draw_reference(x, temperature, draw: FullDraw) -> tuple[np.ndarray, np.ndarray]:
    """The inverse-CDF table (id order) that sample_full.wgsl draws from: kept and not skipped."""
    window = reference_probs(x, temperature, min(draw.top_k, x.size), draw.top_p) > 0
    if draw.skip_candidates:
        window[rank_order(x)[:CANDIDATES]] = False
    ids = np.flatnonzero(window)
    return ids, np.cumsum(np.exp(x[ids].astype(np.float64) / temperature))


@pytest.mark.parametrize("vocab", [384, 5000])
@pytest.mark.parametrize(
    "top_k,top_p,skip_candidates",
    [(0, 1.0, True), (100, 1.0, False), (0, 0.9, False), (150, 0.7, False), (CANDIDATES - 3, 1.0, False)],
    ids=["tail", "top_k", "top_p", "top_k+top_p", "tie_at_top_k"],
)
def test_full_draw_is_the_inverse_cdf(vocab, top_k, top_p, skip_candidates):
    """sample_full.wgsl maps u to the token the exact CDF gives (u near a step edge is skipped)."""
    x = logits_with_ties(vocab, 4)
    temperature = 1.5
    draw = FullDraw(top_k or vocab, top_p, 0.0, skip_candidates)
    sampler, _ = make_sampler(x)
    params = SamplingParams(temperature=temperature)
    sampler.device.submit(sampler.commands(params, []))
    values, ids, lse = asyncio.run(sampler.read_candidates())
    table_ids, cdf = full_draw_reference(x, temperature, draw)
    checked = 0
    for u in np.linspace(0.003, 0.997, 23):
        at = int(np.searchsorted(cdf, u * cdf[-1], side="right"))
        edges = cdf[max(at - 1, 0) : at + 1] / cdf[-1]
        if np.min(np.abs(edges - u)) < 1e-5:
            continue
        draw.u = float(u)
        assert asyncio.run(sampler.draw_on_gpu(draw, params, values[-1], ids[-1], lse)) == table_ids[at]
        checked += 1
    assert checked > 15


def draw_counts(sampler, params, n) -> np.ndarray:
    """n draws from one row: the commands run once, then pick draws again each time."""
    sampler.reset()
    sampler.device.submit(sampler.commands(params, []))
    counts = np.zeros(sampler.vocab, np.int64)
    for _ in range(n):
        counts[asyncio.run(sampler.pick(params))] += 1
    return counts


def assert_matches(counts, probs):
    """Nothing outside the support, and a loose chi-square over bins expecting >= 5 draws."""
    n = counts.sum()
    assert counts[probs == 0].sum() == 0, f"excluded tokens drawn: {np.flatnonzero((probs == 0) & (counts > 0))}"
    big = probs * n >= 5
    observed = np.append(counts[big], counts[~big].sum())
    expected = np.append(probs[big] * n, probs[~big].sum() * n)
    keep = expected > 0
    chi2 = (((observed - expected) ** 2)[keep] / expected[keep]).sum()
    dof = keep.sum() - 1
    assert chi2 < dof + 6 * np.sqrt(2 * dof), f"chi2 {chi2:.1f} for {dof} degrees of freedom"


def peaked_logits(vocab=384, seed=5) -> np.ndarray:
    """About 80 % of the mass (T = 1) on the first CANDIDATES tokens: both paths get used."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(vocab).astype(np.float32)
    x[rng.choice(vocab, 40, replace=False)] += 4
    return x


@pytest.mark.parametrize(
    "params,n",
    [
        (SamplingParams(temperature=1.0, seed=1), 1500),  # candidates, or the tail on the GPU past their mass
        (SamplingParams(temperature=1.0, top_k=10, seed=2), 1000),
        (SamplingParams(temperature=0.8, top_p=0.5, seed=3), 1000),  # nucleus within the candidates
        (SamplingParams(temperature=2.0, top_p=0.9, seed=4), 400),  # nucleus past them: GPU cut
        (SamplingParams(temperature=1.0, top_k=100, seed=5), 400),  # top_k > CANDIDATES: GPU cut
        (SamplingParams(temperature=1.0, top_k=100, top_p=0.8, seed=6), 400),
    ],
    ids=["plain", "top_k", "top_p_inside", "top_p_past", "top_k_past", "top_k_past+top_p"],
)
def test_draw_distribution(params, n):
    x = peaked_logits()
    probs = reference_probs(x, params.temperature, params.top_k, params.top_p)
    sampler, _ = make_sampler(x)
    assert_matches(draw_counts(sampler, params, n), probs)


def test_flat_row_mostly_falls_back_and_stays_exact():
    x = (np.random.default_rng(6).standard_normal(384) * 0.3).astype(np.float32)  # candidates hold ~20 %
    sampler, _ = make_sampler(x)
    params = SamplingParams(temperature=1.0, seed=7)
    probs = reference_probs(x, 1.0)
    counts = draw_counts(sampler, params, 800)
    assert counts[rank_order(x)[CANDIDATES:]].sum() > 500
    groups = np.arange(384) // 16  # 24 bins of 16 ids: the per-token counts are too small alone
    assert_matches(np.bincount(groups, counts), np.bincount(groups, probs))


def test_top_k_keeps_the_whole_tie_at_its_cut():
    x = peaked_logits()
    order = rank_order(x)
    x[order[3:7]] = x[order[3]]
    params = SamplingParams(temperature=1.0, top_k=5, seed=8)
    probs = reference_probs(x, 1.0, top_k=5)
    assert (probs > 0).sum() == 7
    sampler, _ = make_sampler(x)
    assert_matches(draw_counts(sampler, params, 700), probs)


def test_reference_matches_hf_warpers():
    lp = pytest.importorskip("transformers.generation.logits_process")
    import torch

    x = peaked_logits()
    for temperature, top_k, top_p in [(0.7, 10, 1.0), (1.0, 0, 0.8), (1.5, 100, 0.9)]:
        scores = torch.from_numpy(x.copy())[None] / temperature
        if top_k:
            scores = lp.TopKLogitsWarper(top_k)(None, scores)
        if top_p < 1:
            scores = lp.TopPLogitsWarper(top_p)(None, scores)
        hf = torch.softmax(scores.double(), -1)[0].numpy()
        np.testing.assert_allclose(reference_probs(x, temperature, top_k, top_p), hf, atol=1e-6)


def test_same_seed_same_tokens():
    x = (np.random.default_rng(9).standard_normal(5000) * 0.5).astype(np.float32)
    sampler, _ = make_sampler(x)

    def run(seed):
        params = SamplingParams(temperature=1.0, top_p=0.95, seed=seed)
        sampler.reset()
        sampler.device.submit(sampler.commands(params, []))
        return [asyncio.run(sampler.pick(params)) for _ in range(12)]

    first = run(11)
    assert run(11) == first
    assert run(12) != first


def test_invalid_params_rejected():
    sampler, _ = make_sampler(np.zeros(384, np.float32))
    for bad in [SamplingParams(temperature=-1), SamplingParams(top_p=1.5), SamplingParams(repetition_penalty=0)]:
        with pytest.raises(ValueError):
            sampler.commands(bad, [])
    with pytest.raises(ValueError):
        sampler.commands(SamplingParams(repetition_penalty=1.2), [-1])


def test_kernel_constants_come_from_python():
    """The sampling kernels' workgroup size and sample_pick's layout are defines from row_draw.py,
    not numbers kept in step by hand: no literal workgroup size or out index in the WGSL."""
    for name in ("argmax", "repetition_penalty", "topk_chunks", "topk_merge", "sample_full"):
        src = re.sub(r"//[^\n]*", "", (SHADER_DIR / f"{name}.wgsl").read_text())
        assert "SAMPLING_THREADS" in src and not re.search(r"@workgroup_size\(\s*\d", src), name
        assert not re.search(r"\b256u?\b", src), name
    pick = re.sub(r"//[^\n]*", "", (SHADER_DIR / "sample_pick.wgsl").read_text())
    assert not re.search(r"\bout\[\d", pick.replace("out[0]", ""))
