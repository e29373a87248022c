"""One request's prefill (16 eagle_gsm8k prompts x 5, interleaved): AR, with the prompt deferred (only its last rows
pending for the drafter), and taken into the drafter. From the repository root: python .../prefill_cost.py"""
import json, time, torch, statistics as st
from dflash_trt import SamplingParams
from dflash_trt.bench.datasets import encode_prompt
from dflash_trt.engines.torch_engine import TorchEngine
torch.set_num_threads(1)
fx='tests/fixtures/gsm8k-tiny/'
e=TorchEngine.from_pretrained(fx+'target', fx+'drafter', device='cpu', max_batch_size=16, max_seq_len=512)
turns=[json.loads(l)["turns"][0] for l in open('data/prompts/eagle_gsm8k.jsonl')][:16]
prompts=[encode_prompt(e.tokenizer,t,512-64)[0] for t in turns]
print("prompt lengths", [len(p) for p in prompts][:8])
p=SamplingParams(max_new_tokens=1)
step=e.step_runner
import dflash_trt.spec.step as S
times={"ar":[], "spec_defer":[], "spec":[]}
orig=step.prefill
def timed(mode):
    def f(reqs, spec, defer=False):
        t=time.perf_counter(); r=orig(reqs, spec, defer); times[mode].append(time.perf_counter()-t); return r
    return f
for rnd in range(5):
  for pr in prompts:
    for mode in ("ar","spec_defer","spec"):
        if mode=="ar":
            step.prefill=timed(mode); e.generate([pr], p, use_drafter=False)
        elif mode=="spec_defer":
            step.prefill=lambda reqs, spec, defer=False, _f=timed(mode): _f(reqs, spec, True)
            e.generate([pr], p, draft="chain:8")
        else:
            step.prefill=lambda reqs, spec, defer=False, _f=timed(mode): _f(reqs, spec, False)
            e.generate([pr], p, draft="chain:8")
for m,v in times.items(): print(m, len(v), "median %.2f ms" % (1e3*st.median(v)), "sum %.1f ms" % (1e3*sum(v)))
