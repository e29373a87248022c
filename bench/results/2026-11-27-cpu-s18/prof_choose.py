"""cProfile of AutoBudget.choose only, in-process, continuous arrivals at concurrency C (16 prompts x 64 tokens), 1 ms
of busy host work per step. `prof_choose.py C ROUNDS`"""
import cProfile, pstats, sys, time, collections, torch
from dflash_trt import SamplingParams
from dflash_trt.bench.datasets import encode_prompt, load_prompt_set
from dflash_trt.engines.torch_engine import TorchEngine
from dflash_trt.spec import budget as B
torch.set_num_threads(1)
fx = 'tests/fixtures/gsm8k-tiny/'
c, rounds = int(sys.argv[1]), int(sys.argv[2])
e = TorchEngine.from_pretrained(fx + 'target', fx + 'drafter', device='cpu', max_batch_size=16, max_seq_len=512)
prompts = [encode_prompt(e.tokenizer, t, 512 - 64)[0] for t in load_prompt_set('data/prompts/eagle_gsm8k.jsonl', 16).turns]
s = e.new_scheduler(draft='auto'); p = SamplingParams(max_new_tokens=64)
prof = cProfile.Profile(); depth = [0]; n = collections.Counter(); acc = collections.Counter()
for name in ['choose', 'observe_time', 'observe_window', 'prepare', 'defers_context', 'needs_context', 'hold', 'forget']:
    f = getattr(B.AutoBudget, name)
    def g(self, *a, _f=f, _n=name, **k):
        depth[0] += 1
        t = time.perf_counter()
        if depth[0] == 1 and _n == 'choose' and 'noprof' not in sys.argv: prof.enable()
        try: return _f(self, *a, **k)
        finally:
            depth[0] -= 1
            if depth[0] == 0:
                prof.disable(); acc[_n] += time.perf_counter() - t; n[_n] += 1
    setattr(B.AutoBudget, name, g)
ids = 0
for r in range(rounds + 1):
    if r == 1: prof = cProfile.Profile(); n.clear(); acc.clear()
    todo = list(range(16)); live = set()
    while todo or live:
        while todo and len(live) < c:
            i = todo.pop(0); rid = f"r{ids}"; ids += 1; s.add(rid, prompts[i], p); live.add(rid)
        for ev in s.step():
            if ev.finished: live.discard(ev.index)
        t1 = time.perf_counter()
        while time.perf_counter() - t1 < 0.001: pass
print({k: (n[k], round(acc[k] / n[k] * 1e6, 1)) for k in n}, 'calls, us each (unprofiled but choose)')
pstats.Stats(prof).sort_stats('tottime').print_stats(22)
