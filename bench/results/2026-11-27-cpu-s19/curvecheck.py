"""Batch 1, 40 prompts, auto: the drafter's curve at the end (trials and acceptance per position), to compare runs that
ran tree:16 with runs that stayed on chain:8. `curvecheck.py`"""
import collections, torch, numpy as np
from dflash_trt import SamplingParams
from dflash_trt.bench.datasets import encode_prompt, load_prompt_set
from dflash_trt.engines.torch_engine import TorchEngine
from dflash_trt.spec import budget as B
torch.set_num_threads(1)
fx = 'tests/fixtures/gsm8k-tiny/'
e = TorchEngine.from_pretrained(fx + 'target', fx + 'drafter', device='cpu', max_batch_size=1, max_seq_len=512)
prompts = [encode_prompt(e.tokenizer, t, 512 - 128)[0] for t in load_prompt_set('data/prompts/eagle_gsm8k.jsonl', 41).turns]
p = SamplingParams(max_new_tokens=128)
c = collections.Counter()
oc = B.AutoBudget.choose
def ch(self, *a, **k):
    d = oc(self, *a, **k); c[str(d)] += 1; return d
B.AutoBudget.choose = ch
e.generate([prompts[0]], p, draft='chain:8')
for x in prompts[1:]: e.generate([x], p, draft='auto')
cv = e.draft_curve
np.set_printoptions(precision=2, suppress=True)
print('tree:16', c['tree:16'], 'chain:8', c['chain:8'])
print(' trials ', cv.trials[:8].round(0))
print(' p      ', (cv.accepted[:8] / np.maximum(cv.trials[:8], 1)))
