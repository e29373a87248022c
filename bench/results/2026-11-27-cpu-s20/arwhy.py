"""Batch 1, auto: the startup cost table, and every 25th pricing where AR was priced best: chain:8's raw / calibrated /
curve-only expected tokens, the costs, rates, probe and switch factors, drift. Shows that AR won on the chains'
calibration factor (raw 2.85-3.05 tokens, calibrated 2.5-2.7 at 0.85), with chain:8 costing 2.6-2.8x AR on today's VM."""
import sys, collections, torch, time
from dflash_trt import SamplingParams
from dflash_trt.bench.datasets import encode_prompt, load_prompt_set
from dflash_trt.engines.torch_engine import TorchEngine
from dflash_trt.spec import budget as B
torch.set_num_threads(1)
fx = 'tests/fixtures/gsm8k-tiny/'
e = TorchEngine.from_pretrained(fx + 'target', fx + 'drafter', device='cpu', max_batch_size=1, max_seq_len=512)
prompts = [encode_prompt(e.tokenizer, t, 512 - 128)[0] for t in load_prompt_set('data/prompts/eagle_gsm8k.jsonl', 41).turns]
p = SamplingParams(max_new_tokens=128)
c1, c8 = B.Draft('chain', 1), B.Draft('chain', 8)
n = [0, 0]; cur = [0]
op = B.AutoBudget._priced
def pr(self, requests, left, length):
    r = op(self, requests, left, length)
    n[0] += 1
    if r[4] == c1 and n[0] % 25 == 0:
        expected, costs, now, rates, best, probe, raw = r
        g, _ = self._estimates()
        print(f"prompt {cur[0]} w{n[0]} left {left} len {length} probe {probe} E8 raw {raw[c8]:.2f} cal {expected[c8]:.2f} glob {B._expected_by_depth(g)[8]:.2f} own_row {requests[0] in self._rows} cost1 {costs[c1]*1e3:.2f} cost8 {costs[c8]*1e3:.2f} now8 {now[c8]*1e3:.2f} rate1 {rates[c1]:.0f} rate8 {rates[c8]:.0f} pf {self.cost.probe_factor:.2f} sw {dict((str(k), round(v,2)) for k,v in self.cost.switch.items())} drift {self.cost.drift:.3f}", flush=True)
    return r
B.AutoBudget._priced = pr
e.generate([prompts[0]], p, draft='chain:8')
for i, x in enumerate(prompts[1:]):
    cur[0] = i
    e.generate([x], p, draft='auto')
    if i == 0:
        print({f"{k[1]} L={k[2]}": round(v * 1e3, 2) for k, v in (e.draft_costs or e._cost_table[0]).items()}, flush=True)
