"""The speculative step's non-model overhead: a whole decode step vs its two model forwards alone.

Random weights at a given shape (default: Qwen3-8B + a 5-layer DFlash drafter, bf16), one engine, requests with
`--prompt-len` token prompts decoding with ignore_eos. For each batch size:

    step_ms   one decode step of the engine's loop, averaged over windows: the host loop (`--decode-loop host`: a host
              read per step) or the device loop (`device`: --steps-per-sync steps per read, CUDA graphs + plugin
              kernels on a GPU); the window's host read is included, amortised over its steps
    model_ms  the drafter forward + LM head + the target's verify forward with the same shapes, nothing else
              (replayed from a CUDA graph on a GPU)
    overhead  (step_ms - model_ms) / step_ms: everything the spec loop adds around the two models (block building,
              argmax, sampling/acceptance, bookkeeping, launches, host syncs)

The goal for issue 4 is overhead < 3% of a step at 8B dims on a GPU. Prints a table; numbers only mean something on
a GPU (`--tiny --device cpu` is a smoke run).

    python scripts/bench_step.py [--decode-loop device] [--batch-sizes 1,8,32] [--steps-per-sync 4]
    python scripts/bench_step.py --tiny --device cpu --dtype float32
    python scripts/bench_step.py --prefill 8 --batch-sizes 1,4   # prefill per new prompt length, masked vs fresh
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import torch
from transformers import Qwen3Config

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from dflash_trt import checkpoint as ckpt  # noqa: E402
from dflash_trt.spec.step import length_bucket  # noqa: E402
from dflash_trt.engines.torch_engine import TorchEngine  # noqa: E402
from dflash_trt.models.drafter import DFlashDrafter  # noqa: E402
from dflash_trt.models.target import TargetModel  # noqa: E402
from dflash_trt.spec.sampling import SamplingParams  # noqa: E402

# hidden, layers, heads, kv heads, head_dim, mlp, vocab, drafter layers
SHAPES = {"qwen3-8b": (4096, 36, 32, 8, 128, 12288, 151936, 5), "tiny": (256, 4, 4, 2, 64, 640, 2048, 1)}


def random_pair(shape: str, dtype: torch.dtype, device: torch.device, block: int):
    hidden, layers, heads, kv, head_dim, mlp, vocab, draft_layers = SHAPES[shape]
    rope = {"rope_type": "default", "rope_theta": 1e6}
    hf = Qwen3Config(hidden_size=hidden, num_hidden_layers=layers, num_attention_heads=heads, num_key_value_heads=kv,
                     head_dim=head_dim, intermediate_size=mlp, vocab_size=vocab)
    shape_kw = dict(hidden_size=hidden, intermediate_size=mlp, num_attention_heads=heads, num_key_value_heads=kv,
                    head_dim=head_dim, rms_norm_eps=1e-6, vocab_size=vocab, attention_bias=False, rope=rope,
                    dtype=dtype, hf_config=hf)
    tcfg = ckpt.TargetConfig(num_hidden_layers=layers, family="qwen3", eos_token_ids=(0,), **shape_kw)
    taps = ckpt.default_target_layer_ids(layers, draft_layers)
    dcfg = ckpt.DrafterConfig(num_hidden_layers=draft_layers, num_target_layers=layers, block_size=block,
                              mask_token_id=vocab - 1, target_layer_ids=taps, **shape_kw)
    torch.manual_seed(0)
    models = []
    for cls, cfg in ((TargetModel, tcfg), (DFlashDrafter, dcfg)):
        with torch.device(device):
            m = cls(cfg).to(dtype)
        for p in m.parameters():
            torch.nn.init.normal_(p, std=0.02) if p.dim() > 1 else torch.nn.init.ones_(p)
        m.rotary.to(device)
        models.append(m.eval())
    return models


def sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def time_steps(engine, bs: int, prompt_len: int, windows: int, device) -> tuple[float, float, float, float]:
    """Seconds per decode step over `windows` scheduler steps after the prefill (and one untimed warm-up window): the
    mean, the median and the slowest window's (a mean far above the median: one-off costs inside the timed windows,
    such as warm-up, or on an H200 cuDNN attention's plan per new key length, which made the host loop's step 10-30x
    the device loop's before its lengths were bucketed too), and the mean number of tokens a step verified (τ: the
    drafter context rows the next step takes in)."""
    sched = engine.new_scheduler()
    params = SamplingParams(max_new_tokens=engine.max_seq_len - prompt_len - 1, ignore_eos=True)
    g = torch.Generator().manual_seed(bs)
    for i in range(bs):
        sched.add(i, torch.randint(2, engine.target.cfg.vocab_size - 1, (prompt_len,), generator=g).tolist(), params)
    sched.step()  # prefill + the first window (captures graphs on a GPU)
    sched.step()
    steps_per_call = sched.steps_per_sync
    per_window = []
    for _ in range(windows):  # each window ends in its host read, so the device is idle between them: no extra sync
        t0 = time.perf_counter()
        sched.step()
        per_window.append((time.perf_counter() - t0) / steps_per_call)
    taus = [t for i in range(bs) for t in sched.stats_of(i).taus]
    return (statistics.mean(per_window), statistics.median(per_window), max(per_window),
            sum(taus) / len(taus))


def time_models(engine, bs: int, prompt_len: int, k: int, repeats: int, device, tau: float) -> float:
    """Seconds for the drafter forward + LM head + target verify forward alone, with the shapes a step of the engine's
    loop gives them: the host loop feeds the drafter the last step's τ context rows, the device loop always k rows (its
    shapes are captured); on a GPU both attend over a length bucket, on a CPU over the live length."""
    target, drafter = engine.target, engine.drafter
    dev, dtype = device, target.lm_head.weight.dtype
    slots = torch.arange(bs, device=dev)
    engine.target_cache.lengths[:bs] = prompt_len
    rows = k if engine.decode_loop == "device" else max(1, round(tau))
    engine.drafter_cache.lengths[:bs] = prompt_len - rows
    context = torch.randn(bs, rows, drafter.fc.in_features, dtype=dtype, device=dev)
    counts = torch.full((bs,), rows, device=dev)
    block_ids = torch.randint(2, 100, (bs, drafter.block_size), device=dev)
    block_pos = prompt_len + torch.arange(drafter.block_size, device=dev).expand(bs, -1)
    verify = torch.randint(2, 100, (bs, k), device=dev)
    # the attention length: a length bucket on a GPU (SpecStep.launch); the host loop's exact live length on a CPU
    upto = prompt_len + engine.steps_per_sync * k
    if dev.type == "cuda":
        upto = length_bucket(upto, engine.target_cache.capacity)

    def models():
        hidden = drafter(target.embed(block_ids), block_pos, context, counts, engine.drafter_cache, slots, upto)
        target.logits(hidden[:, 1:k]).argmax(-1)
        target(verify, engine.target_cache, slots, tap=True, max_length=upto)

    with torch.inference_mode():
        models()
        run = models
        if dev.type == "cuda":
            sync(dev)
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                models()
            run = graph.replay
        times = []
        for _ in range(repeats):
            sync(dev)
            t0 = time.perf_counter()
            run()
            sync(dev)
            times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--dtype", default="bfloat16", choices=sorted(ckpt.DTYPES))
    p.add_argument("--tiny", action="store_true", help="the tiny shape (smoke run)")
    p.add_argument("--batch-sizes", default="1,8,32")
    p.add_argument("--verify-len", type=int, default=16, help="K, block slots verified per step (= the drafter's block)")
    p.add_argument("--prompt-len", type=int, default=512)
    p.add_argument("--decode-loop", default="device", choices=["host", "device"])
    p.add_argument("--steps-per-sync", type=int, default=4)
    p.add_argument("--windows", type=int, default=10)
    p.add_argument("--profile", type=int, default=0, metavar="N",
                   help="after timing each batch, profile two more windows (torch.profiler) and print the N ops with "
                        "the most self CPU time and the N with the most device time")
    p.add_argument("--prefill", type=int, default=0, metavar="N",
                   help="instead: the target's prefill at N new prompt lengths per batch size, ms per call, through "
                        "the masked attention every forward takes and through a prefill's causal attention (fresh)")
    args = p.parse_args()
    device, dtype = torch.device(args.device), ckpt.DTYPES[args.dtype]
    batch_sizes = [int(b) for b in args.batch_sizes.split(",")]
    target, drafter = random_pair("tiny" if args.tiny else "qwen3-8b", dtype, device, args.verify_len)
    if args.prefill:
        time_prefills(target, batch_sizes, args.prompt_len, args.prefill, device)
        return
    max_seq = args.prompt_len + (args.windows + 3) * args.steps_per_sync * args.verify_len + 64
    engine = TorchEngine(target, drafter, None, max_batch_size=max(batch_sizes), max_seq_len=max_seq,
                         decode_loop=args.decode_loop, steps_per_sync=args.steps_per_sync)
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else "CPU"
    print(f"{'tiny' if args.tiny else 'Qwen3-8B + 5-layer drafter'} (random weights) on {name}, {args.dtype}, "
          f"K={args.verify_len}, prompt {args.prompt_len}, decode loop {args.decode_loop}"
          + (f" ({args.steps_per_sync} steps per host read)" if args.decode_loop == "device" else ""))
    print(f"{'batch':>5} {'step ms':>9} {'median':>9} {'slowest':>9} {'model ms':>9} {'overhead':>9}")
    for bs in batch_sizes:
        step, median, slowest, tau = time_steps(engine, bs, args.prompt_len, args.windows, device)
        model = time_models(engine, bs, args.prompt_len, args.verify_len, max(args.windows, 5), device, tau)
        print(f"{bs:>5} {1e3 * step:>9.3f} {1e3 * median:>9.3f} {1e3 * slowest:>9.3f} {1e3 * model:>9.3f} "
              f"{100 * (step - model) / step:>8.1f}%")
        if args.profile:
            profile_windows(engine, bs, args.prompt_len, device, args.profile)


@torch.inference_mode()
def time_prefills(target, batch_sizes: list[int], prompt_len: int, lengths: int, device) -> None:
    """The target's prefill (logits at each row's last token, taps) of `lengths` new prompt lengths around
    prompt_len per batch size, then that many repeats of the last length: ms per call through the masked attention
    (what every forward takes; on CUDA PyTorch runs it on cuDNN, which builds a plan per new shape) and through
    causal_attention (fresh=True: what the engine's prefill runs). Each path gets lengths of its own (odd / even), so
    neither finds the other's plans."""
    target.tap_layer_ids = ckpt.default_target_layer_ids(len(target.model.layers), 5)
    print(f"prefill of new prompt lengths (~{prompt_len} tokens), ms per call: median / slowest of {lengths} new "
          f"lengths, median of {lengths} repeats of one")
    print(f"{'batch':>5} {'path':>8} {'new len':>9} {'slowest':>9} {'repeat':>9}")
    for bs in batch_sizes:
        cache = target.new_cache(bs, prompt_len + 2 * lengths + 64)
        slots = torch.arange(bs, device=device)
        for fresh in (False, True):
            times = []
            for i in range(lengths + 1):
                n = prompt_len + 2 * i + int(fresh) if i < lengths else prompt_len + 2 * (lengths - 1) + int(fresh)
                for _ in range(1 if i < lengths else lengths):
                    ids = torch.randint(1, target.cfg.vocab_size - 1, (bs, n), device=device)
                    cache.set_lengths(slots, torch.zeros(bs, dtype=torch.long, device=device))
                    sync(device)
                    t0 = time.perf_counter()
                    target(ids, cache, slots, logits_at=torch.full((bs, 1), n - 1, device=device), tap=True,
                           max_length=n, fresh=fresh)
                    sync(device)
                    times.append(time.perf_counter() - t0)
            new, repeat = times[:lengths], times[lengths:]
            print(f"{bs:>5} {'fresh' if fresh else 'masked':>8} {1e3 * statistics.median(new):>9.2f} "
                  f"{1e3 * max(new):>9.2f} {1e3 * statistics.median(repeat):>9.2f}", flush=True)


def profile_windows(engine, bs: int, prompt_len: int, device, rows: int) -> None:
    """Two windows under torch.profiler after two untimed ones: where a step's time goes (host-side ops, device
    kernels), to explain a step far slower than its models."""
    from torch.profiler import ProfilerActivity, profile

    sched = engine.new_scheduler()
    params = SamplingParams(max_new_tokens=engine.max_seq_len - prompt_len - 1, ignore_eos=True)
    for i in range(bs):
        sched.add(i, list(range(2, 2 + prompt_len)), params)
    sched.step()
    sched.step()
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
    with profile(activities=activities) as prof:
        sched.step()
        sched.step()
        sync(device)
    events = prof.key_averages()
    print(f"-- profile, batch {bs}, two windows: by self CPU time")
    print(events.table(sort_by="self_cpu_time_total", row_limit=rows))
    if device.type == "cuda":
        print(f"-- profile, batch {bs}, two windows: by device time")
        print(events.table(sort_by="self_device_time_total", row_limit=rows))


if __name__ == "__main__":
    main()
