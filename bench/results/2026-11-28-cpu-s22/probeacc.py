"""Twenty-second session: the drafting windows of one long-lived auto scheduler at concurrency 16 (rounds of 16
prompts x 64 tokens, continuous arrivals): their steps' mean min(τ, 4) by batch (>= 8 requests or not), draft and kind
at observation (a probe; a drafter fed fewer than TAP_LEAD steps since plain AR windows; on merit). Asks whether the
probes that are the drafter curve's only observations at high load accept less than drafting does.
`PYTHONPATH=. python bench/results/2026-11-28-cpu-s22/probeacc.py 16,16,16,16`"""
import json, sys, time, collections, statistics as S, torch
from dflash_trt import SamplingParams
from dflash_trt.bench.datasets import encode_prompt
from dflash_trt.engines.torch_engine import TorchEngine
from dflash_trt.spec import budget as B
torch.set_num_threads(1)
fx='tests/fixtures/gsm8k-tiny/'
turns=[json.loads(l)["turns"][0] for l in open('data/prompts/eagle_gsm8k.jsonl')][:16]
e=TorchEngine.from_pretrained(fx+'target', fx+'drafter', device='cpu', max_batch_size=16, max_seq_len=512)
prompts=[encode_prompt(e.tokenizer,t,512-64)[0] for t in turns]
p=SamplingParams(max_new_tokens=64)
s=e.new_scheduler(draft='auto')
seen=collections.defaultdict(list)
ow=B.AutoBudget.observe_window
def obs(self, requests, draft, taus, chains=(), finished=(), *a, **k):
    if draft.size > 1:
        kind = 'probe' if self._probing is not None else ('fed<TAP' if self._fed < B.TAP_LEAD else 'merit')
        for t in taus: seen[(len(requests) >= 8, str(draft), kind)].extend(min(x, 4) for x in t)
    return ow(self, requests, draft, taus, chains, finished, *a, **k)
B.AutoBudget.observe_window=obs
ids=[0]
def run_round(c):
    todo=list(range(len(prompts))); live=set()
    while todo or live:
        while todo and len(live)<c:
            i=todo.pop(0); rid=ids[0]; ids[0]+=1; s.add(rid, prompts[i], p); live.add(rid)
        for ev in s.step():
            if ev.finished: live.discard(ev.index)
for c in [int(x) for x in sys.argv[1].split(',')]:
    run_round(c)
for k,v in sorted(seen.items()):
    print(k, len(v), 'mean min(tau,4)', round(S.mean(v),2))
print('fixed chain:4 at batch 1 on these prompts: tau 2.98 (bench)')
