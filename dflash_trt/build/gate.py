"""The acceptance gate: mean τ of a drafter on held-out prompts (greedy), and the verdict quantized vs unquantized.

τ is pooled over steps (every decode step of every prompt weighs the same), the definition `dflash-trt bench` and
TensorRT-LLM's `avg_decoded_tokens_per_iter` use.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

from dflash_trt.errors import DFlashError


class GateError(DFlashError):
    """The quantized drafter's acceptance fell more than the build config allows (the build wrote nothing)."""


@dataclass
class TauRun:
    mean_tau: float
    steps: int
    outputs: list[list[int]]
    curve: list[float]  # per draft position 1..B-1, as auto's prior (spec.budget.measured_prior)


def encode_prompts(engine, turns: list[str], max_new_tokens: int) -> list[list[int]]:
    """Prompt texts -> token ids as `bench` encodes them (chat template when the tokenizer has one, left-truncated to
    leave room for max_new_tokens)."""
    from dflash_trt.bench.datasets import encode_prompt

    return [encode_prompt(engine.tokenizer, t, engine.max_seq_len - max_new_tokens)[0] for t in turns]


def run_prompts(engine, prompt_ids: list[list[int]], max_new_tokens: int, *, verify_len: int | None,
                desc: str, progress: bool) -> TauRun:
    """Greedy DFlash generation of every prompt, engine.max_batch_size at a time; mean τ pooled over steps, and the
    drafter's per-position acceptance curve over the same steps."""
    from tqdm import tqdm

    from dflash_trt.engines.requests import raise_if_failed
    from dflash_trt.spec.budget import measured_prior
    from dflash_trt.spec.sampling import SamplingParams
    from dflash_trt.spec.stats import Stats

    params = SamplingParams(max_new_tokens=max_new_tokens, temperature=0.0)
    stats, outputs = [], []
    n = engine.max_batch_size
    with tqdm(total=len(prompt_ids), desc=desc, unit="prompt", disable=not progress, file=sys.stderr,
              dynamic_ncols=True) as bar:
        for i in range(0, len(prompt_ids), n):
            results = raise_if_failed(engine.generate(prompt_ids[i: i + n], params, verify_len=verify_len), desc)
            stats += [r.stats for r in results]
            outputs += [r.token_ids for r in results]
            bar.update(len(results))
            pooled = Stats.merge(stats)
            bar.set_postfix(tau=f"{pooled.mean_tau:.3f}")
    pooled = Stats.merge(stats)
    curve = measured_prior([(s.ks, s.taus) for s in stats], engine.drafter.cfg.block_size - 1)
    return TauRun(pooled.mean_tau, pooled.steps, outputs, curve)


def verdict(unquantized: TauRun, quantized: TauRun, max_tau_drop: float) -> dict:
    """The gate's numbers for the manifest: relative drop = (τ_unquantized - τ_quantized) / τ_unquantized."""
    drop = (unquantized.mean_tau - quantized.mean_tau) / unquantized.mean_tau if unquantized.mean_tau else 0.0
    return {
        "tau_unquantized": round(unquantized.mean_tau, 4),
        "tau_quantized": round(quantized.mean_tau, 4),
        "steps_unquantized": unquantized.steps,
        "steps_quantized": quantized.steps,
        "relative_tau_drop": round(drop, 4),
        "max_tau_drop": max_tau_drop,
        "passed": drop <= max_tau_drop,
        # the served (quantized) drafter's acceptance per draft position 1..B-1 on these steps: the prior of the
        # engine's "auto" draft budget (manifest.draft_prior reads it)
        "curve": quantized.curve,
        # Greedy spec output is the target's own output whatever the drafter proposes; equal outputs here are a free
        # losslessness check (in bf16, verify-width rounding may still split a near-tie: see README "Numerics").
        "outputs_identical": unquantized.outputs == quantized.outputs,
    }


def check(result: dict, fmt: str) -> None:
    if not result["passed"]:
        raise GateError(
            f"acceptance gate failed: mean tau fell from {result['tau_unquantized']:.3f} (unquantized) to "
            f"{result['tau_quantized']:.3f} ({fmt}), a {100 * result['relative_tau_drop']:.2f}% drop, more than "
            f"quantization.gate.max_tau_drop {100 * result['max_tau_drop']:.2f}%: nothing was written; use a gentler "
            f"format (fp8 before nvfp4), more calibration prompts, or raise quantization.gate.max_tau_drop")
