"""SDPA backends on this GPU for the engine's attention shapes (masked GQA, bf16, Qwen3-8B heads): ms per call when
every call has a new key length (a host-loop step, a prefill) and when it repeats one, per backend."""
import time
import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

dev = torch.device("cuda")
choices = {"torch default": None, "cudnn": [SDPBackend.CUDNN_ATTENTION], "efficient": [SDPBackend.EFFICIENT_ATTENTION],
           "flash": [SDPBackend.FLASH_ATTENTION], "math": [SDPBackend.MATH],
           "engine (flash, efficient, math)": [SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION, SDPBackend.MATH]}

def call(t, s, backends):
    q = torch.randn(1, 32, t, 128, device=dev, dtype=torch.bfloat16)
    k = torch.randn(1, 8, s, 128, device=dev, dtype=torch.bfloat16)
    v = torch.randn_like(k)
    m = torch.ones(1, 1, t, s, device=dev, dtype=torch.bool).tril(s - t)
    if backends is None:
        return F.scaled_dot_product_attention(q, k, v, attn_mask=m, enable_gqa=True)
    with sdpa_kernel(backends):
        return F.scaled_dot_product_attention(q, k, v, attn_mask=m, enable_gqa=True)

for t, base in ((16, 600), (512, 512)):
    for name, backends in choices.items():
        try:
            call(t, base, backends); torch.cuda.synchronize()
            new = []
            for i in range(1, 6):
                torch.cuda.synchronize(); t0 = time.perf_counter(); call(t, base + 7 * i + (0 if t == 16 else 0), backends)
                torch.cuda.synchronize(); new.append(time.perf_counter() - t0)
            same = []
            for i in range(5):
                torch.cuda.synchronize(); t0 = time.perf_counter(); call(t, base + 7, backends)
                torch.cuda.synchronize(); same.append(time.perf_counter() - t0)
            print(f"T={t:4d} {name:32s} new shape {1e3 * sorted(new)[2]:8.2f} ms (max {1e3 * max(new):8.2f})   "
                  f"same shape {1e3 * sorted(same)[2]:7.3f} ms", flush=True)
        except Exception as e:  # noqa: BLE001
            print(f"T={t:4d} {name:32s} unsupported: {type(e).__name__}: {str(e).splitlines()[0][:120]}", flush=True)
from torch.profiler import profile, ProfilerActivity
with profile(activities=[ProfilerActivity.CPU]) as prof:
    call(16, 640, None)
print("torch default runs:", [e.key for e in prof.key_averages() if "attention" in e.key.lower()])
