"""Benchmark arithmetic as small pure functions (no models, no clocks), so each is unit-tested on hand-made Stats.

Conventions
* One engine.generate call = one *batch*. Its Stats.prefill_s / decode_s are wall times shared by every sequence of
  the batch, so they are counted once per batch (`batch_timing`), never summed per sequence.
* Stats.new_tokens counts the first token, which comes from prefill; the decode phase produced new_tokens - 1.
* Decode-only TPOT = sum of batch decode_s / sum of decode tokens; tokens/s = 1 / TPOT.
* speedup = TPOT_AR / TPOT_spec (same batches, same outputs when lossless); efficiency = speedup / mean τ
  (1.0 would mean a spec step costs no more than one AR step).
* End-to-end tokens/s (every mode, one definition) = sum of new_tokens / sum of (prefill_s + decode_s) over the
  mode's generate calls: the first token and the prefill are included.
* τ statistics pool the steps of all sequences (Stats.merge); τ counts the bonus token, 1 <= τ <= K (K = verify_len,
  the block slots the target verifies per step).
* The transformers baseline (`hf`) is timed per prompt (batch 1) with the same BatchTiming; its speedups are
  TPOT_HF / TPOT_mode (decode-only) and e2e_tokens_per_s_mode / e2e_tokens_per_s_HF.
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


def pool_stats(stats: Sequence[Stats], verify_len: int | None = None) -> Stats:
    """The τ of every step of every sequence in one Stats (timings zeroed: they are per batch, see batch_timing)."""
    merged = Stats.merge(list(stats))
    if verify_len is not None:
        if any(t > verify_len for t in merged.taus):
            raise ValueError(f"a step has τ > verify_len {verify_len}")
        merged.verify_len = max(merged.verify_len, verify_len)
    merged.prefill_s = merged.decode_s = 0.0
    return merged


def acceptance_summary(stats: Sequence[Stats], verify_len: int | None = None) -> dict:
    """mean τ, τ histogram (index t-1 = steps with τ = t), per-position acceptance and the steps by draft (where the
    engine records them), pooled over sequences."""
    pooled = pool_stats(stats, verify_len)
    steps = pooled.steps
    hist = pooled.histogram
    return {
        "verify_len": pooled.verify_len,
        "steps": steps,
        "mean_tau": pooled.mean_tau if steps else None,
        "mean_verify_len": pooled.mean_verify_len if steps else None,
        "histogram": hist,
        "histogram_fraction": [c / steps for c in hist] if steps else [0.0] * len(hist),
        "per_position_acceptance": pooled.per_position_acceptance,
        "draft_steps": dict(pooled.draft_steps),
    }


def percentile(values: Sequence[float], q: float) -> float:
    """The q-quantile (0 <= q <= 1) of a non-empty sample: its value at rank round(q * (n - 1)), no interpolation (the
    benchmarks' p50 / p90 of TTFT, TPOT and host time)."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


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


def e2e_speedup(e2e_fast: float | None, e2e_base: float | None) -> float | None:
    """End-to-end speedup of one mode over a baseline: ratio of their end-to-end tokens/s."""
    if e2e_fast is None or e2e_base is None or e2e_base <= 0:
        return None
    return e2e_fast / e2e_base


def hf_summary(hf_timings: Sequence[BatchTiming] | None, ar: dict, spec: dict,
               ar_outputs: Sequence[Sequence[int]], hf_outputs: Sequence[Sequence[int]] | None) -> dict:
    """The transformers baseline next to our AR and DFlash modes (`ar` / `spec`: their mode_summary). All None when
    the baseline did not run (hf_timings None)."""
    if hf_timings is None or hf_outputs is None:
        return {"hf": None, "tpot_hf_s": None, "tokens_per_s_hf": None, "e2e_tokens_per_s_hf": None,
                "speedup_ar_vs_hf": None, "speedup_spec_vs_hf": None, "e2e_speedup_ar_vs_hf": None,
                "e2e_speedup_spec_vs_hf": None, "hf_all_match_ar": None, "hf_num_match_ar": None,
                "hf_mismatches": None}
    hf = mode_summary(hf_timings)
    cmp = compare_outputs(ar_outputs, hf_outputs)
    for m in cmp["mismatches"]:  # spec_tokens means the compared run's tokens: here transformers'
        m["hf_tokens"] = m.pop("spec_tokens")
    return {
        "hf": hf,
        "tpot_hf_s": hf["tpot_s"],
        "tokens_per_s_hf": hf["decode_tokens_per_s"],
        "e2e_tokens_per_s_hf": hf["e2e_tokens_per_s"],
        "speedup_ar_vs_hf": speedup(hf["tpot_s"], ar["tpot_s"]),
        "speedup_spec_vs_hf": speedup(hf["tpot_s"], spec["tpot_s"]),
        "e2e_speedup_ar_vs_hf": e2e_speedup(ar["e2e_tokens_per_s"], hf["e2e_tokens_per_s"]),
        "e2e_speedup_spec_vs_hf": e2e_speedup(spec["e2e_tokens_per_s"], hf["e2e_tokens_per_s"]),
        "hf_all_match_ar": cmp["all_match_ar"],
        "hf_num_match_ar": cmp["num_match_ar"],
        "hf_mismatches": cmp["mismatches"],
    }


def summarize(ar_timings: Sequence[BatchTiming], spec_timings: Sequence[BatchTiming], spec_stats: Sequence[Stats],
              ar_outputs: Sequence[Sequence[int]], spec_outputs: Sequence[Sequence[int]],
              verify_len: int | None = None, *, hf_timings: Sequence[BatchTiming] | None = None,
              hf_outputs: Sequence[Sequence[int]] | None = None) -> dict:
    """Every reported number for one group of prompts (a dataset, or all of them); the transformers baseline's when
    hf_timings / hf_outputs are given (else its keys are None)."""
    acc = acceptance_summary(spec_stats, verify_len)
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
        "e2e_tokens_per_s_ar": ar["e2e_tokens_per_s"],
        "e2e_tokens_per_s_spec": sp["e2e_tokens_per_s"],
        "e2e_speedup": e2e_speedup(sp["e2e_tokens_per_s"], ar["e2e_tokens_per_s"]),
        **compare_outputs(ar_outputs, spec_outputs),
        **{k: v for k, v in acc.items() if k != "mean_tau"},
        "ar": ar,
        "spec": sp,
        **hf_summary(hf_timings, ar, sp, ar_outputs, hf_outputs),
    }
    return out
