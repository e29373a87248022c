"""Twenty-sixth session: the standard bench's batch-8 auto (static batches of 8 of 40 eagle_gsm8k prompts x 128
tokens, a fresh engine: its curve cold), alone, printing after each batch what auto learnt (the curve's steps and
depths 1-7, the chains' calibration factor, the probe factor) and its choices by batch size.
`PYTHONPATH=. python bench/results/2026-11-28-cpu-s26/static_b8.py`"""
import collections, json, torch
from dflash_trt import SamplingParams
from dflash_trt.bench.datasets import encode_prompt
from dflash_trt.engines.torch_engine import TorchEngine
import dflash_trt.spec.budget as bm

torch.set_num_threads(1)
fx = 'tests/fixtures/gsm8k-tiny/'
turns = [json.loads(l)["turns"][0] for l in open('data/prompts/eagle_gsm8k.jsonl')][:40]
eng = TorchEngine.from_pretrained(fx + 'target', fx + 'drafter', device='cpu', max_batch_size=8, max_seq_len=512)
prompts = [encode_prompt(eng.tokenizer, t, 512 - 64)[0] for t in turns]
p = SamplingParams(max_new_tokens=128)
chosen = collections.Counter()
_choose = bm.AutoBudget.choose


kinds = {}  # (requests, draft) -> the window's kind, as chosen
depth = collections.defaultdict(lambda: bm.AcceptanceCounts.empty(15))  # kind -> its windows' chain steps


def counted(self, requests, *a, **kw):
    d = _choose(self, requests, *a, **kw)
    chosen[(len(requests), str(d), self._probing is not None)] += 1
    kinds[(tuple(requests), d)] = (f"{d} {'probe' if self._probing is not None else 'merit'} "
                                   f"{'fed' if self._fed >= bm.TAP_LEAD else 'unfed'} n{'<=3' if len(requests) <= 3 else '>3'}")
    return d


_observe_window = bm.AutoBudget.observe_window


def observed(self, requests, draft, taus, chain_equivalent=(), finished=()):
    kind = kinds.pop((tuple(requests), draft), None)
    if kind is not None and draft.size > 1 and not draft.tree:
        ks, ts = [], []
        for r_taus, done in zip(taus, finished or [False] * len(taus)):
            for i, t in enumerate(r_taus):
                ks.append(bm._as_emitted(draft.size, t) if done and i == len(r_taus) - 1 else draft.size); ts.append(t)
        depth[kind].add(ks, ts)
    return _observe_window(self, requests, draft, taus, chain_equivalent, finished)


bm.AutoBudget.choose = counted
bm.AutoBudget.observe_window = observed
for b in range(5):
    s = eng.new_scheduler(draft='auto')  # (a scheduler per batch, the engine's curve shared, as generate() per batch)
    for i in range(8):
        s.add(f"b{b}-{i}", prompts[8 * b + i], p)
    while s.has_work:
        s.step()
    bud = s.budget
    print(f"batch {b}: curve steps {bud.curve.steps():.0f} per-depth {[round(float(x), 2) for x in bud.acceptance()[:7]]}"
          f", calibration chain:8 {bud.calibration.factor(bm.Draft('chain', 8)):.3f}, probe factor "
          f"{bud.cost.probe_factor:.2f}, drift {bud.cost.drift:.2f}", flush=True)
by_n = collections.defaultdict(dict)
for (n, d, probe), c in sorted(chosen.items()):
    by_n[n][d + (' probe' if probe else '')] = c
for n in sorted(by_n):
    print(f"  n={n}: {by_n[n]}")
for kind, c in sorted(depth.items()):
    acc = c.accepted / c.trials.clip(min=1)
    print(f"  {kind:32s} steps {c.steps():4.0f} per-depth {[round(float(x), 2) for x in acc[:7]]} "
          f"trials {c.trials[:7].astype(int).tolist()}")
