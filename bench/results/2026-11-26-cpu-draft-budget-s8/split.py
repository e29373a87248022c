"""An AR window's time at n = C requests (decode windows without a prefill, right after another AR window), split: the
host before the launch (the budget's choice and observe_time), launch + read (the model step), between them (the
previous window's observations handed to the budget), after the read; AR engine against auto's AR windows (whether
they fed the drafter: 'True' / 'False'), in-process like the server (16 eagle_gsm8k prompts x 64 tokens, continuous
arrivals, rounds alternating). Run from a tree's root: `split.py C ROUNDS`; NOFEED=1: auto's held AR windows never feed
the drafter (needs_context False; what it costs to feed it); FIXED=<draft> (the ninth session): the reference engine runs
that draft instead of AR, and every window counts, keyed by (mode, draft, whether the window before ran the same)."""
import json, sys, time, collections, torch
from dflash_trt import SamplingParams
from dflash_trt.bench.datasets import encode_prompt
from dflash_trt.engines.torch_engine import TorchEngine
torch.set_num_threads(1)
fx='tests/fixtures/gsm8k-tiny/'
c=int(sys.argv[1]); rounds=int(sys.argv[2])
turns=[json.loads(l)["turns"][0] for l in open('data/prompts/eagle_gsm8k.jsonl')][:16]
eng={m: TorchEngine.from_pretrained(fx+'target', fx+'drafter', device='cpu', max_batch_size=16, max_seq_len=512) for m in ['ar','auto']}
prompts=[encode_prompt(eng['ar'].tokenizer,t,512-64)[0] for t in turns]
p=SamplingParams(max_new_tokens=64)
import os
fixed=os.environ.get('FIXED')
sch={'ar': eng['ar'].new_scheduler(draft=fixed) if fixed else eng['ar'].new_scheduler(use_drafter=False),
     'auto': eng['auto'].new_scheduler(draft='auto')}
T={}
for m,s in sch.items():
    r=s.runner; L=r.launch; R=r.read
    def launch(*a, _L=L, _m=m, **k):
        T[_m+'l0']=time.perf_counter(); x=_L(*a,**k); T[_m+'l1']=time.perf_counter(); T[_m+'k']=a[1]; return x
    def read(*a, _R=R, _m=m, **k):
        t=time.perf_counter(); x=_R(*a,**k); T[_m+'r0']=t; T[_m+'r1']=time.perf_counter(); return x
    r.launch=launch; r.read=read
acc=collections.defaultdict(lambda: [0,0.0,0.0,0.0,0.0]); on=[False]
import os
from dflash_trt.spec import budget as B
if os.environ.get("NOFEED"): B.AutoBudget.needs_context=lambda self,steps=1: self._last is None or self._last.size>1 or self._probing is not None
S=type(sch['auto']); fd=S._feeds_drafter; F={}
def feeds(self,d): r=fd(self,d); F['f']=r; return r
S._feeds_drafter=feeds
prevk={}
ids=collections.Counter()
def run_round(m):
    s=sch[m]; todo=list(range(len(prompts))); live=set()
    while todo or live:
        while todo and len(live)<c:
            i=todo.pop(0); rid=f"{m}-{ids[m]}"; ids[m]+=1; s.add(rid, prompts[i], p); live.add(rid)
        n=len(live); pf=s.prefill_s; t0=time.perf_counter(); T.pop(m+'k',None)
        evs=s.step(); t1=time.perf_counter()
        for ev in evs:
            if ev.finished:
                assert ev.finish_reason != "error", ev.result.error  # a failed request emits nothing: its rate would lie
                live.discard(ev.index)
        t2=time.perf_counter()
        k=T.get(m+'k'); pk=prevk.get(m); prevk[m]=k
        if on[0] and s.prefill_s==pf and n==c and (fixed or k==1):
            a=acc[(m, k, pk==k) if fixed else (m, F.get('f') if m=='auto' else None, pk==1)]; a[0]+=1; a[1]+=t1-t0; a[2]+=T[m+'l0']-t0; a[3]+=(T[m+'l1']-T[m+'l0'])+(T[m+'r1']-T[m+'r0']); a[4]+=t1-T[m+'r1']
for m in sch: run_round(m)
on[0]=True
for r in range(rounds):
    for m in (['ar','auto'] if r%2==0 else ['auto','ar']): run_round(m)
for m,a in sorted(acc.items(),key=str):
    w=a[0]; print(m, w, 'windows; us per window: step', round(a[1]/w*1e6), 'before launch', round(a[2]/w*1e6), 'launch+read', round(a[3]/w*1e6), 'between (launch..read)', round((a[1]-a[2]-a[3]-a[4])/w*1e6), 'after read', round(a[4]/w*1e6))
