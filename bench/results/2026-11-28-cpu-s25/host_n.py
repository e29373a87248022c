"""Twenty-fifth session: s24's c16_host.py at any concurrency: the auto scheduler's host time per budget method and
its step() time outside the windows against an AR scheduler's on the same engine, alternating by round (16 eagle_gsm8k
prompts x 64 tokens, CONC at a time, continuous). WEAK=s: the drafter's weights get Gaussian noise of s times each
tensor's std (seeded), a weaker drafter. `PYTHONPATH=. python bench/results/2026-11-28-cpu-s25/host_n.py ROUNDS CONC`"""
import os
import json, sys, time, collections, functools, torch
from dflash_trt import SamplingParams
from dflash_trt.bench.datasets import encode_prompt
from dflash_trt.engines.torch_engine import TorchEngine
torch.set_num_threads(1)
fx = 'tests/fixtures/gsm8k-tiny/'
rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 5
conc = int(sys.argv[2]) if len(sys.argv) > 2 else 16
turns = [json.loads(l)["turns"][0] for l in open('data/prompts/eagle_gsm8k.jsonl')][:16]
eng = TorchEngine.from_pretrained(fx + 'target', fx + 'drafter', device='cpu', max_batch_size=16, max_seq_len=512)
if float(os.environ.get('WEAK', '0')):
    g = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for name, w in eng.drafter.named_parameters():
            if w.dim() > 1:
                w.add_(torch.randn(w.shape, generator=g) * w.std() * float(os.environ['WEAK']))
prompts = [encode_prompt(eng.tokenizer, t, 512 - 64)[0] for t in turns]
p = SamplingParams(max_new_tokens=64)
sch = {'ar': eng.new_scheduler(use_drafter=False), 'auto': eng.new_scheduler(draft='auto')}
for extra in [m for m in os.environ.get('MODES', '').split(',') if m]:  # fixed drafts beside them (MODES=tree:16,...)
    sch[extra] = eng.new_scheduler(draft=extra)
on = [False]
chosen = collections.Counter()
spent = collections.defaultdict(lambda: [0, 0.0])
b = sch['auto'].budget
for name in ['choose', 'choose_ahead', 'observe_window', 'observe_time', 'needs_context', 'hold', 'held', 'prepare',
             'defers_context', 'forget']:
    f = getattr(b, name)

    @functools.wraps(f)
    def timed(*a, _f=f, _n=name, **kw):
        t = time.perf_counter()
        try:
            out = _f(*a, **kw)
            if on[0] and _n == 'choose':
                chosen[str(out)] += 1
            return out
        finally:
            if on[0]:
                s = spent[_n]; s[0] += 1; s[1] += time.perf_counter() - t
    setattr(b, name, timed)
runner = eng.step_runner
launch, read = runner.launch, runner.read
model = collections.Counter()
windows = collections.Counter()
mark = {}


def tl(*a, **kw):
    mark['t'] = time.perf_counter()
    return launch(*a, **kw)


def tr(h, *a, **kw):
    out = read(h, *a, **kw)
    if on[0]:
        model[cur[0]] += time.perf_counter() - mark['t']; windows[cur[0]] += 1
    return out


runner.launch, runner.read = tl, tr
cur = ['ar']
steps_s = collections.Counter()


def run_round(m):
    cur[0] = m
    s = sch[m]; s.engine.cache_owner = s  # (handed back between rounds: every slot is free then)
    todo = list(range(16)); live = set(); i = 0
    while todo or live:
        while todo and len(live) < conc:
            j = todo.pop(0); rid = f"{m}-{time.perf_counter()}-{j}"; s.add(rid, prompts[j], p); live.add(rid)
        t = time.perf_counter()
        evs = s.step()
        if on[0]:
            steps_s[m] += time.perf_counter() - t
        for ev in evs:
            if ev.finished:
                live.discard(ev.index)


for m in sch:
    run_round(m)
on[0] = True
for r in range(rounds):
    for m in (list(sch) if r % 2 == 0 else list(sch)[::-1]):
        run_round(m)
for m in sch:
    print(f"{m}: step() {steps_s[m]:.3f} s, windows {windows[m]} launch-to-read {model[m]:.3f} s, "
          f"the rest (prefills, host) {steps_s[m] - model[m]:.3f} s; prefill_s {sch[m].prefill_s:.3f}")
w = windows['auto']
for name, (calls, sec) in sorted(spent.items(), key=lambda kv: -kv[1][1]):
    print(f"  budget.{name:15s} {calls:5d} calls {1e3 * sec:8.2f} ms  {1e6 * sec / w:7.1f} us per window")
for m in sch:
    print(f"{m} / ar tok/s ratio (ar's step() time / {m}'s):", f"{steps_s['ar'] / steps_s[m]:.3f}")
print("auto's choose() results (a held draft runs more windows than it counts):", dict(chosen))
