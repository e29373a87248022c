import json, sys, time, collections, torch
from dflash_trt import SamplingParams
from dflash_trt.bench.datasets import encode_prompt
from dflash_trt.engines.torch_engine import TorchEngine
from dflash_trt.spec import budget as B
torch.set_num_threads(1)
fx='tests/fixtures/gsm8k-tiny/'
c=int(sys.argv[1]); rounds=int(sys.argv[2])
turns=[json.loads(l)["turns"][0] for l in open('data/prompts/eagle_gsm8k.jsonl')][:16]
modes=['ar','auto']
eng={m: TorchEngine.from_pretrained(fx+'target', fx+'drafter', device='cpu', max_batch_size=16, max_seq_len=512) for m in modes}
prompts=[encode_prompt(eng['ar'].tokenizer,t,512-64)[0] for t in turns]
p=SamplingParams(max_new_tokens=64)
sch={'ar': eng['ar'].new_scheduler(use_drafter=False), 'auto': eng['auto'].new_scheduler(draft='auto')}
chosen=collections.Counter(); fed=collections.Counter()
oc=B.AutoBudget.choose
def ch(self,*a,**k):
    d=oc(self,*a,**k); chosen[(len(a[0]),str(d))]+=1; return d
B.AutoBudget.choose=ch
acc=collections.Counter(); calls=collections.Counter()
def wrap(cls,name):
    f=getattr(cls,name)
    def g(*a,**k):
        t=time.perf_counter(); r=f(*a,**k); acc[name]+=time.perf_counter()-t; calls[name]+=1; return r
    setattr(cls,name,g)
for n in ['choose','observe_window','observe_time','prepare','forget','needs_context','defers_context']:
    wrap(B.AutoBudget,n)
ids=collections.Counter()
def run_round(m):
    s=sch[m]; todo=list(range(len(prompts))); live=set(); toks=0
    t=time.perf_counter()
    while todo or live:
        while todo and len(live)<c:
            i=todo.pop(0); rid=f"{m}-{ids[m]}"; ids[m]+=1; s.add(rid, prompts[i], p); live.add(rid)
        for ev in s.step():
            toks+=len(ev.token_ids)
            if ev.finished: live.discard(ev.index)
    return toks, time.perf_counter()-t
for m in modes: run_round(m)
chosen.clear(); acc.clear(); calls.clear()
for m in modes: sch[m].prefill_s=0.0; sch[m].decode_s=0.0
res=collections.defaultdict(lambda: [0,0.0])
for r in range(rounds):
    for m in (modes if r%2==0 else modes[::-1]):
        k,t=run_round(m); res[m][0]+=k; res[m][1]+=t
for m in modes:
    print(m, 'tok/s', round(res[m][0]/res[m][1],1), 'total s', round(res[m][1],3), 'prefill s', round(sch[m].prefill_s,3), 'decode s', round(sch[m].decode_s,3))
print('auto/ar', round(res['auto'][0]/res['auto'][1]/(res['ar'][0]/res['ar'][1]),3))
print(sorted(chosen.items()))
b=sch['auto'].budget
print({k: (calls[k], round(acc[k]*1e3,1)) for k in acc}, 'windows', sum(chosen.values()))
print('probe interval', b._probe_interval, 'at_one', b._at_one)

