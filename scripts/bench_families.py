"""Step time of the transformers-backed targets (gpt-oss, Qwen3-MoE, Gemma 4) next to the native Qwen3 path, at the
dims of the fixture target (hidden 256, 4 layers, 4 heads / 2 KV heads, head_dim 64, MLP 640; MoE: 4 experts top-2
of 320 each, the same active MLP width; sliding window 128 on alternate layers where the family has them).

Makes random pairs (target with the tiny BPE tokenizer + a 1-layer random DFlash drafter, block 16) under --output
(`dflash-trt bench --target OUT/<family>/target --drafter OUT/<family>/drafter ...` runs on them), then times the
target forward the engine runs per step: T new tokens per row (T = 1: an AR step; T = 16: a K = 16 verify) for a batch
at --context tokens, taps on, against the pre-allocated cache. "qwen3-hf" is the same Qwen3 checkpoint as "qwen3",
run by transformers' Qwen3 module through HfTarget: the cost of the transformers path itself. Targets are measured
interleaved (a shared machine drifts); medians over --reps.

    OMP_NUM_THREADS=1 python scripts/bench_families.py --output /tmp/families [--reps 30] [--context 96]
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from dflash_trt import checkpoint as ckpt  # noqa: E402
from dflash_trt import tiny  # noqa: E402
from dflash_trt.models.hf_target import HfTarget  # noqa: E402
from dflash_trt.models.target import load_target  # noqa: E402

HIDDEN, LAYERS, HEADS, KV, HEAD_DIM, MLP, VOCAB, WINDOW = 256, 4, 4, 2, 64, 640, 2048, 128


def hf_config(family: str):
    import transformers as tf

    common = dict(vocab_size=VOCAB, hidden_size=HIDDEN, num_hidden_layers=LAYERS, num_attention_heads=HEADS,
                  num_key_value_heads=KV, head_dim=HEAD_DIM, max_position_embeddings=4096, eos_token_id=0,
                  bos_token_id=None, rms_norm_eps=1e-6)
    alternating = ["sliding_attention", "full_attention"] * (LAYERS // 2)
    if family == "gpt_oss":
        cfg = tf.GptOssConfig(**common, pad_token_id=None, intermediate_size=MLP // 2, num_local_experts=4,
                              num_experts_per_tok=2, sliding_window=WINDOW, layer_types=alternating)
    elif family == "qwen3_moe":
        cfg = tf.Qwen3MoeConfig(**common, pad_token_id=None, intermediate_size=MLP, moe_intermediate_size=MLP // 2,
                                num_experts=4, num_experts_per_tok=2)
    elif family == "gemma4":
        cfg = tf.Gemma4TextConfig(**common, pad_token_id=0, intermediate_size=MLP, sliding_window=WINDOW,
                                  layer_types=alternating, hidden_size_per_layer_input=0, global_head_dim=HEAD_DIM)
    elif family == "qwen3_5":  # hybrid: Qwen3.5's pattern of 3 Gated DeltaNet layers to 1 full attention layer
        cfg = tf.Qwen3_5TextConfig(**common, pad_token_id=None, intermediate_size=MLP,
                                   layer_types=["linear_attention"] * 3 + ["full_attention"], linear_num_key_heads=2,
                                   linear_num_value_heads=4, linear_key_head_dim=HEAD_DIM, linear_value_head_dim=HEAD_DIM,
                                   tie_word_embeddings=False)
    else:
        raise ValueError(family)
    cfg.architectures = [{"gpt_oss": "GptOssForCausalLM", "qwen3_moe": "Qwen3MoeForCausalLM",
                          "gemma4": "Gemma4ForCausalLM", "qwen3_5": "Qwen3_5ForCausalLM"}[family]]
    cfg.dtype = "float32"
    return cfg


def make_pair(out: Path, family: str) -> tuple[Path, Path]:
    target_dir, drafter_dir = out / family / "target", out / family / "drafter"
    if (drafter_dir / "config.json").is_file():
        return target_dir, drafter_dir
    target_dir.mkdir(parents=True, exist_ok=True)
    tok = tiny.make_tokenizer(target_dir)
    if family == "qwen3":
        tiny.make_target(target_dir, family="qwen3", vocab_size=VOCAB, eos_id=tok.eos_token_id, hidden=HIDDEN,
                         layers=LAYERS, heads=HEADS, kv_heads=KV, head_dim=HEAD_DIM, intermediate=MLP)
    else:
        import transformers

        config = hf_config(family)
        torch.manual_seed(0)
        getattr(transformers, config.architectures[0])(config).save_pretrained(str(target_dir))
    tiny.make_drafter(drafter_dir, target_dir, mask_token_id=tok.mask_token_id, layers=1, block_size=16)
    return target_dir, drafter_dir


def qwen3_through_transformers(target_dir: Path) -> HfTarget:
    """The native Qwen3 checkpoint run by transformers' Qwen3 module through HfTarget (same weights)."""
    from transformers import Qwen3ForCausalLM

    cfg = ckpt.load_target_config(target_dir)
    cfg = dataclasses.replace(cfg, backend="transformers", layer_types=("full_attention",) * cfg.num_hidden_layers)
    model = Qwen3ForCausalLM.from_pretrained(str(target_dir), attn_implementation="sdpa")
    return HfTarget(cfg, model)


@torch.inference_mode()
def step_ms(target, batch: int, t: int, context: int, reps: int, taps: list[int]) -> list[float]:
    target.tap_layer_ids = taps
    cache = target.new_cache(batch, context + 32)
    slots = torch.arange(batch)
    ids = torch.randint(1, 300, (batch, context))
    target(ids, cache, slots, tap=True, max_length=context, host_slots=list(range(batch)))  # prefill
    cache.set_lengths(slots, torch.full((batch,), context))
    block = torch.randint(1, 300, (batch, t))
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        target(block, cache, slots, tap=True, max_length=context + t, host_slots=list(range(batch)))
        times.append((time.perf_counter() - t0) * 1e3)
    return times


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--output", type=Path, required=True)
    ap.add_argument("--reps", type=int, default=30)
    ap.add_argument("--context", type=int, default=96)
    ap.add_argument("--batch-sizes", default="1,4")
    args = ap.parse_args()
    torch.manual_seed(0)
    names = ["qwen3", "gpt_oss", "qwen3_moe", "gemma4", "qwen3_5"]
    dirs = {name: make_pair(args.output, name) for name in names}
    targets = {name: load_target(dirs[name][0]).fuse() for name in names}
    targets["qwen3-hf"] = qwen3_through_transformers(dirs["qwen3"][0])
    order = ["qwen3", "qwen3-hf", "gpt_oss", "qwen3_moe", "gemma4", "qwen3_5"]
    taps = [0, 2, LAYERS - 1]
    print(f"target forward per step, ms (median of {args.reps}, interleaved); context {args.context}, float32, "
          f"{torch.get_num_threads()} torch thread(s)")
    print(f"{'batch':>5} {'T':>3} " + " ".join(f"{n:>10}" for n in order))
    for batch in (int(b) for b in args.batch_sizes.split(",")):
        for t in (1, 16):
            times: dict[str, list[float]] = {n: [] for n in order}
            for _ in range(3):  # rounds: every target once per round
                for n in order:
                    times[n] += step_ms(targets[n], batch, t, args.context, args.reps // 3, taps)
            print(f"{batch:>5} {t:>3} " + " ".join(f"{statistics.median(times[n]):>10.2f}" for n in order))
    print(f"pairs for `dflash-trt bench`: {args.output}/<family>/{{target,drafter}}")


if __name__ == "__main__":
    main()
