"""Batch 1 (fixture pair, eagle_gsm8k, 128 tokens, 1 torch thread): where does auto's host time go? Every AutoBudget
method the scheduler calls is timed; auto and chain:8 / tree:16 alternate by prompt on one engine.
`PYTHONPATH=CODE:. python host_b1.py [PROMPTS=40]`"""
import collections, sys, time, torch
from dflash_trt import SamplingParams
from dflash_trt.bench.datasets import encode_prompt, load_prompt_set
from dflash_trt.engines.torch_engine import TorchEngine
from dflash_trt.spec import budget as bm
torch.set_num_threads(1)
fx = 'tests/fixtures/gsm8k-tiny/'
n = int(sys.argv[1]) if len(sys.argv) > 1 else 40
turns = load_prompt_set('data/prompts/eagle_gsm8k.jsonl', n).turns
eng = TorchEngine.from_pretrained(fx + 'target', fx + 'drafter', device='cpu', max_batch_size=1, max_seq_len=512)
prompts = [encode_prompt(eng.tokenizer, t, 512 - 128)[0] for t in turns]
p = SamplingParams(max_new_tokens=128)
calls = collections.defaultdict(lambda: [0, 0.0])
on = [False]
def wrap(name):
    f = getattr(bm.AutoBudget, name)
    def g(self, *a, **k):
        if not on[0]:
            return f(self, *a, **k)
        t = time.perf_counter(); r = f(self, *a, **k); calls[name][0] += 1; calls[name][1] += time.perf_counter() - t
        return r
    setattr(bm.AutoBudget, name, g)
for name in ['choose', 'hold', 'prepare', 'observe_window', 'observe_time', 'held', 'forget', 'defers_context',
             'needs_context', 'choose_ahead', 'commit_ahead']:
    if hasattr(bm.AutoBudget, name):
        wrap(name)
drafts = collections.Counter()
ch = bm.AutoBudget.choose
def counting(self, *a, **k):
    d = ch(self, *a, **k)
    if on[0]: drafts[str(d)] += 1
    return d
bm.AutoBudget.choose = counting
modes = {'auto': dict(draft='auto'), 'chain:8': dict(draft='chain:8'), 'tree:16': dict(draft='tree:16')}
for q in prompts[:2]:
    for m in modes: eng.generate([q], p, **modes[m])
tot = collections.Counter(); toks = collections.Counter()
for i, q in enumerate(prompts):
    order = list(modes) if i % 2 == 0 else list(modes)[::-1]
    for m in order:
        on[0] = m == 'auto'
        t = time.perf_counter(); r = eng.generate([q], p, **modes[m]); tot[m] += time.perf_counter() - t
        toks[m] += len(r[0].token_ids) if hasattr(r[0], 'token_ids') else 0
        on[0] = False
for m in modes: print(f"{m}: {tot[m]:.3f} s, {toks[m]} tokens, x auto {tot[m]/tot['auto']:.4f}")
host = sum(c[1] for c in calls.values())
print(f"auto's budget calls: {host*1e3:.1f} ms = {host/tot['auto']*100:.2f} % of auto's time")
for k, (c, s) in sorted(calls.items(), key=lambda x: -x[1][1]): print(f"  {k}: {c} calls, {s*1e3:.1f} ms, {s/c*1e6:.0f} us/call")
print("auto's choices (choose() calls):", dict(drafts))
