"""`winhost.py PROMPTS BATCH MODES`: generate() per batch as the bench runs it, the modes alternating batch by batch;
per window, its time (read to read) by (mode, n, draft, feeds), split into the model's (launch: on a CPU the model runs
there) and the host's (the rest: the scheduler, the budget, the events)."""
import sys, time, statistics, collections, torch
from dflash_trt import SamplingParams
from dflash_trt.bench.datasets import encode_prompt, load_prompt_set
from dflash_trt.engines.torch_engine import TorchEngine
torch.set_num_threads(1)
fx = 'tests/fixtures/gsm8k-tiny/'
nprompts = int(sys.argv[1]) if len(sys.argv) > 1 else 40
bs = int(sys.argv[2]) if len(sys.argv) > 2 else 8
modes = sys.argv[3].split(',') if len(sys.argv) > 3 else ['ar', 'auto']
e = TorchEngine.from_pretrained(fx + 'target', fx + 'drafter', device='cpu', max_batch_size=8, max_seq_len=512)
prompts = [encode_prompt(e.tokenizer, t, 512 - 128)[0] for t in load_prompt_set('data/prompts/eagle_gsm8k.jsonl', nprompts).turns]
batches = [prompts[i:i + bs] for i in range(0, len(prompts), bs)]
p = SamplingParams(max_new_tokens=128)
runner = e.step_runner
launch, read = runner.launch, runner.read
cur = {}
rec = collections.defaultdict(list)
last = [None]
def l(slots, k, feeds, *a, **kw):
    cur['key'] = (len(slots), ('tree' if kw.get('tree') else 'chain') + f":{k}", feeds)
    t = time.perf_counter()
    try: return launch(slots, k, feeds, *a, **kw)
    finally: cur['model'] = time.perf_counter() - t
def r(launched, *a, **kw):
    out = read(launched, *a, **kw); t = time.perf_counter()
    if last[0] is not None and 'mode' in cur:
        rec[(cur['mode'],) + cur['key']].append(t - last[0]); rec[('host',cur['mode'],) + cur['key']].append(t - last[0] - cur['model']); rec[('model',cur['mode'],) + cur['key']].append(cur['model'])
    last[0] = t
    return out
runner.launch, runner.read = l, r
mode_args = {m: dict(use_drafter=False) if m == 'ar' else dict(draft=m) for m in modes}
cur['mode'] = 'warm'
for m in mode_args: e.generate(batches[0], p, **mode_args[m])
tot = collections.Counter()
for rnd in range(2):
    for b in batches:
        for m in (modes if rnd % 2 == 0 else modes[::-1]):
            cur['mode'] = m; last[0] = None
            t = time.perf_counter(); res = e.generate(b, p, **mode_args[m]); tot[m] += time.perf_counter() - t
            tot[m + '_tok'] += sum(len(x.token_ids) for x in res)
print({m: round(tot[m + '_tok'] / tot[m], 1) for m in modes})
for k in sorted(rec):
    v = rec[k]
    if len(v) >= 5: print(k, len(v), f"median {statistics.median(v)*1e3:.3f} mean {statistics.mean(v)*1e3:.3f}")
