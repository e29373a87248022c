"""Twenty-fourth session: c16_windows.py with ONE engine for both modes (an AR scheduler, use_drafter=False, and an auto
one, alternating by round on the same engine and caches): two engines in one process differed by up to 10 % in the same
plain AR window's time. Where does a long-lived auto scheduler held at AR at concurrency 16 spend more than an AR one?
As c16_calls.py (s23): 16 eagle_gsm8k prompts x 64 tokens, a warm-up round, then
ROUNDS rounds alternating, DELAY s of busy host work per step. Each window is timed (launch to read) and classed:
plain AR, fed AR (by batch size), probe, tree measurement, drafting on merit; prints count, seconds, ms per window,
tokens emitted and their rate.
`[OPT=x] [SHARE=s] PYTHONPATH=. python bench/results/2026-11-28-cpu-s24/c16_one.py [ROUNDS=3] [DELAY=0.001] [C=16]`"""
import json, os, sys, time, collections, torch
from dflash_trt import SamplingParams
from dflash_trt.bench.datasets import encode_prompt
from dflash_trt.engines.torch_engine import TorchEngine
torch.set_num_threads(1)
fx = 'tests/fixtures/gsm8k-tiny/'
rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 3
DELAY = float(sys.argv[2]) if len(sys.argv) > 2 else 0.001
C = int(sys.argv[3]) if len(sys.argv) > 3 else 16
turns = [json.loads(l)["turns"][0] for l in open('data/prompts/eagle_gsm8k.jsonl')][:16]
modes = ['ar', 'auto']
one = TorchEngine.from_pretrained(fx + 'target', fx + 'drafter', device='cpu', max_batch_size=16, max_seq_len=512)
eng = {m: one for m in modes}
prompts = [encode_prompt(eng['ar'].tokenizer, t, 512 - 64)[0] for t in turns]
p = SamplingParams(max_new_tokens=64)
sch = {'ar': eng['ar'].new_scheduler(use_drafter=False), 'auto': eng['auto'].new_scheduler(draft='auto')}
if os.environ.get('OPT') is not None:
    sch['auto'].budget.optimism = float(os.environ['OPT'])
if os.environ.get('SHARE'):
    sch['auto'].budget.explore_share = float(os.environ['SHARE'])
stats = collections.defaultdict(lambda: [0, 0.0, 0])  # (mode, class) -> [windows, seconds, tokens]
on = [False]
probes = []  # [draft, n, priced ms, expected tokens, best rate, priced regret ms, (seconds, tokens)]
current = ['ar']  # the mode whose round runs
for m in modes[:1]:  # (one runner: wrapped once; the mode running is current[0])
    runner = sch[m].runner
    launch, read = runner.launch, runner.read
    pending = {}

    def timed_launch(slots, k, feeds, *a, _launch=launch, _p=pending, **kw):
        _m, _b = current[0], sch[current[0]].budget
        t = time.perf_counter()
        probing = getattr(_b, '_probing', None)
        if k == 1:
            cls = f"fed AR n={len(slots)}" if feeds else "plain AR"
        elif probing is not None:
            cls = f"probe {probing} n={len(slots)}"
        else:
            cls = f"draft k={k}{' tree' if kw.get('tree') else ''} n={len(slots)}"
        h = _launch(slots, k, feeds, *a, **kw)
        _p[id(h)] = (cls, t)
        if probing is not None and k > 1 and on[0]:  # what the probe was priced at (AutoBudget._choose)
            from dflash_trt.spec.budget import _regret
            pr = _b._pricing[2]
            regret = (_b._explore_regret(pr, probing, len(slots)) if hasattr(_b, '_explore_regret')  # (s24)
                      else _regret(pr, probing, _b.cost.probe_factor))
            probes.append([str(probing), len(slots), 1e3 * pr[1][probing] * _b.cost.probe_factor, pr[0][probing],
                           pr[3][pr[4]], 1e3 * regret, id(h)])
        return h

    def timed_read(h, *a, _read=read, _p=pending, **kw):
        _m = current[0]
        out = _read(h, *a, **kw)
        cls, t = _p.pop(id(h))
        for pb in probes:
            if pb[-1] == id(h):
                pb[-1] = (time.perf_counter() - t, sum(sum(t_) for t_ in out.taus))
        if on[0]:
            s = stats[(_m, cls)]; s[0] += 1; s[1] += time.perf_counter() - t; s[2] += sum(sum(t_) for t_ in out.taus)
        return out
    runner.launch, runner.read = timed_launch, timed_read


table = sch['auto'].budget.cost
seen_probes = []  # what observe_probe was given: n, draft, seconds per step, price, drift, AR windows' speed at n
_observe_probe = table.observe_probe


def observe_probe(n, k, seconds, length=None):
    if on[0]:
        seen_probes.append((n, str(k), seconds, table.cost(n, k, length), table.drift,
                            getattr(table, 'ar_speed', {}).get(n)))
    return _observe_probe(n, k, seconds, length)


table.observe_probe = observe_probe


def run_round(m):
    current[0] = m
    s = sch[m]; s.engine.cache_owner = s  # (handed back between rounds: every slot is free then)
    todo = list(range(len(prompts))); live = set(); toks = 0; t = time.perf_counter(); n = [0]
    while todo or live:
        while todo and len(live) < C:
            i = todo.pop(0); rid = f"{m}-{n[0]}-{time.perf_counter()}"; n[0] += 1; s.add(rid, prompts[i], p); live.add(rid)
        evs = s.step()
        t1 = time.perf_counter()
        while time.perf_counter() - t1 < DELAY:
            pass
        for ev in evs:
            toks += len(ev.token_ids)
            if ev.finished:
                live.discard(ev.index)
    return toks, time.perf_counter() - t


for m in modes:
    run_round(m)
on[0] = True
for m in modes:
    sch[m].prefill_s = sch[m].decode_s = 0.0
res = collections.defaultdict(lambda: [0, 0.0])
for r in range(rounds):
    for m in (modes if r % 2 == 0 else modes[::-1]):
        k, t = run_round(m); res[m][0] += k; res[m][1] += t
ar_rate = res['ar'][0] / res['ar'][1]
for m in modes:
    print(f"optimism {sch['auto'].budget.optimism} share {sch['auto'].budget.explore_share} delay {DELAY} c{C} {m}: "
          f"{res[m][0] / res[m][1]:.0f} tok/s ({res[m][0] / res[m][1] / ar_rate:.3f}x AR), "
          f"prefill {sch[m].prefill_s:.2f} s, decode {sch[m].decode_s:.2f} s", flush=True)
    for (mm, cls), (w, sec, tok) in sorted(stats.items(), key=lambda kv: -kv[1][1]):
        if mm == m:
            print(f"    {cls:28s} {w:4d} windows {sec:6.3f} s {1000 * sec / w:6.2f} ms/window {tok:5d} tokens "
                  f"{tok / sec:6.0f} tok/s")
ar_window = stats[('ar', 'plain AR')]
ar_tok_s = ar_window[2] / ar_window[1]
for d, n, ms, e, rate, regret, (sec, tok) in probes:
    print(f"  probe {d} n={n}: priced {ms:.1f} ms, {e:.1f} tokens at best {rate:.0f} tok/s: regret {regret:.1f} ms; "
          f"ran {1e3 * sec:.1f} ms, {tok} tokens: regret at the AR engine's rate {1e3 * (sec - tok / ar_tok_s):.1f} ms")
b = sch['auto'].budget
print(f"  probe factor {b.cost.probe_factor:.3f}, probe yield {getattr(b.calibration, 'probe', float('nan')):.3f}, "
      f"drift {b.cost.drift:.3f}")
lost = sum(sec - tok / ar_tok_s for *_, (sec, tok) in probes)
print(f"  SUMMARY auto/AR {res['auto'][0] / res['auto'][1] / ar_rate:.3f}, probes {len(probes)}, their loss at the AR "
      f"engine's rate {1e3 * lost:.0f} ms = {100 * lost / sch['auto'].decode_s:.1f} % of auto's decode")
for n, k, sec, price, drift, speed in seen_probes:
    print(f"  observe_probe n={n} {k}: {1e3 * sec:.1f} ms a step (window + host), price {1e3 * price:.1f} ms, "
          f"drift {drift:.2f}, AR speed at n {speed if speed is None else round(speed, 2)}: "
          f"x{sec / price / drift:.2f} the drift, x{sec / price / (speed or drift):.2f} the AR speed")
