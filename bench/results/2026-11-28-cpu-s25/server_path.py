"""Twenty-fifth session: why does auto draft at 16 requests through the server (Pareto runs: 11-38 % of its c = 16 steps
drafted, where chain:8 gives 0.85-0.90x AR)? The server's path in-process, as its benchmark drives it: ONE engine and
ONE auto scheduler kept across concurrency 1, 2, 4, 8, 16 (16 eagle_gsm8k prompts x 64 tokens, a warm-up round and
ROUNDS rounds per level, continuous arrivals, DELAY s of busy host work per step). Every window's time is recorded with
what the cost table priced it at just before (entry x drift, + overhead); at c >= 8 every window auto drafts on merit
at n >= 13 is printed with its pricing. At the end, per (n >= 13, draft): windows, measured ms per step, priced ms,
and their ratio; and the startup entries against the table's final ones.
`PYTHONPATH=. python bench/results/2026-11-28-cpu-s25/server_path.py [ROUNDS=3] [DELAY=0.001]`"""
import collections, json, statistics, sys, time, torch
import dflash_trt.spec.budget as bm
from dflash_trt import SamplingParams
from dflash_trt.bench.datasets import encode_prompt
from dflash_trt.engines.torch_engine import TorchEngine

torch.set_num_threads(1)
fx = 'tests/fixtures/gsm8k-tiny/'
rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 3
DELAY = float(sys.argv[2]) if len(sys.argv) > 2 else 0.001
turns = [json.loads(l)["turns"][0] for l in open('data/prompts/eagle_gsm8k.jsonl')][:16]
eng = TorchEngine.from_pretrained(fx + 'target', fx + 'drafter', device='cpu', max_batch_size=16, max_seq_len=512)
prompts = [encode_prompt(eng.tokenizer, t, 512 - 64)[0] for t in turns]
p = SamplingParams(max_new_tokens=64)
s = eng.new_scheduler(draft='auto')
b = s.budget
table = b.cost
startup = dict(table.seconds)
level = [0]
seen = collections.defaultdict(list)  # (c, n, draft) -> [(measured s/step, priced s/step)]
_observe_time = b.observe_time


def observe_time(n, d, seconds_per_step, length=None):
    priced = table.cost(n, d, length) * table.drift + table.overhead.get(n, 0.0) * table.drift
    seen[level[0], n, str(d)].append((seconds_per_step, priced))
    return _observe_time(n, d, seconds_per_step, length)


b.observe_time = observe_time
log = []
_choose = bm.AutoBudget._choose


def traced(self, requests, left, length):
    before = self._last
    d = _choose(self, requests, left, length)
    if level[0] >= 8 and d.size > 1 and self._probing is None and len(requests) >= 13 and self._pricing is not None:
        pr = self._pricing[2]
        expected, now, rates, raw = pr[0], pr[2], pr[3], pr[6]
        ar = bm.Draft("chain", 1)
        log.append(f"c={level[0]} n={len(requests)} {d} after {before}: E {expected[d]:.1f} (raw {raw[d]:.1f}) at "
                   f"{1e3 * now[d]:.1f} ms = {rates[d]:.0f} tok/s vs AR E {expected[ar]:.1f} at {1e3 * now[ar]:.2f} ms = "
                   f"{rates[ar]:.0f}; factor {self.calibration.factor(d):.3f}, optimism "
                   f"{self._optimism().get(d, 1.0):.3f}, p1 {self.acceptance()[0]:.2f}, drift {self.cost.drift:.2f}")
    return d


bm.AutoBudget._choose = traced


def run_round(c):
    todo = list(range(len(prompts))); live = set(); n = [0]
    while todo or live:
        while todo and len(live) < c:
            i = todo.pop(0); rid = f"{c}-{n[0]}-{time.perf_counter()}"; n[0] += 1; s.add(rid, prompts[i], p); live.add(rid)
        evs = s.step()
        t1 = time.perf_counter()
        while time.perf_counter() - t1 < DELAY:
            pass
        for ev in evs:
            if ev.finished:
                live.discard(ev.index)


for c in (1, 2, 4, 8, 16):
    level[0] = c
    for _ in range(1 + rounds):
        run_round(c)
    got = collections.Counter()
    for (cc, n, d), v in seen.items():
        if cc == c:
            got[d] += len(v)
    print(f"c={c}: windows by draft {dict(got)}", flush=True)
print("\n".join(log[:60]) + (f"\n... {len(log)} in all" if len(log) > 60 else ""))
print("at c = 16, n >= 13: draft, windows, measured ms/step (median), priced ms/step (median), measured / priced")
for d in sorted({d for (c, n, d) in seen if c == 16}):
    v = [x for (c, n, dd), xs in seen.items() if c == 16 and n >= 13 and dd == d for x in xs]
    if v:
        m, pz = statistics.median(x[0] for x in v), statistics.median(x[1] for x in v)
        print(f"  {d:9s} {len(v):5d} {1e3 * m:7.2f} {1e3 * pz:7.2f} {m / pz:6.3f}")
print(f"drift {table.drift:.3f}, probe factor {table.probe_factor:.3f}, overhead {dict((k, round(1e3 * v, 3)) for k, v in table.overhead.items())}")
for key in sorted(startup, key=lambda k: (k[0], k[1].tree, k[1].size, k[2:] )):
    if key[0] == 16 and key[1].size in (1, 4, 8):
        print(f"  entry {key[0]} {key[1]} {key[2:]}: startup {1e3 * startup[key]:.2f} ms, now {1e3 * table.seconds[key]:.2f}")
