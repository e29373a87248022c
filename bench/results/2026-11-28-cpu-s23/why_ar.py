"""Twenty-third session: why does auto hold AR at one request after a stretch at higher load? One long-lived auto
scheduler (as a server keeps), a warm-up round at concurrency FIRST (16 prompts x 64 tokens, continuous arrivals),
then ROUNDS rounds at concurrency 1. Every AR window at one request chosen on merit (not a request's last token), and
the windows held after it (hold/held), is attributed to the global estimate ('global': at the drafter's curve over
every request, calibrated, AR is the best choice too) or to the request's own ('request': at the global curve it would
draft). Prints per round: rate, AR windows by cause, the curve's steps and p1..4, calibration, probe interval.
`[PRIOR=1] [OPT=pseudo-steps] [MAXB=backoff] PYTHONPATH=. python bench/results/2026-11-28-cpu-s23/why_ar.py FIRST [ROUNDS]`"""
import json, os, sys, time, collections, torch
import numpy as np
from dflash_trt import SamplingParams
from dflash_trt.bench.datasets import encode_prompt
from dflash_trt.engines.torch_engine import TorchEngine
from dflash_trt.spec import budget as B
torch.set_num_threads(1)
if os.environ.get('OPT') is not None: B.OPTIMISM = float(os.environ['OPT'])
if os.environ.get('MAXB'): B.MAX_PROBE_BACKOFF = int(os.environ['MAXB'])
fx = 'tests/fixtures/gsm8k-tiny/'
turns = [json.loads(l)["turns"][0] for l in open('data/prompts/eagle_gsm8k.jsonl')][:16]
prior = json.load(open('out/engines/tiny-gsm8k-cpu/manifest.json'))['acceptance']['curve'] if os.environ.get('PRIOR') else None
e = TorchEngine.from_pretrained(fx + 'target', fx + 'drafter', device='cpu', max_batch_size=16, max_seq_len=512,
                                draft_prior=prior)
prompts = [encode_prompt(e.tokenizer, t, 512 - 64)[0] for t in turns]
p = SamplingParams(max_new_tokens=64)
s = e.new_scheduler(draft='auto')
cur = ['warm']
causes = collections.Counter()
ratios = collections.defaultdict(list)
last_cause = [None]
oc, oh = B.AutoBudget._choose, B.AutoBudget.held


def ch(self, ids, left=None, length=None):
    d = oc(self, ids, left, length)
    last_cause[0] = None
    if len(ids) == 1 and d.size == 1 and not (left is not None and max(left) <= 1) and self._probing is None:
        pair = (0, self.block_size)
        row = dict(zip(self.drafts, self._rows_expected([pair])[pair]))
        e_glob = self._calibrated(self._optimistic([pair], row), 1)  # (as defers_context prices it)
        costs = self.cost.costs(1, self.drafts, length)
        glob = B._argmax({x: e_glob[x] / c for x, c in zip(self.drafts, costs)})
        cause = 'global' if glob.size == 1 else 'request'
        rates = {x: e_glob[x] / c for x, c in zip(self.drafts, costs)}
        ratios[cur[0]].append(max(v for x, v in rates.items() if x.size > 1) / rates[B.Draft('chain', 1)])
        causes[(cur[0], cause)] += 1
        last_cause[0] = cause
    elif len(ids) == 1:
        causes[(cur[0], 'probe' if self._probing is not None else str(d) if d.size > 1 else 'last')] += 1
    return d


def hd(self, windows):
    if last_cause[0] is not None and windows > 0:
        causes[(cur[0], last_cause[0] + ' held')] += windows
    return oh(self, windows)


B.AutoBudget._choose, B.AutoBudget.held = ch, hd
ids = [0]


def run_round(c):
    todo = list(range(len(prompts))); live = set(); toks = 0; t = time.perf_counter()
    while todo or live:
        while todo and len(live) < c:
            i = todo.pop(0); rid = ids[0]; ids[0] += 1; s.add(rid, prompts[i], p); live.add(rid)
        for ev in s.step():
            toks += len(ev.token_ids)
            if ev.finished:
                live.discard(ev.index)
    return toks / (time.perf_counter() - t)


def state():
    c, b, cal = e.draft_curve, s.budget, e.draft_calibration
    return (f"curve steps {c.trials[0]:.0f} p1-4 {np.round(c.accepted[:4] / np.maximum(c.trials[:4], 1), 2).tolist()}"
            f" cal {cal.factor(B.Draft('chain', 8)):.3f} interval {b._probe_interval} probe factor "
            f"{e.cost_table.probe_factor:.2f}")


first = int(sys.argv[1]); rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 2
cur[0] = f'warm c{first}'; run_round(first)
print('OPTIMISM', B.OPTIMISM, 'MAX_PROBE_BACKOFF', B.MAX_PROBE_BACKOFF, 'prior', 'measured' if prior else 'default', '| after warm:', state())
for r in range(rounds):
    cur[0] = f'c1 r{r}'; rate = run_round(1)
    got = {k[1]: v for k, v in causes.items() if k[0] == cur[0]}
    q = np.percentile(ratios[cur[0]], [10, 50, 90]).round(3).tolist() if ratios[cur[0]] else []
    print(f"round {r}: {rate:.0f} tok/s {dict(sorted(got.items()))} | {state()} | global best-draft/AR rate at AR choices p10/50/90 {q}", flush=True)
