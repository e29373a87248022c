"""Per generate() at batch 1, the GPU's host loop (_overlap forced on this CPU): host time of the budget before the
first window (defers_context at the prefill + the first choose), auto; median over prompts."""
import sys, time, statistics, functools, torch
from dflash_trt import SamplingParams
from dflash_trt.bench.datasets import encode_prompt, load_prompt_set
from dflash_trt.engines.torch_engine import TorchEngine
from dflash_trt.engines import scheduler as S
from dflash_trt.spec import budget as B
torch.set_num_threads(1)
fx = 'tests/fixtures/gsm8k-tiny/'
e = TorchEngine.from_pretrained(fx + 'target', fx + 'drafter', device='cpu', max_batch_size=1, max_seq_len=512)
prompts = [encode_prompt(e.tokenizer, t, 512 - 64)[0] for t in load_prompt_set('data/prompts/eagle_gsm8k.jsonl', 40).turns]
init = S.BatchScheduler.__init__
def patched(self, *a, **k):
    init(self, *a, **k); self._overlap = self.spec
S.BatchScheduler.__init__ = patched
first = {}
times = []
for name in ('defers_context', 'choose'):
    f = getattr(B.AutoBudget, name)
    def g(self, *a, _f=f, _n=name, **k):
        t = time.perf_counter(); r = _f(self, *a, **k); dt = time.perf_counter() - t
        if id(self) not in first or (_n == 'choose' and first[id(self)][1] == 0):
            d = first.setdefault(id(self), [0.0, 0]); d[0] += dt; d[1] += _n == 'choose'
        return r
    setattr(B.AutoBudget, name, g)
p = SamplingParams(max_new_tokens=64)
for x in prompts[:8]:
    e.generate([x], p, draft='auto')
first.clear()
for x in prompts:
    e.generate([x], p, draft='auto')
v = [d[0] for d in first.values()]
print(f"before the first window: median {statistics.median(v)*1e6:.1f} us, mean {statistics.mean(v)*1e6:.1f} us over {len(v)} requests")
