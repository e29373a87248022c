import json, sys, time, collections, statistics
from pathlib import Path
import torch
from dflash_trt import SamplingParams
from dflash_trt.bench.datasets import encode_prompt
from dflash_trt.engines.torch_engine import TorchEngine
from dflash_trt.spec import budget as B
torch.set_num_threads(1)
size, n = 1, 40
T = "tests/fixtures/gsm8k-tiny/"
e = TorchEngine.from_pretrained(T + "target", T + "drafter", device="cpu", max_batch_size=size, max_seq_len=512)
turns = [json.loads(l)["turns"][0] for l in Path("data/prompts/eagle_gsm8k.jsonl").read_text().splitlines()][:n]
prompts = [encode_prompt(e.tokenizer, t, 512 - 128)[0] for t in turns]
p = SamplingParams(max_new_tokens=128)
e.generate(prompts[:size], p, draft="auto")
d = collections.defaultdict(list); depth=[0]
for name in ["choose", "hold", "observe_window", "observe_time", "prepare", "defers_context", "forget"]:
    f = getattr(B.AutoBudget, name)
    def g(self, *a, _f=f, _n=name, **k):
        depth[0] += 1; t = time.perf_counter()
        try: return _f(self, *a, **k)
        finally:
            depth[0] -= 1
            if depth[0] == 0: d[_n].append(time.perf_counter() - t)
    setattr(B.AutoBudget, name, g)
for i in range(0, n, size):
    e.generate(prompts[i:i + size], p, draft="auto")
for k, v in d.items():
    v = sorted(v); q = lambda x: 1e6 * v[int(x * (len(v) - 1))]
    print(f"{k:15s} n={len(v):4d} mean {1e6*sum(v)/len(v):6.1f} p10 {q(.1):6.1f} p50 {q(.5):6.1f} p90 {q(.9):6.1f} max {q(1):7.1f}")
if hasattr(B, "LT"):
    for k, v in B.LT.items():
        v = sorted(v); q = lambda x: 1e6 * v[int(x * (len(v) - 1))]
        print(f"  {k:12s} n={len(v):4d} mean {1e6*sum(v)/len(v):6.1f} p50 {q(.5):6.1f} p90 {q(.9):6.1f}")
