"""auto's predicted E[τ] for the draft it chose vs the τ its window realized (CPU, host loop: 1-step windows)."""
import json, sys, collections
from pathlib import Path
import numpy as np, torch
from dflash_trt import SamplingParams
from dflash_trt.bench.datasets import encode_prompt
from dflash_trt.engines.torch_engine import TorchEngine
from dflash_trt.spec import budget as B
torch.set_num_threads(1)
size, n = int(sys.argv[1]), int(sys.argv[2])
T = "tests/fixtures/gsm8k-tiny/"
e = TorchEngine.from_pretrained(T + "target", T + "drafter", device="cpu", max_batch_size=size, max_seq_len=512)
turns = [json.loads(l)["turns"][0] for l in Path("data/prompts/eagle_gsm8k.jsonl").read_text().splitlines()][:n]
prompts = [encode_prompt(e.tokenizer, t, 512 - 128)[0] for t in turns]
p = SamplingParams(max_new_tokens=128)
pending = []; pairs = collections.defaultdict(list)
oc = B.AutoBudget.choose
def choose(self, requests, left=None, length=None):
    d = oc(self, requests, left, length)
    pr = self._pricing
    if pr is not None and d.size > 1:
        pending.append((str(d), pr[2][0][d] / len(requests)))
    else:
        pending.append(None)
    return d
B.AutoBudget.choose = choose
ow = B.AutoBudget.observe_window
def observe_window(self, requests, draft, taus, chain_equivalent=(), finished=()):
    if pending:
        x = pending.pop(0)
        if x is not None and x[0] == str(draft):
            pairs[x[0]].append((x[1], float(np.mean([t[0] for t in taus if t])), any(finished)))
    return ow(self, requests, draft, taus, chain_equivalent, finished)
B.AutoBudget.observe_window = observe_window
for i in range(0, n, size):
    pending.clear()
    e.generate(prompts[i:i + size], p, draft="auto")
for d, v in pairs.items():
    a = np.array([(x, y) for x, y, f in v]); nf = np.array([(x, y) for x, y, f in v if not f])
    print(f"batch {size} {d}: {len(v)} windows, predicted {a[:, 0].mean():.2f}, realized {a[:, 1].mean():.2f} "
          f"(ratio {a[:, 1].mean() / a[:, 0].mean():.3f}); without finishing windows: {nf[:, 1].mean() / nf[:, 0].mean():.3f}")
