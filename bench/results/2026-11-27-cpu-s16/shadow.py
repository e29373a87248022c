"""Fixed draft at batch 1 with an auto budget observing every window as auto would (shadow): its per-request
predicted E for each draft before each window vs the realized τ of the fixed draft (selection-free calibration)."""
import json, sys, collections
from pathlib import Path
import numpy as np, torch
from dflash_trt import SamplingParams
from dflash_trt.bench.datasets import encode_prompt
from dflash_trt.engines.torch_engine import TorchEngine
from dflash_trt.spec import budget as B
torch.set_num_threads(1)
import os
for kv in os.environ.get("SET", "").split(","):
    if kv: k, v = kv.split("="); setattr(B, k, type(getattr(B, k))(v))
n, mode = int(sys.argv[1]), sys.argv[2]
T = "tests/fixtures/gsm8k-tiny/"
e = TorchEngine.from_pretrained(T + "target", T + "drafter", device="cpu", max_batch_size=1, max_seq_len=512)
turns = [json.loads(l)["turns"][0] for l in Path("data/prompts/eagle_gsm8k.jsonl").read_text().splitlines()][:n]
prompts = [encode_prompt(e.tokenizer, t, 512 - 128)[0] for t in turns]
p = SamplingParams(max_new_tokens=128)
e.generate(prompts[:1], SamplingParams(max_new_tokens=8), draft="auto")
shadow = e.draft_budget("auto", 16)
pend = collections.deque(); rows = []
fc, fo, ff = B.Fixed.choose, B.Fixed.observe_window, B.Fixed.forget
def choose(self, requests, left=None, length=None):
    d = fc(self, requests, left, length)
    ex = shadow._expected_tokens(requests, left)
    pend.append({str(k): v for k, v in ex.items()})
    return d
def observe_window(self, requests, draft, taus, chain_equivalent=(), finished=()):
    shadow.observe_window(requests, draft, taus, chain_equivalent, finished)
    shadow.prepare()
    pr = pend.popleft()
    if taus and taus[0] and not (finished and finished[0]):
        rows.append((pr, taus[0][0], chain_equivalent[0][0] if chain_equivalent else None))
    return fo(self, requests, draft, taus, chain_equivalent, finished)
def forget(self, r):
    shadow.forget(r); return ff(self, r)
B.Fixed.choose, B.Fixed.observe_window, B.Fixed.forget = choose, observe_window, forget
for x in prompts:
    e.generate([x], p, draft=mode)
real = np.array([r[1] for r in rows])
print(mode, "windows", len(rows), "realized τ %.3f" % real.mean())
for d in ["chain:4", "chain:8", "chain:16", "tree:16", "tree:32"]:
    pred = np.array([r[0][d] for r in rows])
    print(f"  predicted {d:9s} mean {pred.mean():.3f}")
pm = np.array([r[0][mode] for r in rows])
q = np.quantile(pm, [0, .25, .5, .75, 1])
for lo, hi in zip(q[:-1], q[1:]):
    m = (pm >= lo) & (pm <= hi)
    print(f"  {mode} predicted in [{lo:.2f}, {hi:.2f}]: predicted {pm[m].mean():.3f} realized {real[m].mean():.3f} ({m.sum()})")
if rows[0][2] is not None:
    print("  chain-equivalent (K, τ) mean", np.mean([r[2][0] for r in rows]), np.mean([r[2][1] for r in rows]))
print("global:", {str(d): round(shadow.expected_tokens(shadow.acceptance(None, d), d.max_tau(16)), 3) for d in shadow.drafts})
# trajectory: predicted vs realized by blocks of windows
pm = np.array([r[0][mode] for r in rows])
for i in range(0, len(rows), 120):
    print(f"  windows {i:4d}-{i+120:4d}: predicted {pm[i:i+120].mean():.3f} realized {real[i:i+120].mean():.3f}")
