import json, time, sys, statistics, collections
import torch
from dflash_trt import SamplingParams
from dflash_trt.engines.torch_engine import TorchEngine
from dflash_trt.engines import scheduler as sm
from dflash_trt.bench.datasets import encode_prompt
torch.set_num_threads(1)
F = "tests/fixtures/gsm8k-tiny/"
bs = int(sys.argv[1])
e = TorchEngine.from_pretrained(F + "target", F + "drafter", device="cpu", max_batch_size=bs, max_seq_len=512)
turns = [json.loads(l)["turns"][0] for l in open("data/prompts/eagle_gsm8k.jsonl")][:48]
prompts = [encode_prompt(e.tokenizer, t, 384)[0] for t in turns]
batches = [prompts[i:i + bs] for i in range(0, len(prompts), bs)]
p = SamplingParams(max_new_tokens=128, ignore_eos=True)
acc = collections.defaultdict(lambda: collections.defaultdict(float))
cur = [None]
D = sm.BatchScheduler._decode
P = sm.BatchScheduler._prefill
def dec(self, batch):
    t = time.perf_counter(); r = D(self, batch); acc[cur[0]]["decode"] += time.perf_counter() - t; acc[cur[0]]["windows"] += 1; return r
def pre(self, new):
    t = time.perf_counter(); r = P(self, new); acc[cur[0]]["prefill"] += time.perf_counter() - t; return r
sm.BatchScheduler._decode, sm.BatchScheduler._prefill = dec, pre
from dflash_trt.spec import budget as bm
from dflash_trt.spec.step import SpecStep
def timed(cls, name):
    f = getattr(cls, name)
    def g(*a, **k):
        t = time.perf_counter()
        try: return f(*a, **k)
        finally: acc[cur[0]][name] += time.perf_counter() - t
    setattr(cls, name, g)
for n in ("choose", "observe_time"): timed(bm.AutoBudget, n); timed(bm.Fixed, n)
timed(sm.BatchScheduler, "_observe")
for n in ("launch", "read", "_drop_context"): timed(SpecStep, n)
from dflash_trt.spec.budget import Draft, auto_drafts
e.draft_costs = {(n, d): (1.0 if d == Draft("chain", 1) else 50.0) for n in sorted({1, bs}) for d in auto_drafts(16, e.auto_trees)}
e.refine_draft_costs = False
modes = {"ar": dict(use_drafter=False), "auto-ar": dict(draft="auto")}
for b in batches[:2]:
    for kw in modes.values(): e.generate(b, p, **kw)
acc.clear()
tot = collections.defaultdict(float)
for rnd in range(2):
    for i, b in enumerate(batches):
        for m in (list(modes) if i % 2 == 0 else list(modes)[::-1]):
            cur[0] = m; t = time.perf_counter(); e.generate(b, p, **modes[m]); tot[m] += time.perf_counter() - t
for m in modes:
    a = acc[m]
    print("   ", {k: f"{v/a['windows']*1e6:.1f}" for k, v in a.items() if k not in ("decode", "prefill", "windows")})
    print(f"{m:8s} total {tot[m]:.2f} s  decode {a['decode']:.2f} s ({a['decode']/a['windows']*1e6:.0f} us x {a['windows']:.0f})  prefill {a['prefill']:.3f} s  other {tot[m]-a['decode']-a['prefill']:.3f} s")
