"""Twenty-third session: at concurrency 16, where auto holds AR, what does a long-lived auto scheduler do more than an
AR one (use_drafter=False)? One engine each, 16 eagle_gsm8k prompts x 64 tokens, continuous arrivals, a warm-up round
then ROUNDS rounds alternating, DELAY seconds of busy host work after each scheduler step. Prints per mode: tok/s,
scheduler step() calls, windows launched (runner.launch), fed AR windows, prefill and decode seconds.
`[OPT=x] [SHARE=s] PYTHONPATH=. python bench/results/2026-11-28-cpu-s23/c16_calls.py [ROUNDS=3] [DELAY=0.001] [C=16]`"""
import json, sys, time, collections, torch
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
eng = {m: TorchEngine.from_pretrained(fx + 'target', fx + 'drafter', device='cpu', max_batch_size=16, max_seq_len=512)
       for m in modes}
prompts = [encode_prompt(eng['ar'].tokenizer, t, 512 - 64)[0] for t in turns]
p = SamplingParams(max_new_tokens=64)
sch = {'ar': eng['ar'].new_scheduler(use_drafter=False), 'auto': eng['auto'].new_scheduler(draft='auto')}
import os
if os.environ.get('OPT') is not None:  # auto's optimism (OPT=0: without it)
    sch['auto'].budget.optimism = float(os.environ['OPT'])
if os.environ.get('SHARE'):  # auto's explore_share (SHARE=1e-6: no probe, no tree measurement, no feed before one)
    sch['auto'].budget.explore_share = float(os.environ['SHARE'])
count = collections.Counter()
for m in modes:
    launch = sch[m].runner.launch

    def counted(slots, k, feeds, *a, _m=m, _launch=launch, **kw):
        count[(_m, 'windows')] += 1
        count[(_m, 'fed AR windows')] += int(k == 1 and bool(feeds))
        return _launch(slots, k, feeds, *a, **kw)
    sch[m].runner.launch = counted
ids = collections.Counter()


def run_round(m):
    s = sch[m]; todo = list(range(len(prompts))); live = set(); toks = 0; t = time.perf_counter()
    while todo or live:
        while todo and len(live) < C:
            i = todo.pop(0); rid = f"{m}-{ids[m]}"; ids[m] += 1; s.add(rid, prompts[i], p); live.add(rid)
        evs = s.step(); count[(m, 'step calls')] += 1
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
count.clear()
for m in modes:
    sch[m].prefill_s = sch[m].decode_s = 0.0
res = collections.defaultdict(lambda: [0, 0.0])
for r in range(rounds):
    for m in (modes if r % 2 == 0 else modes[::-1]):
        k, t = run_round(m); res[m][0] += k; res[m][1] += t
for m in modes:
    print(f"optimism {sch['auto'].budget.optimism} share {sch['auto'].budget.explore_share} delay {DELAY} c{C} {m}: {res[m][0] / res[m][1]:.0f} tok/s ({res[m][0] / res[m][1] / (res['ar'][0] / res['ar'][1]):.3f}x AR), "
          + ", ".join(f"{k[1]} {v}" for k, v in count.items() if k[0] == m)
          + f", prefill {sch[m].prefill_s:.2f} s, decode {sch[m].decode_s:.2f} s", flush=True)
