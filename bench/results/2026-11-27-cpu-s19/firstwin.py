"""Per generate() at batch 1, the CPU host loop: what happens between the call and its first window's launch (new
scheduler, add, the prefill's defers_context, the prefill, the first choose), auto vs chain:8, median us over 15 prompts."""
import time, statistics, collections, torch, sys
from dflash_trt import SamplingParams
from dflash_trt.bench.datasets import encode_prompt, load_prompt_set
from dflash_trt.engines.torch_engine import TorchEngine
from dflash_trt.engines import scheduler as S
from dflash_trt.spec import budget as B
torch.set_num_threads(1)
fx = 'tests/fixtures/gsm8k-tiny/'
e = TorchEngine.from_pretrained(fx + 'target', fx + 'drafter', device='cpu', max_batch_size=1, max_seq_len=512)
prompts = [encode_prompt(e.tokenizer, t, 512 - 128)[0] for t in load_prompt_set('data/prompts/eagle_gsm8k.jsonl', 16).turns]
marks = []
def mark(name, f):
    def g(*a, **k):
        marks.append((name + '>', time.perf_counter()))
        try: return f(*a, **k)
        finally: marks.append((name + '<', time.perf_counter()))
    return g
r = e.step_runner
r.prefill = mark('prefill', r.prefill); r.launch = mark('launch', r.launch)
e.new_scheduler = mark('new_scheduler', e.new_scheduler)
for n in ('choose', 'defers_context', 'prepare', 'observe_time', 'hold'):
    setattr(B.AutoBudget, n, mark(n, getattr(B.AutoBudget, n)))
for n in ('add', '_prefill', '_vet'):
    setattr(S.BatchScheduler, n, mark(n, getattr(S.BatchScheduler, n)))
p = SamplingParams(max_new_tokens=128)
for m in ('auto', 'chain:8'): e.generate([prompts[0]], p, draft=m)
acc = collections.defaultdict(lambda: collections.defaultdict(list))
for x in prompts[1:]:
    for m in ('auto', 'chain:8'):
        marks.clear(); t0 = time.perf_counter()
        e.generate([x], p, draft=m)
        first = next(t for n, t in marks if n == 'launch>')
        seg = [(n, t - t0) for n, t in marks if t <= first]
        d = acc[m]
        d['total_to_launch'].append(first - t0)
        opens = {}
        for n, t in marks:
            if t > first: break
            if n.endswith('>'): opens[n[:-1]] = t
            else: d[n[:-1]].append(t - opens.pop(n[:-1]))
for m, d in acc.items():
    print(m, {k: round(statistics.median(v) * 1e6) for k, v in d.items()})
