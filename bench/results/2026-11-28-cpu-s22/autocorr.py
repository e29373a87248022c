"""Twenty-second session: is a request's acceptance autocorrelated? Fixed chain:8 over 80 eagle_gsm8k prompts (batch 8,
128 tokens, greedy): the mean τ of a step given the mean of the h steps before it (each capped at 3), and by the step's
index in its request. auto's per-request estimate (decayed counts, REQUEST_DECAY) reacts to the last few steps: this
says whether that reaction, and the AR windows it brings at batch 1, have a reason.
`PYTHONPATH=. python bench/results/2026-11-28-cpu-s22/autocorr.py`"""
import json, collections, statistics as S, torch
from dflash_trt import SamplingParams
from dflash_trt.bench.datasets import encode_prompt, load_prompt_set
from dflash_trt.engines.torch_engine import TorchEngine
torch.set_num_threads(1)
F='tests/fixtures/gsm8k-tiny'
e=TorchEngine.from_pretrained(F+'/target',F+'/drafter',max_batch_size=8,max_seq_len=512)
turns=load_prompt_set('data/prompts/eagle_gsm8k.jsonl',80).turns
prompts=[encode_prompt(e.tokenizer,t,384)[0] for t in turns]
seqs=[]
for i in range(0,80,8):
    for r in e.generate(prompts[i:i+8],SamplingParams(max_new_tokens=128),draft='chain:8'):
        seqs.append(r.stats.taus)
allt=[t for s in seqs for t in s[:-1]]
print('steps',len(allt),'mean tau',round(S.mean(allt),3))
for h in (1,2,3):
    c=collections.defaultdict(list)
    for s in seqs:
        s=s[:-1]
        for i in range(h,len(s)):
            prev=tuple(min(x,3) for x in s[i-h:i])
            c[sum(prev)/h].append(s[i])
    print('history',h, {round(k,2):(len(v),round(S.mean(v),2)) for k,v in sorted(c.items()) if len(v)>=20})
# by position in the request
pos=collections.defaultdict(list)
for s in seqs:
    for i,t in enumerate(s[:-1]): pos[min(i//5,8)].append(t)
print('by step index/5', {k:(len(v),round(S.mean(v),2)) for k,v in sorted(pos.items())})
