"""Twenty-second session: one long-lived auto scheduler (as the OpenAI server keeps) warmed by a round at concurrency
FIRST (16 prompts x 64 tokens, continuous arrivals), then three rounds at concurrency 1: the budget's state after the
warm-up (probe interval, calibration, drift, overhead, and the drafter's curve: its steps and acceptance at positions
1-8), each round's rate and curve, auto's choices at one request (held windows
not counted; 'last' = a request's last token) and its steps by draft (Stats.draft_steps). Asks whether the server
Pareto's AR steps at c = 1 (418 of ~1,165 in v32, whose warm-up round runs at c = 16) come from the warm-up.
Environment: PRIOR=1 starts auto from the measured curve of `out/engines/tiny-gsm8k-cpu` (README's build; as an
engine directory does), PW=W sets PRIOR_WEIGHT.
`[PRIOR=1] [PW=W] PYTHONPATH=. python bench/results/2026-11-28-cpu-s22/c16then1.py [FIRST]`"""
import json, sys, time, collections, torch
from dflash_trt import SamplingParams
from dflash_trt.bench.datasets import encode_prompt
from dflash_trt.engines.torch_engine import TorchEngine
from dflash_trt.spec import budget as B
torch.set_num_threads(1)
fx='tests/fixtures/gsm8k-tiny/'
turns=[json.loads(l)["turns"][0] for l in open('data/prompts/eagle_gsm8k.jsonl')][:16]
import os
prior=json.load(open('out/engines/tiny-gsm8k-cpu/manifest.json'))['acceptance']['curve'] if os.environ.get('PRIOR') else None
if os.environ.get('PW'): B.PRIOR_WEIGHT=float(os.environ['PW'])
e=TorchEngine.from_pretrained(fx+'target', fx+'drafter', device='cpu', max_batch_size=16, max_seq_len=512, draft_prior=prior)
print('prior', 'measured' if prior else 'default', 'weight', B.PRIOR_WEIGHT)
prompts=[encode_prompt(e.tokenizer,t,512-64)[0] for t in turns]
p=SamplingParams(max_new_tokens=64)
s=e.new_scheduler(draft='auto')
chosen=collections.Counter(); cur=['warm']; steps=collections.Counter()
oc=B.AutoBudget.choose
def ch(self, ids, left=None, length=None):
    d=oc(self, ids, left, length); chosen[(cur[0], len(ids), str(d), 'last' if left is not None and max(left)<=1 else '')]+=1; return d
B.AutoBudget.choose=ch
ids=[0]
def run_round(c):
    todo=list(range(len(prompts))); live=set(); toks=0; t=time.perf_counter()
    while todo or live:
        while todo and len(live)<c:
            i=todo.pop(0); rid=ids[0]; ids[0]+=1; s.add(rid, prompts[i], p); live.add(rid)
        for ev in s.step():
            toks+=len(ev.token_ids)
            if ev.finished:
                live.discard(ev.index)
                for d,n in ev.result.stats.draft_steps.items(): steps[(cur[0], d)]+=n
    return toks/(time.perf_counter()-t)
first=int(sys.argv[1]) if len(sys.argv)>1 else 16
cur[0]=f'warm c{first}'; run_round(first)
b=s.budget; cal=e.draft_calibration
import numpy as np
def curve():
    c=e.draft_curve; return 'steps %d, p[1..8] %s' % (c.trials[0], np.round(c.accepted[:8]/np.maximum(c.trials[:8],1),2).tolist())
print('curve after warm:', curve())
print('after warm: probe interval', b._probe_interval, 'cal chain', round(cal.factor(B.Draft('chain',8)),3), 'tree', round(cal.factor(B.Draft('tree',16)),3), 'drift', round(e.cost_table.drift,3), 'overhead', e.cost_table.overhead)
for r in range(3):
    cur[0]=f'c1 r{r}'; rate=run_round(1)
    print(f'round {r}: {rate:.1f} tok/s; cal chain', round(cal.factor(B.Draft('chain',8)),3), 'curve', curve())
for k,v in sorted(chosen.items()):
    if k[1]==1: print(k, v)

print(sorted(steps.items()))
