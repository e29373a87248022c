"""Twenty-second session: the seventh session's in-process server-like replay (../2026-11-26-cpu-draft-budget-s7/
replay.py: one long-lived scheduler per mode, each its own engine, continuous arrivals at concurrency c, a warm-up round,
rounds interleaved between modes) with three more modes by name: `c8` (fixed chain:8), `shrink` (auto whose
explore_share drops to a quarter, 0.5 %, once its probe interval has backed off to the most, probe_every x
MAX_PROBE_BACKOFF windows: the "share that shrinks once the curve is well measured" lead), and `noexp` as before
(explore_share 1e-6: no exploration); with `profile` it also counts defers_context's answers by mode, batch size and
the last draft. `PYTHONPATH=. python bench/results/2026-11-28-cpu-s22/replay.py LEVELS ROUNDS [noexp] [shrink] [c8]
[profile]` from the repository root."""
import json, sys, time, collections, torch
from dflash_trt import SamplingParams
from dflash_trt.bench.datasets import encode_prompt
from dflash_trt.engines.torch_engine import TorchEngine
from dflash_trt.spec import budget as B
torch.set_num_threads(1)
fx='tests/fixtures/gsm8k-tiny/'
levels=[int(x) for x in sys.argv[1].split(',')]; rounds=int(sys.argv[2]); profile='profile' in sys.argv[3:]
turns=[json.loads(l)["turns"][0] for l in open('data/prompts/eagle_gsm8k.jsonl')][:16]
modes=['ar','auto']+[m for m in ('cap','noexp','c8','shrink') if m in sys.argv[3:]]
eng={m: TorchEngine.from_pretrained(fx+'target', fx+'drafter', device='cpu', max_batch_size=16, max_seq_len=512) for m in modes}
prompts=[encode_prompt(eng['ar'].tokenizer,t,512-64)[0] for t in turns]
p=SamplingParams(max_new_tokens=64)
sch={'ar': eng['ar'].new_scheduler(use_drafter=False), 'auto': eng['auto'].new_scheduler(draft='auto')}
class Cap:  # auto, its drafting choices at 4+ requests turned into AR
    def __init__(self, budget): self.budget, self.capped = budget, 0
    def __getattr__(self, name): return getattr(self.budget, name)
    def choose(self, ids, left, length):
        d=self.budget.choose(ids, left, length)
        if len(ids)>=4 and d.size>1:
            self.capped+=1; self.budget._last, self.budget._probing = B.Draft('chain',1), None
            return B.Draft('chain',1)
        return d
if 'shrink' in modes:
    sch['shrink']=eng['shrink'].new_scheduler(draft='auto')
    _ch=B.AutoBudget._choose
    def _choose(self,*a,**k):
        if getattr(self,'shrinks',False):
            self.explore_share=B.EXPLORE_SHARE/4 if self._probe_interval>=self.probe_every*B.MAX_PROBE_BACKOFF else B.EXPLORE_SHARE
        return _ch(self,*a,**k)
    B.AutoBudget._choose=_choose
    sch['shrink'].budget.shrinks=True
if 'c8' in modes:
    sch['c8']=eng['c8'].new_scheduler(draft='chain:8')
if 'noexp' in modes:
    sch['noexp']=eng['noexp'].new_scheduler(draft='auto'); sch['noexp'].budget.explore_share=1e-6
if 'cap' in modes:
    sch['cap']=eng['cap'].new_scheduler(draft='auto'); sch['cap'].budget=Cap(sch['cap'].budget)
chosen=collections.Counter(); acc=collections.Counter(); calls=collections.Counter()
if profile:  # time the budget's calls; count auto's choices by batch size
    def wrap(name):
        f=getattr(B.AutoBudget,name)
        def g(self,*a,**k):
            t=time.perf_counter(); r=f(self,*a,**k); acc[name]+=time.perf_counter()-t; calls[name]+=1
            if name=='choose': chosen[(len(a[0]),str(r))]+=1
            return r
        setattr(B.AutoBudget,name,g)
    for n in ['choose','observe_window','observe_time','prepare','forget','needs_context','defers_context']:
        wrap(n)
ids=collections.Counter()
dfc=collections.Counter(); curmode=[None]
_dc=B.AutoBudget.defers_context
def dc(self, n, length=None):
    r=_dc(self, n, length); dfc[(curmode[0], n, r, str(self._last))]+=1; return r
B.AutoBudget.defers_context=dc
def run_round(m, c):
    curmode[0]=m
    s=sch[m]; todo=list(range(len(prompts))); live=set(); toks=0
    t=time.perf_counter()
    while todo or live:
        while todo and len(live)<c:
            i=todo.pop(0); rid=f"{m}-{ids[m]}"; ids[m]+=1; s.add(rid, prompts[i], p); live.add(rid)
        for ev in s.step():
            toks+=len(ev.token_ids)
            if ev.finished:
                assert ev.finish_reason != "error", ev.result.error  # a failed request emits nothing: its rate would lie
                live.discard(ev.index)
    return toks, time.perf_counter()-t
for c in levels:  # warm-up round per level
    for m in modes: run_round(m, c)
chosen.clear(); acc.clear(); calls.clear(); dfc.clear()
for m in modes: sch[m].prefill_s=sch[m].decode_s=0.0
res=collections.defaultdict(lambda: [0,0.0])
for r in range(rounds):
    for c in levels:
        for m in (modes if r%2==0 else modes[::-1]):
            k,t=run_round(m,c); res[(m,c)][0]+=k; res[(m,c)][1]+=t
print(' '.join(f"c{c} {res[('auto',c)][0]/res[('auto',c)][1]/(res[('ar',c)][0]/res[('ar',c)][1]):.3f}" for c in levels), ' AR tok/s', ' '.join(f"{res[('ar',c)][0]/res[('ar',c)][1]:.0f}" for c in levels))
if 'noexp' in modes:
    print('noexp / AR', ' '.join(f"c{c} {res[('noexp',c)][0]/res[('noexp',c)][1]/(res[('ar',c)][0]/res[('ar',c)][1]):.3f}" for c in levels))
for extra in ('shrink',):
    if extra in modes: print(extra+' / AR', ' '.join(f"c{c} {res[(extra,c)][0]/res[(extra,c)][1]/(res[('ar',c)][0]/res[('ar',c)][1]):.3f}" for c in levels), 'interval', sch[extra].budget._probe_interval, 'share', sch[extra].budget.explore_share)
if 'c8' in modes:
    print('c8 / AR', ' '.join(f"c{c} {res[('c8',c)][0]/res[('c8',c)][1]/(res[('ar',c)][0]/res[('ar',c)][1]):.3f}" for c in levels))
if 'cap' in modes:
    print('cap / AR', ' '.join(f"c{c} {res[('cap',c)][0]/res[('cap',c)][1]/(res[('ar',c)][0]/res[('ar',c)][1]):.3f}" for c in levels), 'choices turned', sch['cap'].budget.capped)
if profile:
    for m in modes:
        print(m, 'prefill s', round(sch[m].prefill_s,3), 'decode s', round(sch[m].decode_s,3))
    print(sorted(chosen.items()))
    print({k: (calls[k], round(acc[k]*1e3,1)) for k in acc}, 'windows', sum(chosen.values()))

print(sorted(dfc.items(), key=str))
