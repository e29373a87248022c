"""`capped.py C ROUNDS`: what auto's choices at 4+ requests are worth — AR, auto, and auto whose every drafting choice at
4+ requests is turned into AR (a wrapper around its budget), three engines in one process, in-process like the server
at concurrency C (16 eagle_gsm8k prompts x 64 tokens, continuous arrivals), rounds in rotating order after a warm-up
round. Prints each mode's tok/s over AR's and how many choices the wrapper turned."""
import json, sys, time, collections, torch
from dflash_trt import SamplingParams
from dflash_trt.bench.datasets import encode_prompt
from dflash_trt.engines.torch_engine import TorchEngine
from dflash_trt.spec.budget import Draft
torch.set_num_threads(1)
fx='tests/fixtures/gsm8k-tiny/'
c=int(sys.argv[1]); rounds=int(sys.argv[2])
turns=[json.loads(l)["turns"][0] for l in open('data/prompts/eagle_gsm8k.jsonl')][:16]
modes=['ar','auto','cap']
eng={m: TorchEngine.from_pretrained(fx+'target', fx+'drafter', device='cpu', max_batch_size=16, max_seq_len=512) for m in modes}
prompts=[encode_prompt(eng['ar'].tokenizer,t,512-64)[0] for t in turns]
p=SamplingParams(max_new_tokens=64)
AR=Draft('chain',1)
class Cap:
    def __init__(s,b): s.b=b; s.capped=0
    def __getattr__(s,k): return getattr(s.b,k)
    def choose(s,ids,left,length):
        d=s.b.choose(ids,left,length)
        if len(ids)>=4 and d!=AR: s.capped+=1; s.b._last=AR; s.b._probing=None; return AR
        return d
sch={'ar': eng['ar'].new_scheduler(use_drafter=False), 'auto': eng['auto'].new_scheduler(draft='auto'), 'cap': eng['cap'].new_scheduler(draft='auto')}
sch['cap'].budget=Cap(sch['cap'].budget)
ids=collections.Counter()
def run_round(m):
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
for m in modes: run_round(m)
res=collections.defaultdict(lambda: [0,0.0])
import itertools
orders=list(itertools.permutations(modes))
for r in range(rounds):
    for m in orders[r%len(orders)]:
        k,t=run_round(m); res[m][0]+=k; res[m][1]+=t
ar=res['ar'][0]/res['ar'][1]
print(' '.join(f"{m} {res[m][0]/res[m][1]/ar:.3f}" for m in modes), 'capped', sch['cap'].budget.capped)
