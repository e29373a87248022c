"""Twenty-sixth session: the per-request τ of the first windows of one static batch of 8 (MODE: a fixed draft or auto).
`PYTHONPATH=. python bench/results/2026-11-28-cpu-s26/first_windows.py chain:16`"""
import json, os, sys, torch
from dflash_trt import SamplingParams
from dflash_trt.bench.datasets import encode_prompt
from dflash_trt.engines.torch_engine import TorchEngine
import dflash_trt.spec.budget as bm
torch.set_num_threads(1)
MODE = sys.argv[1]
fx = 'tests/fixtures/gsm8k-tiny/'
turns = [json.loads(l)["turns"][0] for l in open('data/prompts/eagle_gsm8k.jsonl')][:40]
eng = TorchEngine.from_pretrained(fx + 'target', fx + 'drafter', device='cpu', max_batch_size=8, max_seq_len=512)
prompts = [encode_prompt(eng.tokenizer, t, 512 - 64)[0] for t in turns]
p = SamplingParams(max_new_tokens=128)
seen = []
def rec(orig):
    def f(self, requests, draft, taus, chain_equivalent=(), finished=()):
        if len(seen) < 8:
            seen.append((str(draft), [list(t) for t in taus]))
        return orig(self, requests, draft, taus, chain_equivalent, finished)
    return f
bm.Fixed.observe_window = rec(bm.Fixed.observe_window)
bm.AutoBudget.observe_window = rec(bm.AutoBudget.observe_window)
for b in range(int(os.environ.get('BATCHES', '1'))):
    s = eng.new_scheduler(draft=MODE)
    for i in range(8):
        s.add(f"b{b}-{i}", prompts[8 * b + i], p)
    while s.has_work:
        s.step()
for d, t in seen:
    print(d, t)
