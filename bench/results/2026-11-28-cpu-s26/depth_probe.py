"""Twenty-sixth session: per-depth acceptance the engine's windows see, by draft (the engine's steps, not traces).
auto's learnt curve reads depth 4 at 0.40-0.69 in every cold_c8 run (s25 and s26, 10 of 10), its neighbours 0.6-0.87;
the traces read 0.78 there. Fixed drafts and auto, 40 eagle_gsm8k prompts x TOKENS at concurrency C, continuous.
`[DEFER=1] [TOKENS=128] PYTHONPATH=. python bench/results/2026-11-28-cpu-s26/depth_probe.py MODE [C=8]`"""
import collections, json, os, sys, torch
import numpy as np
from dflash_trt import SamplingParams
from dflash_trt.bench.datasets import encode_prompt
from dflash_trt.engines.torch_engine import TorchEngine
import dflash_trt.spec.budget as bm

torch.set_num_threads(1)
MODE = sys.argv[1]
C = int(sys.argv[2]) if len(sys.argv) > 2 else 8
fx = 'tests/fixtures/gsm8k-tiny/'
turns = [json.loads(l)["turns"][0] for l in open('data/prompts/eagle_gsm8k.jsonl')][:40]
eng = TorchEngine.from_pretrained(fx + 'target', fx + 'drafter', device='cpu', max_batch_size=C, max_seq_len=512)
prompts = [encode_prompt(eng.tokenizer, t, 512 - 64)[0] for t in turns]
TOKENS = int(os.environ.get('TOKENS', '128'))
p = SamplingParams(max_new_tokens=TOKENS)
by_draft = collections.defaultdict(lambda: bm.AcceptanceCounts.empty(15))
windows = collections.Counter()


emitted = collections.Counter()  # request -> tokens emitted before its next step (the prefill's first one: 1)
by_position = collections.defaultdict(lambda: bm.AcceptanceCounts.empty(15))  # (draft, where in the answer) -> steps


def where(e: int) -> str:
    return "first step" if e <= 1 else "2-15" if e < 16 else "16-63" if e < 64 else "64+"


def record(orig):
    def f(self, requests, draft, taus, chain_equivalent=(), finished=()):
        for r, r_taus, done in zip(requests, taus, finished or [False] * len(taus)):
            for i, t in enumerate(r_taus):
                e = emitted[r] or 1
                if draft.size > 1 and not draft.tree:
                    last = done and i == len(r_taus) - 1
                    k = bm._as_emitted(draft.size, t) if last else draft.size
                    by_draft[str(draft)].add([k], [t])
                    by_position[(str(draft), where(e))].add([k], [t])
                emitted[r] = e + t
        windows[str(draft)] += 1
        return orig(self, requests, draft, taus, chain_equivalent, finished)
    return f


bm.Fixed.observe_window = record(bm.Fixed.observe_window)
if os.environ.get('DEFER'):  # DEFER=1: every prompt left out of the drafter but for its last rows (as joining a batch
    bm.Fixed.defers_context = lambda self, n, length=None: True  # auto holds at AR does: spec/step.py prefill)
bm.AutoBudget.observe_window = record(bm.AutoBudget.observe_window)
s = eng.new_scheduler(draft=MODE)
todo = list(range(len(prompts))); live = set(); n = 0
while todo or live:
    while todo and len(live) < C:
        i = todo.pop(0); rid = f"r{n}"; n += 1; s.add(rid, prompts[i], p); live.add(rid)
    for ev in s.step():
        if ev.finished:
            live.discard(ev.index)
print(f"{MODE} c={C} tokens={TOKENS} DEFER={os.environ.get('DEFER', '')} windows {dict(windows)}")
for d, c in sorted(by_draft.items()):
    acc = c.accepted / np.maximum(c.trials, 1)
    print(f"  {d:9s} steps {c.steps():5.0f} per-depth {[round(float(x), 2) for x in acc[:8]]} trials {c.trials[:8].astype(int).tolist()}")
if MODE == 'auto':
    print(f"  auto's curve {[round(float(x), 2) for x in s.budget.acceptance()[:8]]} steps {s.budget.curve.steps():.0f}")
for (d, w), c in sorted(by_position.items(), key=lambda kv: (kv[0][0], ["first step", "2-15", "16-63", "64+"].index(kv[0][1]))):
    acc = c.accepted / c.trials.clip(min=1)
    print(f"  {d:9s} {w:10s} steps {c.steps():5.0f} per-depth {[round(float(x), 2) for x in acc[:8]]} "
          f"tau {bm.AutoBudget.expected_tokens(acc, 16):.2f}")
