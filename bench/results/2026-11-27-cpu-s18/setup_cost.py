"""Per-generate setup at batch 1: a new scheduler (and its budget) and its first choice, auto vs tree:32, after a real
run (the engine's curves and cost table learnt). `setup_cost.py`"""
import time, statistics, torch
from dflash_trt import SamplingParams
from dflash_trt.bench.datasets import encode_prompt, load_prompt_set
from dflash_trt.engines.torch_engine import TorchEngine
torch.set_num_threads(1)
fx = 'tests/fixtures/gsm8k-tiny/'
e = TorchEngine.from_pretrained(fx + 'target', fx + 'drafter', device='cpu', max_batch_size=1, max_seq_len=512)
prompts = [encode_prompt(e.tokenizer, t, 512 - 64)[0] for t in load_prompt_set('data/prompts/eagle_gsm8k.jsonl', 8).turns]
for p in prompts:
    e.generate([p], SamplingParams(max_new_tokens=64), draft='auto')
for mode in ('tree:32', 'auto', 'tree:32', 'auto'):
    make, first = [], []
    for i in range(200):
        t0 = time.perf_counter(); s = e.new_scheduler(draft=mode); t1 = time.perf_counter()
        s.budget.choose([f"x{i}"], [64], 100); t2 = time.perf_counter()
        if hasattr(s.budget, 'forget'): s.budget.forget(f"x{i}")
        make.append(t1 - t0); first.append(t2 - t1)
    print(mode, 'new_scheduler us', round(statistics.median(make) * 1e6, 1), 'first choose us', round(statistics.median(first) * 1e6, 1))
import cProfile, pstats
prof = cProfile.Profile()
for i in range(200):
    s = e.new_scheduler(draft='auto')
    prof.enable(); s.budget.choose([f"y{i}"], [64], 100); prof.disable()
    s.budget.forget(f"y{i}")
pstats.Stats(prof).sort_stats('cumtime').print_stats(14)
