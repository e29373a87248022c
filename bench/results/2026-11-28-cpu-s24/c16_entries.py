"""Twenty-fourth session: does auto's startup cost table price chain:K at 16 requests as its windows cost in a run?
One engine; its startup table (as auto measures it); then a c = 16 round per fixed draft (chain:4,
chain:8, and AR without the drafter), each window timed (launch to read) against the table's entry at its batch size
and cache length. `PYTHONPATH=. python bench/results/2026-11-28-cpu-s24/c16_entries.py [DELAY=0.001]`"""
import json, sys, time, collections, torch
from dflash_trt import SamplingParams
from dflash_trt.bench.datasets import encode_prompt
from dflash_trt.engines.torch_engine import TorchEngine
from dflash_trt.spec.budget import Draft
torch.set_num_threads(1)
fx = 'tests/fixtures/gsm8k-tiny/'
DELAY = float(sys.argv[1]) if len(sys.argv) > 1 else 0.001
turns = [json.loads(l)["turns"][0] for l in open('data/prompts/eagle_gsm8k.jsonl')][:16]
eng = TorchEngine.from_pretrained(fx + 'target', fx + 'drafter', device='cpu', max_batch_size=16, max_seq_len=512)
prompts = [encode_prompt(eng.tokenizer, t, 512 - 64)[0] for t in turns]
p = SamplingParams(max_new_tokens=64)
table = eng.new_scheduler(draft='auto').budget.cost
stats = collections.defaultdict(lambda: [0, 0.0, 0.0, 0])  # (mode, n) -> windows, seconds, table seconds, tokens
runner = eng.step_runner
launch, read = runner.launch, runner.read
cur = {}


def timed_launch(slots, k, feeds, *a, **kw):
    t = time.perf_counter()
    length = max(int(runner.target_cache.lengths[s]) for s in slots)
    d = Draft('tree' if kw.get('tree') else 'chain', k)
    h = launch(slots, k, feeds, *a, **kw)
    cur[id(h)] = (t, len(slots), table.cost(len(slots), d, length))  # (AR without the drafter: AR's entry)
    return h


def timed_read(h, *a, **kw):
    out = read(h, *a, **kw)
    t, n, entry = cur.pop(id(h))
    s = stats[(mode, n if n in (15, 16) else 'other')]
    s[0] += 1; s[1] += time.perf_counter() - t; s[2] += entry or 0.0; s[3] += sum(sum(x) for x in out.taus)
    return out


runner.launch, runner.read = timed_launch, timed_read
for rnd in range(3):
    for mode in ['ar', 'chain:4', 'chain:8']:
        sch = eng.new_scheduler(use_drafter=False) if mode == 'ar' else eng.new_scheduler(draft=mode)
        todo = list(range(16)); live = set(); i = 0
        while todo or live:
            while todo and len(live) < 16:
                j = todo.pop(0); rid = f"{mode}-{rnd}-{j}"; sch.add(rid, prompts[j], p); live.add(rid)
            evs = sch.step()
            t1 = time.perf_counter()
            while time.perf_counter() - t1 < DELAY:
                pass
            for ev in evs:
                if ev.finished:
                    live.discard(ev.index)
        if rnd == 0:
            stats.clear()
for (mode, n), (w, sec, entry, tok) in sorted(stats.items(), key=str):
    print(f"{mode:8s} n={n}: {w:4d} windows {1e3 * sec / w:6.2f} ms/window, table {1e3 * entry / w:6.2f} ms "
          f"(ratio {sec / entry if entry else float('nan'):.2f}), {tok / sec:6.0f} tok/s")
print("drift", table.drift, "overhead", {n: round(v * 1e3, 3) for n, v in table.overhead.items()})
