"""Window times per step at n=C (continuous, 1 ms busy host work per step, as cold_c8.py) for AR (no drafter), chain:4
and chain:8 fixed, and the engine's startup cost table entries at n=C. `TOKENS=128 PYTHONPATH=CODE:. python c8_times.py [C]`"""
import collections, json, os, sys, time, statistics as st, torch
from dflash_trt import SamplingParams
from dflash_trt.bench.datasets import encode_prompt
from dflash_trt.engines.torch_engine import TorchEngine
import dflash_trt.spec.budget as bm
torch.set_num_threads(1)
C = int(sys.argv[1]) if len(sys.argv) > 1 else 8
fx = 'tests/fixtures/gsm8k-tiny/'
turns = [json.loads(l)["turns"][0] for l in open('data/prompts/eagle_gsm8k.jsonl')][:40]
eng = TorchEngine.from_pretrained(fx + 'target', fx + 'drafter', device='cpu', max_batch_size=C, max_seq_len=512)
prompts = [encode_prompt(eng.tokenizer, t, 512 - 64)[0] for t in turns]
TOKENS = int(os.environ.get('TOKENS', '64')); p = SamplingParams(max_new_tokens=TOKENS)
times = collections.defaultdict(list); mode = [None]
_ot = bm.Fixed.observe_time
def ot(self, n, draft, s, length=None, *a, **k):
    if n == C: times[mode[0]].append(s * 1e3)
    return _ot(self, n, draft, s, length, *a, **k)
bm.Fixed.observe_time = ot
def one(m, s):
    mode[0] = m; eng.cache_owner = s
    todo = list(range(len(prompts))); live = set(); toks = 0; n = 0; t = time.perf_counter()
    while todo or live:
        while todo and len(live) < C:
            i = todo.pop(0); rid = f"{m}-{n}"; n += 1; s.add(rid, prompts[i], p); live.add(rid)
        evs = s.step()
        t1 = time.perf_counter()
        while time.perf_counter() - t1 < 0.001: pass
        for ev in evs:
            toks += len(ev.token_ids)
            if ev.finished: live.discard(ev.index)
    return toks / (time.perf_counter() - t)
a = eng.new_scheduler(draft='auto')
print("startup table ms at n=C:", {k: round(a.budget.cost.cost(C, bm.Draft('chain', k)) * 1e3, 2) for k in (1, 4, 8)})
sch = {'ar': eng.new_scheduler(use_drafter=False), 'chain:4': eng.new_scheduler(draft='chain:4'), 'chain:8': eng.new_scheduler(draft='chain:8')}
rate = {m: one(m, s) for m, s in sch.items()}
for m in sch: print(m, f"{rate[m] / rate['ar']:.3f}x AR", "window ms per step at n=C: median", round(st.median(times[m]), 2), "n", len(times[m]))
