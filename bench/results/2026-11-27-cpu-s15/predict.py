"""batch 1, auto over N prompts: per chosen draft, predicted E (for it and for the rival chain:8 / tree:16) vs realized τ."""
import json, sys, collections, torch
from pathlib import Path
from dflash_trt import SamplingParams
from dflash_trt.bench.datasets import encode_prompt
from dflash_trt.engines.torch_engine import TorchEngine
from dflash_trt.spec import budget as B
torch.set_num_threads(1)
n = int(sys.argv[1])
T = "tests/fixtures/gsm8k-tiny/"
e = TorchEngine.from_pretrained(T + "target", T + "drafter", device="cpu", max_batch_size=1, max_seq_len=512)
turns = [json.loads(l)["turns"][0] for l in Path("data/prompts/eagle_gsm8k.jsonl").read_text().splitlines()][:n]
prompts = [encode_prompt(e.tokenizer, t, 512 - 128)[0] for t in turns]
p = SamplingParams(max_new_tokens=128)
C8, T16 = B.Draft("chain", 8), B.Draft("tree", 16)
pend = collections.deque(); agg = collections.defaultdict(lambda: [0, 0.0, 0.0, 0.0, 0.0])
oc = B.AutoBudget._choose
def _choose(self, r, left, length):
    d = oc(self, r, left, length)
    if self._pricing: 
        ex, costs, now, rates, best, probe = self._pricing[2]
        pend.append((d, ex.get(C8), ex.get(T16), costs.get(C8), costs.get(T16)))
    return d
B.AutoBudget._choose = _choose
ow = B.AutoBudget.observe_window
def observe_window(self, reqs, d, taus, *a, **k):
    if pend:
        dd, e8, e16, c8, c16 = pend.popleft()
        if dd == d and taus and taus[0]:
            g = agg[str(d)]; g[0] += 1; g[1] += taus[0][0]; g[2] += e8; g[3] += e16; g[4] += c16 / c8
    return ow(self, reqs, d, taus, *a, **k)
B.AutoBudget.observe_window = observe_window
for x in prompts:
    e.generate([x], p, draft="auto")
t = e.cost_table.seconds
print("table tree16/chain8 at 128: %.3f" % (t[(1, T16, 128)] / t[(1, C8, 128)]) if (1, T16, 128) in t else t)
for d, (w, tau, e8, e16, r) in sorted(agg.items()):
    print(f"{d:9s} windows {w:4d} realized τ {tau/w:.2f}  predicted E chain:8 {e8/w:.2f} tree:16 {e16/w:.2f} (ratio {e16/e8:.3f}; priced cost ratio {r/w:.3f})")
