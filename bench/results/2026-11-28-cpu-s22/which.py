"""Twenty-second session: one long-lived auto scheduler (as a server keeps), a warm-up round at the highest of LEVELS,
then one round per level (16 prompts x 64 tokens, continuous arrivals): each round's rate and steps by draft, and the
budget's state after each (the drafter's curve, calibration, probe interval, cost table drift / probe factor / switch
factors). FP8=1: the drafter of out/engines/tiny-gsm8k-cpu (README's build, FP8); PRIOR=1: that build's measured curve
as auto's prior. Shows auto holding AR at low load after a round at higher load (AR lock-in), path-dependently.
`[FP8=1] [PRIOR=1] PYTHONPATH=. python bench/results/2026-11-28-cpu-s22/which.py 1,2,4`"""
import json, os, sys, time, collections, torch
from dflash_trt import SamplingParams
from dflash_trt.bench.datasets import encode_prompt
from dflash_trt.engines.torch_engine import TorchEngine
from dflash_trt.spec import budget as B
torch.set_num_threads(1)
fx='tests/fixtures/gsm8k-tiny/'
drafter = 'out/engines/tiny-gsm8k-cpu/drafter' if os.environ.get('FP8') else fx+'drafter'
prior=json.load(open('out/engines/tiny-gsm8k-cpu/manifest.json'))['acceptance']['curve'] if os.environ.get('PRIOR') else None
turns=[json.loads(l)["turns"][0] for l in open('data/prompts/eagle_gsm8k.jsonl')][:16]
e=TorchEngine.from_pretrained(fx+'target', drafter, device='cpu', max_batch_size=16, max_seq_len=512, draft_prior=prior)
prompts=[encode_prompt(e.tokenizer,t,512-64)[0] for t in turns]
p=SamplingParams(max_new_tokens=64)
s=e.new_scheduler(draft='auto')
ids=[0]
def run_round(c):
    todo=list(range(len(prompts))); live=set(); steps=collections.Counter(); t=time.perf_counter(); toks=0
    while todo or live:
        while todo and len(live)<c:
            i=todo.pop(0); rid=ids[0]; ids[0]+=1; s.add(rid, prompts[i], p); live.add(rid)
        for ev in s.step():
            toks+=len(ev.token_ids)
            if ev.finished:
                live.discard(ev.index); steps.update(ev.result.stats.draft_steps)
    return toks/(time.perf_counter()-t), steps
levels=[int(x) for x in sys.argv[1].split(',')]
run_round(max(levels))
import numpy as np
def state(tag):
    c=e.draft_curve; cal=e.draft_calibration; b=s.budget
    print(f"  {tag}: curve steps {c.trials[0]:.0f} p1-4 {np.round(c.accepted[:4]/np.maximum(c.trials[:4],1),2).tolist()}, cal chain {cal.factor(B.Draft('chain',8)):.3f} tree {cal.factor(B.Draft('tree',16)):.3f}, probe interval {b._probe_interval}, drift {e.cost_table.drift:.3f}, probe factor {e.cost_table.probe_factor:.3f}, switch {({str(k): round(v,2) for k,v in e.cost_table.switch.items()})}")
state('after warm-up')
for c in levels:
    rate, st = run_round(c)
    print(f"FP8={bool(os.environ.get('FP8'))} PRIOR={bool(prior)} c={c}: {rate:.0f} tok/s, AR {st['chain:1']} of {sum(st.values())}, {dict(st)}")
    state(f'after c={c}')
ct=e.cost_table
print({f"{k[1]}@{k[2]}": round(v*1e3,2) for k,v in ct.seconds.items() if k[0]==1 and k[2]==min(x[2] for x in ct.seconds)})
