"""Twenty-sixth session: what windows cost at each batch size (launch to read plus the gap to the next launch, as the
scheduler hands observe_time), by draft, for AR, fixed chain:8 and auto in one engine (40 eagle_gsm8k prompts x TOKENS
at concurrency C, continuous, 1 ms of host work per step, as cold_c8.py); then what auto's cost table prices each draft
at for n = C (entry + overhead, x drift) against those medians, and its overhead and drift.
`[ORDER=auto,ar,chain:8] [TOKENS=128] PYTHONPATH=. python bench/results/2026-11-28-cpu-s26/cost_probe.py [C=8]`"""
import collections, json, os, statistics, sys, time, torch
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
TOKENS = int(os.environ.get('TOKENS', '128'))
p = SamplingParams(max_new_tokens=TOKENS)
times = collections.defaultdict(list)  # (mode, n, draft) -> seconds per step
mode = [None]


def rec(orig):
    def f(self, n, draft, seconds_per_step, length=None):
        times[(mode[0], n, str(draft))].append(seconds_per_step)
        return orig(self, n, draft, seconds_per_step, length)
    return f


bm.Fixed.observe_time = rec(bm.Fixed.observe_time)
bm.AutoBudget.observe_time = rec(bm.AutoBudget.observe_time)
sch = {'ar': eng.new_scheduler(use_drafter=False), 'chain:8': eng.new_scheduler(draft='chain:8'),
       'auto': eng.new_scheduler(draft='auto')}


def one(m):
    s = sch[m]; eng.cache_owner = s; mode[0] = m
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


rate = {m: one(m) for m in os.environ.get('ORDER', 'auto,ar,chain:8').split(',')}
print(f"c={C} tokens={TOKENS}: tok/s " + ", ".join(f"{m} {r:.0f}" for m, r in rate.items())
      + f"; auto / AR {rate['auto'] / rate['ar']:.3f}, chain:8 / AR {rate['chain:8'] / rate['ar']:.3f}")
b = sch['auto'].budget
ct = b.cost
print(f"  auto's drift {ct.drift:.3f}, overhead { {n: round(v * 1e3, 3) for n, v in sorted(ct.overhead.items())} } ms, "
      f"probe factor {ct.probe_factor:.2f}, switch {({str(k): round(v, 2) for k, v in ct.switch.items()})}")
for n in (C, C - 1, C // 2):
    meds = {k[2]: (statistics.median(v), len(v), k[0]) for k, v in times.items() if k[1] == n}
    priced = dict(zip(map(str, b.drafts), ct.costs(n, b.drafts, 256)))
    print(f"  n={n}: " + "; ".join(f"{m}:{d} {s * 1e3:.2f} ms ({c})" for d, (s, c, m) in sorted(meds.items()))
          + " | auto priced at L=256 x drift: " + ", ".join(f"{d} {v * ct.drift * 1e3:.2f}" for d, v in priced.items()
                                                            if d in ('chain:1', 'chain:4', 'chain:8')))
    for m in ('ar', 'chain:8', 'auto'):
        for d in ('chain:1', 'chain:8'):
            v = times.get((m, n, d))
            if v:
                print(f"    {m:8s} {d:8s} windows {len(v):4d} median {statistics.median(v) * 1e3:.2f} ms")
