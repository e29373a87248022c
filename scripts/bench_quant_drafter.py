"""Drafter forward time: FP8 linears (dflash_trt.models.quant.QuantLinear) vs the unquantized drafter.

Random weights at a given drafter shape (default: z-lab/Qwen3-8B-DFlash-b16's: hidden 4096, 5 layers, 32 heads / 8 KV
heads, head_dim 128, MLP 12288, 5 target taps, block 16). Weights are FP8-quantized per tensor (scale = amax / 448) and
activation scales taken from one calibration forward, as ModelOpt's max calibration would; only the timing matters
here, not the values. Prints one row per batch size: median forward time (CUDA events on a GPU), speed-up, and
which path the FP8 linears took (torch._scaled_mm on sm_89+, else dequantized weights).

    python scripts/bench_quant_drafter.py                    # on a GPU: the 8B drafter shape, bf16 vs fp8
    python scripts/bench_quant_drafter.py --tiny --device cpu  # a smoke run anywhere
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch
from transformers import Qwen3Config

from dflash_trt import checkpoint as ckpt
from dflash_trt.models.drafter import DFlashDrafter
from dflash_trt.models.kv_cache import KVCache
from dflash_trt.models.quant import E4M3_MAX, QuantLinear


def drafter_config(hidden, layers, heads, kv_heads, head_dim, mlp, taps, block, vocab=151936) -> ckpt.DrafterConfig:
    hf = Qwen3Config(hidden_size=hidden, num_attention_heads=heads, num_key_value_heads=kv_heads, head_dim=head_dim,
                     num_hidden_layers=layers, vocab_size=vocab, intermediate_size=mlp)
    return ckpt.DrafterConfig(
        hidden_size=hidden, intermediate_size=mlp, num_hidden_layers=layers, num_attention_heads=heads,
        num_key_value_heads=kv_heads, head_dim=head_dim, rms_norm_eps=1e-6, vocab_size=vocab, attention_bias=False,
        rope={"rope_type": "default", "rope_theta": 1e6}, dtype=torch.bfloat16, hf_config=hf,
        num_target_layers=36, block_size=block, mask_token_id=vocab - 1, target_layer_ids=list(range(1, 1 + taps)))


def to_fp8(model: DFlashDrafter, sample_inputs: dict) -> DFlashDrafter:
    """Swap every nn.Linear for an FP8 QuantLinear (per-tensor weight scale, input scale from one forward)."""
    amax: dict[str, float] = {}
    hooks = [m.register_forward_hook(lambda mod, inp, out, n=n: amax.__setitem__(
        n, max(amax.get(n, 0.0), inp[0].detach().abs().max().item())))
        for n, m in model.named_modules() if isinstance(m, torch.nn.Linear)]
    with torch.no_grad():
        model.forward_train(**sample_inputs)
    for h in hooks:
        h.remove()
    for name, lin in [(n, m) for n, m in model.named_modules() if isinstance(m, torch.nn.Linear)]:
        w = lin.weight.detach().float()
        w_scale = w.abs().max() / E4M3_MAX
        parts = {"weight": (w / w_scale).clamp(-E4M3_MAX, E4M3_MAX).to(torch.float8_e4m3fn), "weight_scale": w_scale,
                 "input_scale": torch.tensor(amax[name] / E4M3_MAX)}
        parent, _, leaf = name.rpartition(".")
        setattr(model.get_submodule(parent) if parent else model, leaf,
                QuantLinear("fp8", parts, lin.weight.dtype, lin.weight.device))
    return model


def time_forward(model, cache: KVCache, inputs: dict, repeats: int, device: torch.device,
                 graph: bool = False) -> float:
    """Median seconds of one drafter forward: eagerly, or (graph, CUDA) replayed from a CUDA graph, as the engine's
    device loop runs it — eagerly on a GPU a forward at these shapes is bound by its kernel launches (H200, 2026-11-25:
    bf16 4.4 ms eagerly for ~2.2 GB of weights, ~0.5 ms of HBM reads), which hides what FP8's halved reads buy.
    Returns nan where the forward cannot be captured."""
    def once():
        cache.lengths.fill_(inputs["max_length"] - inputs["context"].shape[1])  # `cached` rows already there
        model(**inputs, cache=cache)

    with torch.no_grad():
        for _ in range(3):
            once()
        run = once
        if graph and device.type == "cuda":
            torch.cuda.synchronize()
            captured = torch.cuda.CUDAGraph()
            try:
                with torch.cuda.graph(captured):
                    once()
            except RuntimeError as e:  # report it, time the rest
                print(f"  (not capturable: {str(e).splitlines()[0][:120]})")
                return float("nan")
            run = captured.replay
        times = []
        for _ in range(repeats):
            if device.type == "cuda":
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                start.record()
                run()
                end.record()
                torch.cuda.synchronize()
                times.append(start.elapsed_time(end) / 1e3)
            else:
                t0 = time.perf_counter()
                run()
                times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--dtype", default="bfloat16", choices=["bfloat16", "float16", "float32"])
    p.add_argument("--batch-sizes", default="1,8,32")
    p.add_argument("--context", type=int, default=16, help="new context rows per sequence per draft (the verified "
                                                           "tokens of the last step)")
    p.add_argument("--cached", type=int, default=1024, help="context already in the drafter cache per sequence")
    p.add_argument("--repeats", type=int, default=20)
    p.add_argument("--tiny", action="store_true", help="a small drafter shape (smoke run)")
    args = p.parse_args()
    device, dtype = torch.device(args.device), ckpt.DTYPES[args.dtype]
    shape = (256, 1, 4, 2, 64, 640, 3, 16) if args.tiny else (4096, 5, 32, 8, 128, 12288, 5, 16)
    cfg = drafter_config(*shape)
    torch.manual_seed(0)
    with torch.device(device):
        model = DFlashDrafter(cfg).to(dtype)
    for prm in model.parameters():
        torch.nn.init.normal_(prm, std=0.02)
    model.rotary.to(device)
    taps = len(cfg.target_layer_ids)
    c, b = args.context, cfg.block_size

    def step_inputs(bs: int) -> tuple[KVCache, dict]:
        """One draft for bs sequences: `cached` context rows already in the cache, `context` new ones, a block."""
        cache = KVCache(cfg.num_hidden_layers, bs, args.cached + c + b, cfg.num_key_value_heads, cfg.head_dim, dtype,
                        device)
        return cache, dict(block_embeds=torch.randn(bs, b, cfg.hidden_size, dtype=dtype, device=device),
                           block_positions=(args.cached + torch.arange(b, device=device)).expand(bs, b),
                           context=torch.randn(bs, c, taps * cfg.hidden_size, dtype=dtype, device=device),
                           context_counts=torch.full((bs,), c, device=device),
                           slots=torch.arange(bs, device=device), max_length=args.cached + c)

    batch_sizes = [int(x) for x in args.batch_sizes.split(",")]
    graphs = (False, True) if device.type == "cuda" else (False,)  # eager; replayed from a CUDA graph
    base = {(bs, g): time_forward(model, *step_inputs(bs), args.repeats, device, g) for bs in batch_sizes for g in graphs}
    train_inputs = dict(block_embeds=torch.randn(1, cfg.block_size, cfg.hidden_size, dtype=dtype, device=device),
                        block_positions=torch.arange(32, 32 + cfg.block_size, device=device)[None],
                        context=torch.randn(1, 32, taps * cfg.hidden_size, dtype=dtype, device=device),
                        context_positions=torch.arange(32, device=device)[None],
                        visible=torch.ones(1, cfg.block_size, 32 + cfg.block_size, dtype=torch.bool, device=device))
    model = to_fp8(model, train_inputs)
    path = "torch._scaled_mm" if model.fc.use_fp8_gemm else "dequantized weights"
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else "CPU"
    print(f"drafter {'tiny' if args.tiny else 'Qwen3-8B-DFlash-b16 shape'} on {name}, {args.dtype}, context "
          f"{args.cached}+{args.context}, block {cfg.block_size}; fp8 linears: {path}")
    print(f"{'batch':>5} {'mode':>6} {args.dtype + ' ms':>14} {'fp8 ms':>10} {'speed-up':>9}")
    for bs in batch_sizes:
        for g in graphs:
            fp8 = time_forward(model, *step_inputs(bs), args.repeats, device, g)
            print(f"{bs:>5} {'graph' if g else 'eager':>6} {1e3 * base[(bs, g)]:>14.3f} {1e3 * fp8:>10.3f} "
                  f"{base[(bs, g)] / fp8:>8.2f}x")

if __name__ == "__main__":
    main()
