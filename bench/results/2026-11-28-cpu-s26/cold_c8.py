"""Twenty-sixth session (copied from s25, with FEED and per-kind acceptance): the cold start in the engine (the replay's c = 8 case): a FRESH engine per run, 40 eagle_gsm8k
prompts x 64 tokens at concurrency C (continuous arrivals, 1 ms of busy host work per step, as the server's path),
one AR pass and one auto pass whose budget starts cold (a new engine: no curve yet), order alternating with the run
index; prints auto / AR, auto's steps by draft. Run it with each code version's PYTHONPATH.
`[TOKENS=64] PYTHONPATH=. python bench/results/2026-11-28-cpu-s25/cold_c8.py RUN [C=8] [MODE=auto]`"""
import collections, json, os, sys, time, torch
from dflash_trt import SamplingParams
from dflash_trt.bench.datasets import encode_prompt
from dflash_trt.engines.torch_engine import TorchEngine
import dflash_trt.spec.budget as bm

torch.set_num_threads(1)
run = int(sys.argv[1])
C = int(sys.argv[2]) if len(sys.argv) > 2 else 8
MODE = sys.argv[3] if len(sys.argv) > 3 else 'auto'  # or a fixed draft (chain:8) in auto's place
fx = 'tests/fixtures/gsm8k-tiny/'
turns = [json.loads(l)["turns"][0] for l in open('data/prompts/eagle_gsm8k.jsonl')][:40]
eng = TorchEngine.from_pretrained(fx + 'target', fx + 'drafter', device='cpu', max_batch_size=C, max_seq_len=512)
prompts = [encode_prompt(eng.tokenizer, t, 512 - 64)[0] for t in turns]
TOKENS = int(os.environ.get('TOKENS', '64'))  # max_new_tokens per request
p = SamplingParams(max_new_tokens=TOKENS)
chosen = collections.Counter()
_choose = bm.AutoBudget.choose


def counted(self, *a, **kw):
    d = _choose(self, *a, **kw)
    chosen[str(d)] += 1
    return d


bm.AutoBudget.choose = counted
if os.environ.get('FEED'):  # FEED=1: the drafter always fed (no plain AR window, no deferred prompt)
    bm.AutoBudget.needs_context = lambda self, steps=1: True
    bm.AutoBudget.defers_context = lambda self, n, length=None: False
sch = {'ar': eng.new_scheduler(use_drafter=False), 'auto': eng.new_scheduler(draft=MODE)}  # (the table: timed here)


def one(m):
    s = sch[m]; eng.cache_owner = s
    todo = list(range(len(prompts))); live = set(); toks = 0; n = 0
    t = time.perf_counter()
    while todo or live:
        while todo and len(live) < C:
            i = todo.pop(0); rid = f"{m}-{n}"; n += 1; s.add(rid, prompts[i], p); live.add(rid)
        evs = s.step()
        t1 = time.perf_counter()
        while time.perf_counter() - t1 < 0.001:
            pass
        for ev in evs:
            toks += len(ev.token_ids)
            if ev.finished:
                live.discard(ev.index)
    return toks / (time.perf_counter() - t)


rate = {}
for m in (['ar', 'auto'] if run % 2 == 0 else ['auto', 'ar']):
    rate[m] = one(m)
print(f"run {run} c={C} tokens={TOKENS} {MODE} {bm.DEFAULT_PRIOR=} FEED={os.environ.get('FEED', '')}: {MODE} / AR {rate['auto'] / rate['ar']:.3f} (AR {rate['ar']:.0f} tok/s); "
      f"auto's choose() results {dict(chosen)}", flush=True)
if MODE == 'auto':  # what auto learnt: its chains' calibration (drafted tokens accepted / expected) and the curve
    b = sch['auto'].budget
    print(f"  calibration factor chain:8 {b.calibration.factor(bm.Draft('chain', 8)):.3f}, chain:4 "
          f"{b.calibration.factor(bm.Draft('chain', 4)):.3f}; curve steps {b.curve.steps():.0f}, per-depth "
          f"{[round(float(x), 2) for x in b.acceptance()[:7]]}", flush=True)
