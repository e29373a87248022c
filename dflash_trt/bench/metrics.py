"""Benchmark arithmetic as small pure functions (no models, no clocks), so each is unit-tested on hand-made Stats.

Conventions
* One engine.generate call = one *batch*. Its Stats.prefill_s / decode_s are wall times shared by every sequence of
  the batch, so they are counted once per batch (`batch_timing`), never summed per sequence.
* Stats.new_tokens counts the first token, which comes from prefill; the decode phase produced new_tokens - 1.
* Decode-only TPOT = sum of batch decode_s / sum of decode tokens; tokens/s = 1 / TPOT.
* speedup = TPOT_AR / TPOT_spec (same batches, same outputs when lossless); efficiency = speedup / mean τ
  (1.0 would mean a spec step costs no more than one AR step).
* τ statistics pool the steps of all sequences (Stats.merge); τ counts the bonus token, 1 <= τ <= K.
Undefined quantities (no decode tokens, no spec steps) are None, which the JSON report writes as null.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from dflash_trt.spec.stats import Stats


@dataclass(frozen=True)
class BatchTiming:
    """Wall times and token counts of one engine.generate call in one mode."""

    prefill_s: float
    decode_s: float
    decode_tokens: int
    new_tokens: int
    sequences: int


def decode_tokens(stats: Stats) -> int:
    """Tokens produced by decode steps for one sequence (the first token comes from prefill)."""
    return max(stats.new_tokens - 1, 0)


def batch_timing(stats: Sequence[Stats]) -> BatchTiming:
    """Timing of one batch from the Stats of its sequences (times are shared: taken once, from the first)."""
    if not stats:
        raise ValueError("batch_timing needs the Stats of at least one sequence")
    return BatchTiming(prefill_s=float(stats[0].prefill_s), decode_s=float(stats[0].decode_s),
                       decode_tokens=sum(decode_tokens(s) for s in stats),
                       new_tokens=sum(s.new_tokens for s in stats), sequences=len(stats))


def tpot(timings: Sequence[BatchTiming]) -> float | None:
    """Decode-only time per output token (seconds): sum of decode_s / sum of decode tokens."""
    tokens = sum(t.decode_tokens for t in timings)
    if tokens <= 0:
        return None
    return sum(t.decode_s for t in timings) / tokens


def tokens_per_s(tpot_s: float | None) -> float | None:
    return 1.0 / tpot_s if tpot_s is not None and tpot_s > 0 else None


def speedup(tpot_ar: float | None, tpot_spec: float | None) -> float | None:
    """Decode-only speedup of spec over AR: TPOT_AR / TPOT_spec."""
    if tpot_ar is None or tpot_spec is None or tpot_spec <= 0:
        return None
    return tpot_ar / tpot_spec


def efficiency(speedup_x: float | None, mean_tau: float | None) -> float | None:
    """speedup / τ: the share of the ideal (a spec step as cheap as an AR step) that was realised."""
    if speedup_x is None or mean_tau is None or mean_tau <= 0:
        return None
    return speedup_x / mean_tau


def mode_summary(timings: Sequence[BatchTiming]) -> dict:
    """Totals and rates of one mode (AR or spec) over a list of batches."""
    t = tpot(timings)
    prefill = sum(b.prefill_s for b in timings)
    decode = sum(b.decode_s for b in timings)
    new = sum(b.new_tokens for b in timings)
    return {
        "batches": len(timings),
        "sequences": sum(b.sequences for b in timings),
        "new_tokens": new,
        "decode_tokens": sum(b.decode_tokens for b in timings),
        "prefill_s": prefill,
        "decode_s": decode,
        "tpot_s": t,
        "decode_tokens_per_s": tokens_per_s(t),
        "e2e_tokens_per_s": new / (prefill + decode) if prefill + decode > 0 else None,
    }


def pool_stats(stats: Sequence[Stats], block_size: int | None = None) -> Stats:
    """The τ of every step of every sequence in one Stats (timings zeroed: they are per batch, see batch_timing)."""
    merged = Stats.merge(list(stats))
    if block_size is not None:
        if any(t > block_size for t in merged.taus):
            raise ValueError(f"a step has τ > block_size {block_size}")
        merged.block_size = max(merged.block_size, block_size)
    merged.prefill_s = merged.decode_s = 0.0
    return merged


def acceptance_summary(stats: Sequence[Stats], block_size: int | None = None) -> dict:
    """mean τ, τ histogram (index t-1 = steps with τ = t) and per-position acceptance, pooled over sequences."""
    pooled = pool_stats(stats, block_size)
    steps = pooled.steps
    hist = pooled.histogram
    return {
        "block_size": pooled.block_size,
        "steps": steps,
        "mean_tau": pooled.mean_tau if steps else None,
        "histogram": hist,
        "histogram_fraction": [c / steps for c in hist] if steps else [0.0] * len(hist),
        "per_position_acceptance": pooled.per_position_acceptance,
    }


def first_divergence(a: Sequence[int], b: Sequence[int]) -> int | None:
    """Index of the first differing token (or of the shorter length if one is a prefix); None if equal."""
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return i
    return None if len(a) == len(b) else min(len(a), len(b))


def compare_outputs(ar: Sequence[Sequence[int]], spec: Sequence[Sequence[int]]) -> dict:
    """Token-for-token comparison of spec outputs against AR outputs for the same prompts (and seeds)."""
    if len(ar) != len(spec):
        raise ValueError(f"{len(ar)} AR outputs vs {len(spec)} spec outputs")
    mismatches = []
    for i, (a, s) in enumerate(zip(ar, spec)):
        d = first_divergence(a, s)
        if d is not None:
            mismatches.append({"prompt": i, "first_divergence": d, "ar_tokens": len(a), "spec_tokens": len(s)})
    return {"all_match_ar": not mismatches, "num_match_ar": len(ar) - len(mismatches), "mismatches": mismatches}


def summarize(ar_timings: Sequence[BatchTiming], spec_timings: Sequence[BatchTiming], spec_stats: Sequence[Stats],
              ar_outputs: Sequence[Sequence[int]], spec_outputs: Sequence[Sequence[int]],
              block_size: int | None = None) -> dict:
    """Every reported number for one group of prompts (a dataset, or all of them)."""
    acc = acceptance_summary(spec_stats, block_size)
    ar, sp = mode_summary(ar_timings), mode_summary(spec_timings)
    sx = speedup(ar["tpot_s"], sp["tpot_s"])
    out = {
        "num_prompts": len(spec_outputs),
        "mean_tau": acc["mean_tau"],
        "speedup": sx,
        "efficiency": efficiency(sx, acc["mean_tau"]),
        "tpot_ar_s": ar["tpot_s"],
        "tpot_spec_s": sp["tpot_s"],
        "tokens_per_s_ar": ar["decode_tokens_per_s"],
        "tokens_per_s_spec": sp["decode_tokens_per_s"],
        **compare_outputs(ar_outputs, spec_outputs),
        **{k: v for k, v in acc.items() if k != "mean_tau"},
        "ar": ar,
        "spec": sp,
    }
    return out
