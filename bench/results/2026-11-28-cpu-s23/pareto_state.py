"""Twenty-third session (pareto_ab.py with each auto's budget state after every level, and its AR choices by batch
size and cause): the server Pareto's path in one process, A/B. One long-lived scheduler per mode (its own
engine, as a server keeps): AR, chain:8, auto priced at its mean curve (optimism 0: the code before) and auto priced
optimistically (the default), 16 eagle_gsm8k prompts x 64 tokens, continuous arrivals, DELAY seconds of busy host work
after each scheduler step (the server's own work per window on the same cores). As the server bench: a warm-up round at
the highest level, then ROUNDS rounds per level in LEVELS order, modes rotated per round. Prints per level each mode's
tok/s over AR's and auto's AR steps.
`PYTHONPATH=. python bench/results/2026-11-28-cpu-s23/pareto_ab.py [LEVELS=1,2,4,8,16] [ROUNDS=2] [DELAY=0.001]`"""
import json, sys, time, collections, torch
from dflash_trt import SamplingParams
from dflash_trt.bench.datasets import encode_prompt
from dflash_trt.engines.torch_engine import TorchEngine
torch.set_num_threads(1)
fx = 'tests/fixtures/gsm8k-tiny/'
levels = [int(x) for x in (sys.argv[1] if len(sys.argv) > 1 else '1,2,4,8,16').split(',')]
rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 2
DELAY = float(sys.argv[3]) if len(sys.argv) > 3 else 0.001
turns = [json.loads(l)["turns"][0] for l in open('data/prompts/eagle_gsm8k.jsonl')][:16]
modes = ['ar', 'c8', 'auto0', 'auto']
eng = {m: TorchEngine.from_pretrained(fx + 'target', fx + 'drafter', device='cpu', max_batch_size=16, max_seq_len=512)
       for m in modes}
prompts = [encode_prompt(eng['ar'].tokenizer, t, 512 - 64)[0] for t in turns]
p = SamplingParams(max_new_tokens=64)
sch = {'ar': eng['ar'].new_scheduler(use_drafter=False), 'c8': eng['c8'].new_scheduler(draft='chain:8'),
       'auto0': eng['auto0'].new_scheduler(draft='auto'), 'auto': eng['auto'].new_scheduler(draft='auto')}
sch['auto0'].budget.optimism = 0.0
ids = collections.Counter()
ar_steps = collections.Counter()


def run_round(m, c):
    s = sch[m]; todo = list(range(len(prompts))); live = set(); toks = 0; t = time.perf_counter()
    while todo or live:
        while todo and len(live) < c:
            i = todo.pop(0); rid = f"{m}-{ids[m]}"; ids[m] += 1; s.add(rid, prompts[i], p); live.add(rid)
        evs = s.step()
        t1 = time.perf_counter()
        while time.perf_counter() - t1 < DELAY:
            pass
        for ev in evs:
            toks += len(ev.token_ids)
            if ev.finished:
                assert ev.finish_reason != "error", ev.result.error
                live.discard(ev.index)
                if c in levels:
                    ar_steps[(m, c)] += ev.result.stats.draft_steps.get('chain:1', 0)
    return toks, time.perf_counter() - t


from dflash_trt.spec import budget as B
import numpy as np
why = collections.Counter()
oc = B.AutoBudget._choose
def ch(self, ids, left=None, length=None):
    d = oc(self, ids, left, length)
    if d.size == 1 and not (left is not None and max(left) <= 1) and self._probing is None:
        pair = (0, self.block_size)
        row = dict(zip(self.drafts, self._rows_expected([pair])[pair]))
        g = self._calibrated(self._optimistic([pair], row), 1)
        costs = dict(zip(self.drafts, self.cost.costs(len(ids), self.drafts, length)))
        r = {x: len(ids) * g[x] / costs[x] for x in self.drafts}
        glob = max(r, key=r.get)
        why[(self.tag, cur[0], len(ids), 'global' if glob.size == 1 else 'request')] += 1
    return d
B.AutoBudget._choose = ch
cur = [0]
sch['auto0'].budget.tag, sch['auto'].budget.tag = 'auto0', 'auto'
def state(m):
    e, b = eng[m], sch[m].budget
    c = e.draft_curve; ct = e.cost_table
    return (f"{m}: curve {c.trials[0]:.0f} p1 {c.accepted[0] / max(c.trials[0], 1):.2f} cal {e.draft_calibration.factor(B.Draft('chain', 8)):.3f}"
            f"/{e.draft_calibration.factor(B.Draft('tree', 16)):.3f} interval {b._probe_interval} drift {ct.drift:.2f} pf {ct.probe_factor:.2f}"
            f" overhead {ct.overhead.get(4, 0) * 1e3:.2f}ms@4 switch {({str(k): round(v, 2) for k, v in ct.switch.items()})}"
            f" opt c8 {b._optimism()[B.Draft('chain', 8)]:.3f}")
cur[0] = 'warm'
for m in modes:
    run_round(m, max(levels))
print('after warm:', state('auto0'), '|', state('auto'))
ar_steps.clear()
res = collections.defaultdict(lambda: [0, 0.0])
for r in range(rounds):
    for c in levels:
        for m in (modes[r % 4:] + modes[:r % 4]):
            cur[0] = str(c)
            k, t = run_round(m, c); res[(m, c)][0] += k; res[(m, c)][1] += t
        print(f'after c{c} r{r}:', state('auto0'), '|', state('auto'), flush=True)
        print('   AR choices by cause:', {k: v for k, v in sorted(why.items()) if k[1] == str(c)}, flush=True)
rate = {k: v[0] / v[1] for k, v in res.items()}
print(f"delay {DELAY}: " + ' | '.join(
    f"c{c} AR {rate[('ar', c)]:.0f} c8 {rate[('c8', c)] / rate[('ar', c)]:.3f} auto0 {rate[('auto0', c)] / rate[('ar', c)]:.3f}"
    f" ({ar_steps[('auto0', c)]} AR) auto {rate[('auto', c)] / rate[('ar', c)]:.3f} ({ar_steps[('auto', c)]} AR)"
    for c in levels), flush=True)
