"""`expected.py C ROUNDS [TOKENS]`: auto alone, in-process like the server at concurrency C (after a warm-up round): per
request in each drafted window, the tokens its pricing expected against those it emitted, by batch size, by the AR
windows since the batch's last drafted window (gap) and by whether the request's estimate was the global curve."""
import json, sys, time, collections, torch
from dflash_trt import SamplingParams
from dflash_trt.bench.datasets import encode_prompt
from dflash_trt.engines.torch_engine import TorchEngine
from dflash_trt.spec import budget as B
torch.set_num_threads(1)
fx='tests/fixtures/gsm8k-tiny/'
c=int(sys.argv[1]); rounds=int(sys.argv[2]); ntok=int(sys.argv[3]) if len(sys.argv)>3 else 64
turns=[json.loads(l)["turns"][0] for l in open('data/prompts/eagle_gsm8k.jsonl')][:16]
e=TorchEngine.from_pretrained(fx+'target', fx+'drafter', device='cpu', max_batch_size=16, max_seq_len=512)
prompts=[encode_prompt(e.tokenizer,t,512-ntok)[0] for t in turns]
p=SamplingParams(max_new_tokens=ntok)
s=e.new_scheduler(draft='auto')
Q=[]; rec=[]; st={'ar':0}
fc=B.AutoBudget.choose
def ch(self,reqs,left=None,length=None):
    d=fc(self,reqs,left,length)
    kind='probe' if self._probing==d else 'merit'
    if d.tree and self.tree_curves[d.size].tree.trials[0] < B.TREE_MEASURE_STEPS: kind='measure'
    per=None
    if d.size>1:
        rows=[self._rows.get(r,0) for r in reqs]; caps=self._caps(left)
        per=self._at_caps(self._prefixes[1][rows], caps)[:, self.drafts.index(d)].tolist()
    Q.append((list(reqs), d, kind, per, [self._rows.get(r,0)==0 or self._counts[self._rows[r],1,0]==0 for r in reqs]))
    return d
fw=B.AutoBudget.observe_window
def ow(self,reqs,d,taus,*a,**k):
    j=next((j for j,q in enumerate(Q) if q[1]==d and set(reqs)<=set(q[0])), None)
    if j is not None:
        rq,dd,kind,per,glob=Q[j]; del Q[:j+1]
        if d.size>1:
            for r,t in zip(reqs,taus):
                i=rq.index(r); rec.append(dict(n=len(rq),d=str(d),kind=kind,pred=per[i],real=sum(t),gap=st['ar'],glob=glob[i]))
            st['ar']=0
        else: st['ar']+=1
    return fw(self,reqs,d,taus,*a,**k)
B.AutoBudget.choose=ch; B.AutoBudget.observe_window=ow
ids=[0]
def run_round():
    todo=list(range(len(prompts))); live=set()
    while todo or live:
        while todo and len(live)<c:
            i=todo.pop(0); rid=f"r{ids[0]}"; ids[0]+=1; s.add(rid, prompts[i], p); live.add(rid)
        for ev in s.step():
            if ev.finished:
                assert ev.finish_reason != "error", ev.result.error  # a failed request emits nothing: its rate would lie
                live.discard(ev.index)
run_round(); rec.clear()
for r in range(rounds): run_round()

import numpy as np
def show(name, sel):
    x=[r for r in rec if sel(r)]
    if x: print(f"{name:28s} n={len(x):5d} pred {np.mean([r['pred'] for r in x]):.2f} real {np.mean([r['real'] for r in x]):.2f}")
for n in sorted({r['n'] for r in rec}):
    show(f'n={n} all', lambda r: r['n']==n)
    show(f'n={n} merit', lambda r: r['n']==n and r['kind']=='merit')
for g in [(0,0),(1,8),(9,64),(65,10**9)]:
    show(f'gap {g}', lambda r: g[0]<=r['gap']<=g[1])
show('global-estimate rows', lambda r: r['glob']); show('own-estimate rows', lambda r: not r['glob'])
