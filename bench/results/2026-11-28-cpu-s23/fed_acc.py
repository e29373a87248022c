"""Twenty-third session: does a drafting window whose drafter was not fed (fewer than TAP_LEAD drafted steps since the
last plain AR window, AutoBudget._fed; or a probe) accept less? One long-lived auto scheduler through the server
Pareto's path in one process (warm-up at 16, then rounds at LEVELS; 16 eagle_gsm8k prompts x 64 tokens, continuous
arrivals, 1 ms of busy host work per step). Every drafted window's steps are binned by (probe or not, fed or not) and
batch size: p1 (share of steps with τ >= 2) and mean min(τ, 4). Those steps all count in the drafter's curve.
`PYTHONPATH=. python bench/results/2026-11-28-cpu-s23/fed_acc.py [LEVELS=1,2,4]`"""
import json, sys, time, collections, torch
from dflash_trt import SamplingParams
from dflash_trt.bench.datasets import encode_prompt
from dflash_trt.engines.torch_engine import TorchEngine
from dflash_trt.spec import budget as B
torch.set_num_threads(1)
fx = 'tests/fixtures/gsm8k-tiny/'
levels = [int(x) for x in (sys.argv[1] if len(sys.argv) > 1 else '1,2,4').split(',')]
turns = [json.loads(l)["turns"][0] for l in open('data/prompts/eagle_gsm8k.jsonl')][:16]
e = TorchEngine.from_pretrained(fx + 'target', fx + 'drafter', device='cpu', max_batch_size=16, max_seq_len=512)
prompts = [encode_prompt(e.tokenizer, t, 512 - 64)[0] for t in turns]
p = SamplingParams(max_new_tokens=64)
s = e.new_scheduler(draft='auto')
bins = collections.defaultdict(list)
cur = ['warm']
ow = B.AutoBudget.observe_window


def obs(self, requests, draft, taus, chain_equivalent=(), finished=()):
    if draft.size > 1:
        kind = ('probe' if self._probing is not None or (self._chosen and False) else 'merit',
                'fed' if self._fed >= B.TAP_LEAD else 'unfed')
        for t, done in zip(taus, finished or [False] * len(taus)):
            if not done:
                bins[(cur[0], kind)].extend(t)
    return ow(self, requests, draft, taus, chain_equivalent, finished)


B.AutoBudget.observe_window = obs
ids = [0]


def run_round(c):
    todo = list(range(len(prompts))); live = set()
    while todo or live:
        while todo and len(live) < c:
            i = todo.pop(0); rid = ids[0]; ids[0] += 1; s.add(rid, prompts[i], p); live.add(rid)
        evs = s.step()
        t1 = time.perf_counter()
        while time.perf_counter() - t1 < 0.001:
            pass
        for ev in evs:
            if ev.finished:
                live.discard(ev.index)


run_round(16)
for r in range(2):
    for c in levels:
        cur[0] = f'c{c}'
        run_round(c)
for k, v in sorted(bins.items()):
    n = len(v)
    print(k, f"steps {n} p1 {sum(t >= 2 for t in v) / n:.3f} min(tau,4) {sum(min(t, 4) for t in v) / n:.2f}")
