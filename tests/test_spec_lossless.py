"""Losslessness of the speculative loop.

Greedy: spec output == AR output token for token, for batches of prompts of different lengths and every block size,
with the random drafter (acceptance ~0) and with an *oracle* drafter that proposes the true continuation with random
corruptions, so acceptance is ragged across the batch and spans 0..K-1 (including whole blocks and EOS inside one).
Sampling: the emitted tokens follow the target's exact distribution (chi-square against probabilities computed from
the target), and the same test rejects a plausible-looking wrong acceptance rule.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from scipy import stats as sps

from dflash_trt import SamplingParams
from dflash_trt.engines.torch_engine import TorchEngine
from dflash_trt.kernels.ops import library_ops, reference_ops
from dflash_trt.kernels.sample_accept import AcceptResult, sample_accept
from dflash_trt.spec.sampling import filtered_scores

PROMPTS = [[5, 17, 42, 9, 100, 3, 77], [8], [250, 251, 12, 44], [60, 61, 62, 63, 64, 65, 66, 67, 68, 69, 70, 71, 72]]

# The one step, every way it runs: a window of 1 step (host loop) or 4 (device loop), with the torch references or
# with the CUDA kernels' own code under CPU emulation.
STEP_VARIANTS = {"window1-ref": (1, "reference"), "window4-ref": (4, "reference"),
                 "window1-emu": (1, "emulated"), "window4-emu": (4, "emulated")}


@pytest.fixture(scope="module", params=list(STEP_VARIANTS))
def step_variant(request):
    window, kind = STEP_VARIANTS[request.param]
    if kind == "emulated":
        return window, library_ops(request.getfixturevalue("emu_lib"))
    return window, reference_ops()


def make_oracle(engine: TorchEngine, continuations: list[list[int]], corrupt: float, seed: int = 0) -> TorchEngine:
    """The engine's drafter still runs (so its cache bookkeeping is exercised), but the drafts become the true AR
    continuation, each corrupted with probability `corrupt` — a drafter with known, ragged acceptance."""
    step = engine.step_runner
    real = step.draft
    rng = np.random.default_rng(seed)
    vocab = engine.target.cfg.vocab_size

    def draft(rows, last, starts, counts, k, upto):
        verify_ids, drafts = real(rows, last, starts, counts, k, upto)
        drafts = drafts.clone()
        for row, slot in enumerate(rows.tolist()):
            full = continuations[slot]
            for j in range(k - 1):
                pos = int(starts[row]) + 1 + j
                truth = full[pos] if pos < len(full) else 0
                wrong = rng.random() < corrupt
                drafts[row, j] = (truth + 1 + int(rng.integers(vocab - 1))) % vocab if wrong else truth
        return torch.cat([last[:, None], drafts], dim=1), drafts

    step.draft = draft
    return engine


def _engine(pair, variant, continuations=None, corrupt=0.0, ops=None):
    """A fresh engine on the pair, running the step as `variant` says; with `continuations`, an oracle drafter."""
    target_dir, drafter_dir = pair
    window, variant_ops = variant
    engine = TorchEngine.from_pretrained(target_dir, drafter_dir, device="cpu", tokenizer=False, max_batch_size=16,
                                         max_seq_len=256, decode_loop="device" if window > 1 else "host",
                                         steps_per_sync=window, ops=ops or variant_ops)
    return make_oracle(engine, continuations, corrupt) if continuations is not None else engine


def _full_sequences(prompts, results):
    return [list(p) + r.token_ids for p, r in zip(prompts, results)]


@pytest.fixture(scope="module", params=["qwen3", "llama"])
def family_pair(request, make_pair):
    return make_pair(family=request.param)


@pytest.mark.parametrize("batch", [1, 4])
@pytest.mark.parametrize("verify_len", [2, 4, 8, 16])
def test_greedy_spec_equals_ar(family_pair, step_variant, batch, verify_len):
    engine = _engine(family_pair, step_variant)
    prompts = PROMPTS[:batch]
    params = SamplingParams(max_new_tokens=40, ignore_eos=True)
    ar = engine.generate(prompts, params, use_drafter=False)
    spec = engine.generate(prompts, params, verify_len=verify_len)
    for a, s in zip(ar, spec):
        assert s.token_ids == a.token_ids
        assert len(s.token_ids) == 40 and s.finish_reason == "length"
        assert all(1 <= t <= verify_len for t in s.stats.taus)

    # Oracle drafts: ragged acceptance across the batch, including fully accepted blocks.
    oracle = _engine(family_pair, step_variant, _full_sequences(prompts, ar), corrupt=0.15)
    spec = oracle.generate(prompts, params, verify_len=verify_len)
    taus = [t for s in spec for t in s.stats.taus]
    for a, s in zip(ar, spec):
        assert s.token_ids == a.token_ids
    assert max(taus) == verify_len and np.mean(taus) > 1.5
    if batch > 1:  # different sequences accepted different lengths in the same step at least once
        per_step = [s.stats.taus for s in spec]
        assert any(len({steps[i] for steps in per_step if i < len(steps)}) > 1 for i in range(10))


STEP_VARIANTS_REF = (1, reference_ops())


def _teacher_forced_margins(engine, sequence: list[int], prompt_len: int) -> list[float]:
    """top1 - top2 logit gap at each generated position, from one forward over the whole sequence."""
    dev = engine.target.lm_head.weight.device
    cache = engine.target.new_cache(1, len(sequence) + 1)
    with torch.inference_mode():
        logits, _ = engine.target(torch.tensor([sequence], device=dev), cache, torch.arange(1, device=dev))
    top2 = logits[0, prompt_len - 1: len(sequence) - 1].float().topk(2, dim=-1).values
    return (top2[:, 0] - top2[:, 1]).tolist()


def _tokens_equal_until_a_near_tie(engine, prompts: list[list[int]], ar, spec) -> int:
    """bf16: spec output equals AR's until its first divergence, which may only come where the target's top-2
    logits are within a few bf16 ulps (gap < 0.1, teacher-forced along AR's output); returns the tokens compared."""
    checked = 0
    for prompt, a, s in zip(prompts, ar, spec):
        diverged = next((i for i, (x, y) in enumerate(zip(a.token_ids, s.token_ids)) if x != y), None)
        if diverged is not None:
            margin = _teacher_forced_margins(engine, list(prompt) + a.token_ids, len(prompt))[diverged]
            assert margin < 0.1, f"spec left AR at token {diverged}, where the target's margin is {margin:.3f}"
        checked += len(a.token_ids) if diverged is None else diverged
    return checked


def test_greedy_spec_equals_ar_bfloat16(make_pair):
    """bf16 (the CUDA dtype) through the same code. bf16 matmuls are not batch-invariant (a K-token verify rounds
    differently from K one-token steps), so argmax may legitimately flip where the target itself is within rounding of
    a tie. The test demands that spec and AR agree until the first divergence, that a divergence happens only where the
    target's top-2 logits are within a few bf16 ulps (gap < 0.1), and that most tokens were compared."""
    pair = make_pair(family="qwen3", dtype="bfloat16")
    variant = STEP_VARIANTS_REF
    engine = _engine(pair, variant)
    params = SamplingParams(max_new_tokens=24, ignore_eos=True)
    ar = engine.generate(PROMPTS, params, use_drafter=False)
    oracle = _engine(pair, variant, _full_sequences(PROMPTS, ar), corrupt=0.2)
    assert oracle.target.lm_head.weight.dtype == torch.bfloat16
    spec = oracle.generate(PROMPTS, params, verify_len=8)
    checked = _tokens_equal_until_a_near_tie(engine, PROMPTS, ar, spec)
    assert checked >= len(PROMPTS) * 24 // 2  # most of the tokens were compared


@pytest.mark.parametrize("verify_len", [4, 16])
def test_stop_token_inside_accepted_block(family_pair, step_variant, verify_len):
    engine = _engine(family_pair, step_variant)
    free = engine.generate(PROMPTS, SamplingParams(max_new_tokens=30, ignore_eos=True), use_drafter=False)
    # Stop tokens chosen from the middle of each AR continuation, so a stop lands inside an accepted block.
    stops = tuple(sorted({r.token_ids[7] for r in free}))
    params = SamplingParams(max_new_tokens=30, ignore_eos=True, stop_token_ids=stops)
    ar = engine.generate(PROMPTS, params, use_drafter=False)
    oracle = _engine(family_pair, step_variant, _full_sequences(PROMPTS, free), corrupt=0.0)
    events = list(oracle.stream(PROMPTS, params, verify_len=verify_len))
    spec = oracle.generate(PROMPTS, params, verify_len=verify_len)
    for a, s in zip(ar, spec):
        assert s.token_ids == a.token_ids
        assert s.finish_reason == a.finish_reason == "stop"
        assert s.token_ids[-1] in stops and not set(s.token_ids[:-1]) & set(stops)
    # The step that hit the stop had accepted past it (perfect drafts) and emitted fewer tokens than it accepted:
    # the tokens emitted over all steps are fewer than the steps' τ summed.
    cut_inside = [len(s.token_ids) - 1 < sum(s.stats.taus) for s in spec if s.stats.taus]
    assert any(cut_inside)
    # Streamed tokens concatenate to the final result.
    for i, s in enumerate(spec):
        assert [t for e in events if e.index == i for t in e.token_ids] == s.token_ids


def test_eos_from_config_stops_generation(make_pair, step_variant):
    """EOS comes from config.json (eos_token_id = 0 for token-id pairs) unless ignore_eos."""
    pair = make_pair(family="qwen3", vocab_size=4, seed=3)  # tiny vocab: EOS appears quickly
    engine = _engine(pair, step_variant)
    ar = engine.generate([[1, 2, 3]] * 4, [SamplingParams(max_new_tokens=64, temperature=1.0, seed=s) for s in range(4)],
                         use_drafter=False)
    spec = engine.generate([[1, 2, 3]] * 4, [SamplingParams(max_new_tokens=64, temperature=1.0, seed=s) for s in range(4)])
    assert [r.token_ids for r in spec] == [r.token_ids for r in ar]
    stopped = [r for r in spec if r.finish_reason == "stop"]
    assert stopped and all(r.token_ids[-1] == 0 and 0 not in r.token_ids[:-1] for r in stopped)


@pytest.mark.parametrize("max_new_tokens", [1, 2, 5, 17])
def test_max_new_tokens_cut_inside_block(family_pair, step_variant, max_new_tokens):
    engine = _engine(family_pair, step_variant)
    params = SamplingParams(max_new_tokens=max_new_tokens, ignore_eos=True)
    ar = engine.generate(PROMPTS, params, use_drafter=False)
    oracle = _engine(family_pair, step_variant, _full_sequences(PROMPTS, ar), corrupt=0.0)
    spec = oracle.generate(PROMPTS, params, verify_len=16)
    for a, s in zip(ar, spec):
        assert s.token_ids == a.token_ids and len(s.token_ids) == max_new_tokens


@pytest.mark.parametrize("verify_len", [2, 8, 16])
def test_sampling_same_seed_spec_equals_ar(family_pair, step_variant, verify_len):
    """Counter-based sampling: for the same seed, spec emits exactly the AR samples (not only the same distribution)."""
    engine = _engine(family_pair, step_variant)
    params = [SamplingParams(max_new_tokens=32, temperature=t, top_k=k, top_p=p, seed=s, ignore_eos=True)
              for s, (t, k, p) in enumerate([(1.0, 0, 1.0), (0.7, 20, 1.0), (1.3, 0, 0.9), (0.0, 0, 1.0)])]
    ar = engine.generate(PROMPTS, params, use_drafter=False)
    oracle = _engine(family_pair, step_variant, _full_sequences(PROMPTS, ar), corrupt=0.25)
    spec = oracle.generate(PROMPTS, params, verify_len=verify_len)
    assert [s.token_ids for s in spec] == [a.token_ids for a in ar]
    again = engine.generate(PROMPTS, params, use_drafter=False)
    assert [r.token_ids for r in again] == [a.token_ids for a in ar]  # reproducible per seed
    other = engine.generate(PROMPTS, [SamplingParams(**{**p.__dict__, "seed": p.seed + 100}) for p in params],
                            use_drafter=False)
    assert [r.token_ids for r in other[:3]] != [a.token_ids for a in ar[:3]]  # and the seed matters


# ---- distribution ------------------------------------------------------------------------------------------------------

VOCAB, PROMPT, SAMPLES = 16, [3, 7, 11, 2], 6000


def _exact_joint(engine: TorchEngine, params: SamplingParams) -> np.ndarray:
    """P(t1, t2, t3) [V, V, V] of the first three generated tokens, from the target's own logits (EOS disabled)."""
    tgt, v = engine.target, VOCAB
    contexts = [PROMPT + [a, b] for a in range(v) for b in range(v)]
    cache = tgt.new_cache(len(contexts), 16)
    slots = torch.arange(len(contexts))
    with torch.inference_mode():
        logits, _ = tgt(torch.tensor(contexts), cache, slots)  # [V*V, P+2, V]: each position's next-token logits
    n = len(PROMPT)
    temp = torch.full((logits.shape[0],), params.temperature)
    tk = torch.full((logits.shape[0],), params.top_k)
    tp = torch.full((logits.shape[0],), params.top_p)
    probs = filtered_scores(logits[:, n - 1: n + 2].double(), temp, tk, tp).softmax(-1).numpy()
    p1 = probs[0, 0]  # same prompt everywhere
    p2 = probs[:, 1].reshape(v, v, v)[:, 0]  # P(t2 | t1): rows with b = 0 (t2 position depends on a only)
    p3 = probs[:, 2].reshape(v, v, v)  # P(t3 | t1, t2)
    return p1[:, None, None] * p2[:, :, None] * p3


def _chi_square_pvalue(tokens: np.ndarray, joint: np.ndarray) -> float:
    """Goodness of fit of sampled (t1, t2, t3) against `joint`, on the pairs (t1, t2) and the t3 marginal."""
    pvals = []
    for observed_idx, expected in ((tokens[:, 0] * VOCAB + tokens[:, 1], joint.sum(2).ravel()),
                                   (tokens[:, 2], joint.sum((0, 1)))):
        observed = np.bincount(observed_idx, minlength=expected.size).astype(float)
        expected = expected * len(tokens)
        big = expected >= 5  # pool the sparse cells so the chi-square approximation holds
        obs = np.append(observed[big], observed[~big].sum())
        exp = np.append(expected[big], expected[~big].sum())
        keep = exp > 0
        statistic = float((((obs - exp) ** 2)[keep] / exp[keep]).sum())
        pvals.append(float(sps.chi2.sf(statistic, df=int(keep.sum()) - 1)))
    return min(pvals)


def _sample_tokens(engine, params: SamplingParams, use_drafter: bool, verify_len: int = 8) -> np.ndarray:
    plist = [SamplingParams(**{**params.__dict__, "seed": 10_000 + s}) for s in range(SAMPLES)]
    results = engine.generate([PROMPT] * SAMPLES, plist, verify_len=verify_len if use_drafter else None,
                              use_drafter=use_drafter)
    return np.array([r.token_ids[:3] for r in results])


def _wrong_rule(p_accept: float):
    """A plausible-looking but lossy rule: also accept a draft whenever the target gives it probability >= p_accept."""

    def rule(logits, drafts, temperature, top_k, top_p, keys, positions, stop_ids, remaining, modes=None):
        right = sample_accept(logits, drafts, temperature, top_k, top_p, keys, positions, stop_ids, remaining, modes)
        if drafts.shape[1] == 0:
            return right
        probs = filtered_scores(logits, temperature, top_k, top_p).softmax(-1)[:, :-1]
        ok = (probs.gather(-1, drafts[..., None])[..., 0] >= p_accept) | (drafts == right.target_tokens[:, :-1])
        accepted = ok.long().cumprod(1).sum(1)
        tokens = right.target_tokens.clone()
        tokens[:, :-1] = torch.where(ok, drafts, tokens[:, :-1])
        emit = torch.minimum(accepted + 1, remaining)
        return AcceptResult(tokens, accepted, emit, emit >= remaining)

    return rule


@pytest.fixture(scope="module", params=[1, 4], ids=["window1-ref", "window4-ref"])
def small_vocab_engine(make_pair, request):
    """The distribution tests draw 6000 samples per mode: through the torch references only (the emulated kernels run
    every CUDA thread as a fiber; test_kernels.py shows they draw the references' samples bit for bit, and the
    same-seed tests here run the whole step through them)."""
    target_dir, drafter_dir = make_pair(family="qwen3", vocab_size=VOCAB, seed=7)
    window, ops = request.param, reference_ops()
    return TorchEngine.from_pretrained(target_dir, drafter_dir, device="cpu", tokenizer=False, max_batch_size=2000,
                                       max_seq_len=32, decode_loop="device" if window > 1 else "host",
                                       steps_per_sync=window, ops=ops)


@pytest.mark.parametrize("params", [SamplingParams(max_new_tokens=3, temperature=1.0, ignore_eos=True),
                                    SamplingParams(max_new_tokens=3, temperature=0.8, top_k=6, top_p=0.9, ignore_eos=True)],
                         ids=["T1", "T0.8-topk6-topp0.9"])
def test_sampling_matches_target_distribution(small_vocab_engine, params):
    joint = _exact_joint(small_vocab_engine, params)
    spec = _sample_tokens(small_vocab_engine, params, use_drafter=True)
    ar = _sample_tokens(small_vocab_engine, params, use_drafter=False)
    assert _chi_square_pvalue(ar, joint) > 1e-3  # the sampler itself is right
    assert _chi_square_pvalue(spec, joint) > 1e-3  # and speculation does not change the distribution


def test_sampling_test_rejects_wrong_acceptance_rule(make_pair):
    """The negative control: the same test, with a lossy acceptance rule in the step's ops table, must fail."""
    params = SamplingParams(max_new_tokens=3, temperature=1.0, ignore_eos=True)
    target_dir, drafter_dir = make_pair(family="qwen3", vocab_size=VOCAB, seed=7)
    wrong = TorchEngine.from_pretrained(target_dir, drafter_dir, device="cpu", tokenizer=False, max_batch_size=2000,
                                        max_seq_len=32, ops=reference_ops()._replace(sample_accept=_wrong_rule(0.1)))
    joint = _exact_joint(wrong, params)
    spec = _sample_tokens(wrong, params, use_drafter=True)
    assert _chi_square_pvalue(spec, joint) < 1e-6


def test_bad_requests_are_clear(make_pair):
    from dflash_trt.errors import RequestError

    engine = _engine(make_pair(family="qwen3"), STEP_VARIANTS_REF)
    cases = [
        (dict(prompts=[[1, 2]], params=SamplingParams(temperature=-1)), "temperature"),
        (dict(prompts=[[1, 2]], params=SamplingParams(top_p=0.0)), "top_p"),
        (dict(prompts=[[1, 2]], params=SamplingParams(top_k=-3)), "top_k"),
        (dict(prompts=[[1, 2]], params=SamplingParams(max_new_tokens=0)), "max_new_tokens"),
        (dict(prompts=[[1, 2]], params=SamplingParams(max_new_tokens=1000)), "max_seq_len"),
        (dict(prompts=[[]]), "empty"),
        (dict(prompts=[[1, 10**6]]), "vocabulary"),
        (dict(prompts=[[1, 2]], verify_len=17), "verify_len"),
        (dict(prompts=[[1, 2]], verify_len=1), "verify_len"),
        (dict(prompts=[[1, 2]], verify_len=4, block_size=8), "disagree"),
        (dict(prompts=["text without tokenizer"]), "tokenizer"),
        (dict(prompts=[[1], [2]], params=[SamplingParams()]), "SamplingParams"),
    ]
    for kwargs, word in cases:
        with pytest.raises(RequestError, match=word):
            engine.generate(**kwargs)
