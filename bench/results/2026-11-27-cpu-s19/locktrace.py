"""Batch 1 auto over 40 prompts, generate per prompt: per 50 windows, the priced E and cost of chain:8 / tree:16, the
calibration factors, the miss factor, and the realized τ of the windows run."""
import sys, collections, torch, statistics as st
from dflash_trt import SamplingParams
from dflash_trt.bench.datasets import encode_prompt, load_prompt_set
from dflash_trt.engines.torch_engine import TorchEngine
from dflash_trt.spec import budget as B
torch.set_num_threads(1)
fx = 'tests/fixtures/gsm8k-tiny/'
e = TorchEngine.from_pretrained(fx + 'target', fx + 'drafter', device='cpu', max_batch_size=1, max_seq_len=512)
prompts = [encode_prompt(e.tokenizer, t, 512 - 128)[0] for t in load_prompt_set('data/prompts/eagle_gsm8k.jsonl', 41).turns]
p = SamplingParams(max_new_tokens=128)
c8, t16 = B.Draft('chain', 8), B.Draft('tree', 16)
rows = []
oc = B.AutoBudget._choose
def ch(self, requests, left, length):
    d = oc(self, requests, left, length)
    pr = self._pricing[2]
    rows.append([str(d), pr[0][c8], pr[0][t16], pr[2][c8], pr[2][t16], pr[6][c8], pr[6][t16],
                 self.calibration.factor(c8), self.calibration.factor(t16), float(self._estimates()[1][16][:6].mean())])
    return d
B.AutoBudget._choose = ch
ow = B.AutoBudget.observe_window
real = []
def obs(self, requests, draft, taus, *a, **k):
    if draft.size > 1: real.append((str(draft), st.mean(taus[0]) if taus[0] else None))
    return ow(self, requests, draft, taus, *a, **k)
B.AutoBudget.observe_window = obs
e.generate([prompts[0]], p, draft='chain:8')
for x in prompts[1:]: e.generate([x], p, draft='auto')
cnt = collections.Counter(r[0] for r in rows)
print(cnt)
for i in range(0, len(rows), 60):
    blk = rows[i:i + 60]
    m = lambda j: st.mean(r[j] for r in blk)
    rb = real[i:i + 60]
    rt = lambda d: (round(st.mean(t for dd, t in rb if dd == d and t), 2), sum(1 for dd, _ in rb if dd == d)) if any(dd == d for dd, _ in rb) else None
    print(i, collections.Counter(r[0] for r in blk).most_common(2), 'E c8/t16 %.2f/%.2f raw %.2f/%.2f cost %.2f/%.2f ms cal %.3f/%.3f miss %.2f' % (m(1), m(2), m(5), m(6), m(3)*1e3, m(4)*1e3, m(7), m(8), m(9)), 'real', rt('chain:8'), rt('tree:16'))
