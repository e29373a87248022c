"""Twenty-third session: the server Pareto's path in one process, A/B. One long-lived scheduler per mode (its own
engine, as a server keeps): AR, chain:8, auto priced at its mean curve (optimism 0: the code before) and auto priced
optimistically (the default), 16 eagle_gsm8k prompts x 64 tokens, continuous arrivals, DELAY seconds of busy host work
after each scheduler step (the server's own work per window on the same cores). As the server bench: a warm-up round at
the highest level, then ROUNDS rounds per level in LEVELS order, modes rotated per round. Prints per level each mode's
tok/s over AR's and auto's AR steps.
`[OPT_B=x] PYTHONPATH=. python bench/results/2026-11-28-cpu-s23/pareto_ab.py [LEVELS=1,2,4,8,16] [ROUNDS=2] [DELAY=0.001]`"""
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
import os
if os.environ.get('OPT_B') is not None:  # the second auto's optimism (OPT_B=0: an A/A control)
    sch['auto'].budget.optimism = float(os.environ['OPT_B'])
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


for m in modes:
    run_round(m, max(levels))
ar_steps.clear()
res = collections.defaultdict(lambda: [0, 0.0])
for r in range(rounds):
    for c in levels:
        for m in (modes[r % 4:] + modes[:r % 4]):
            k, t = run_round(m, c); res[(m, c)][0] += k; res[(m, c)][1] += t
rate = {k: v[0] / v[1] for k, v in res.items()}
print(f"delay {DELAY} auto optimism {sch['auto'].budget.optimism}: " + ' | '.join(
    f"c{c} AR {rate[('ar', c)]:.0f} c8 {rate[('c8', c)] / rate[('ar', c)]:.3f} auto0 {rate[('auto0', c)] / rate[('ar', c)]:.3f}"
    f" ({ar_steps[('auto0', c)]} AR) auto {rate[('auto', c)] / rate[('ar', c)]:.3f} ({ar_steps[('auto', c)]} AR)"
    for c in levels), flush=True)
