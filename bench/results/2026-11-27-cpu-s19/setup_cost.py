"""Per-generate setup at batch 1 (after a real run): new scheduler + defers_context (the prefill's) + first choose,
auto vs tree:32; warm loop of 200, and 'cold' (a 4 ms torch matmul loop before each)."""
import time, statistics, sys, torch
from dflash_trt import SamplingParams
from dflash_trt.bench.datasets import encode_prompt, load_prompt_set
from dflash_trt.engines.torch_engine import TorchEngine
torch.set_num_threads(1)
fx = 'tests/fixtures/gsm8k-tiny/'
e = TorchEngine.from_pretrained(fx + 'target', fx + 'drafter', device='cpu', max_batch_size=1, max_seq_len=512)
prompts = [encode_prompt(e.tokenizer, t, 512 - 64)[0] for t in load_prompt_set('data/prompts/eagle_gsm8k.jsonl', 8).turns]
for p in prompts:
    e.generate([p], SamplingParams(max_new_tokens=64), draft='auto')
a = torch.randn(256, 256)
def cold():
    for _ in range(20): a @ a
for label, pre in (('warm', None), ('cold', cold)):
    for mode in ('tree:32', 'auto', 'tree:32', 'auto'):
        make, dc, first = [], [], []
        for i in range(200):
            if pre: pre()
            t0 = time.perf_counter(); s = e.new_scheduler(draft=mode); t1 = time.perf_counter()
            s.budget.defers_context(1, 100); t2 = time.perf_counter()
            s.budget.choose([f"x{i}"], [64], 100); t3 = time.perf_counter()
            s.budget.forget(f"x{i}")
            make.append(t1 - t0); dc.append(t2 - t1); first.append(t3 - t2)
        med = lambda v: round(statistics.median(v) * 1e6, 1)
        print(label, mode, 'new_scheduler us', med(make), 'defers_context us', med(dc), 'first choose us', med(first))
