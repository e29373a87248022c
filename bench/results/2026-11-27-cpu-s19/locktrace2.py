"""Batch 1, 40 prompts, generate() per prompt: fixed chain:8 and tree:16 runs give each prompt's true mean τ for both;
then auto runs (a fresh engine each) until one takes over with tree:16 (>= 100 windows; at most 4 tries), logging every
window's priced E for chain:8 / tree:16 (calibrated and raw), the calibration factors and what the window accepted.
Prints per 5 prompts: the fixed runs' τ of both and their ratio, auto's windows, its priced E ratio, and what its
windows of each draft accepted against what was priced for them. `locktrace2.py`"""
import collections, statistics as st, torch
from dflash_trt import SamplingParams
from dflash_trt.bench.datasets import encode_prompt, load_prompt_set
from dflash_trt.engines.torch_engine import TorchEngine
from dflash_trt.spec import budget as B
torch.set_num_threads(1)
fx = 'tests/fixtures/gsm8k-tiny/'
turns = load_prompt_set('data/prompts/eagle_gsm8k.jsonl', 41).turns
p = SamplingParams(max_new_tokens=128)
c8, t16 = B.Draft('chain', 8), B.Draft('tree', 16)


def engine():
    return TorchEngine.from_pretrained(fx + 'target', fx + 'drafter', device='cpu', max_batch_size=1, max_seq_len=512)


e = engine()
prompts = [encode_prompt(e.tokenizer, t, 512 - 128)[0] for t in turns]
fixed = {}
for d in ('chain:8', 'tree:16'):
    fixed[d] = [st.mean(e.generate([x], p, draft=d)[0].stats.taus) for x in prompts[1:]]
log, current = [], {}
oc, ow = B.AutoBudget._choose, B.AutoBudget.observe_window


def choose(self, requests, left, length):
    d = oc(self, requests, left, length)
    pr = self._pricing[2]
    current[requests[0]] = (d, pr[0][c8], pr[0][t16], pr[6][c8], pr[6][t16],
                            self.calibration.factor(c8), self.calibration.factor(t16))
    return d


def observe(self, requests, draft, taus, *a, **k):
    priced = current.get(requests[0])
    if priced is not None and priced[0] == draft and taus[0]:
        log.append((current['prompt'],) + priced + (st.mean(taus[0]),))
    return ow(self, requests, draft, taus, *a, **k)


B.AutoBudget._choose, B.AutoBudget.observe_window = choose, observe
for attempt in range(4):
    log.clear()
    e = engine()
    e.generate([prompts[0]], p, draft='chain:8')
    for i, x in enumerate(prompts[1:]):
        current['prompt'] = i
        e.generate([x], p, draft='auto')
    trees = sum(1 for r in log if r[1] == t16)
    print(f"attempt {attempt}: tree:16 windows {trees} of {len(log)}", flush=True)
    if trees >= 100:
        break
for lo in range(0, 40, 5):
    rows = [r for r in log if lo <= r[0] < lo + 5]
    f8, f16 = st.mean(fixed['chain:8'][lo:lo + 5]), st.mean(fixed['tree:16'][lo:lo + 5])
    cnt = collections.Counter(str(r[1]) for r in rows)
    ratio = st.mean(r[3] / r[2] for r in rows) if rows else 0
    raw = st.mean(r[5] / r[4] for r in rows) if rows else 0
    def acc(d, col):
        sel = [r for r in rows if r[1] == d]
        return f"{st.mean(r[-1] for r in sel):.2f} vs priced {st.mean(r[col] for r in sel):.2f} ({len(sel)})" if sel else "-"
    print(f"prompts {lo}-{lo + 4}: fixed c8 {f8:.2f} t16 {f16:.2f} ratio {f16 / f8:.2f} | auto {dict(cnt)} priced "
          f"E ratio {ratio:.2f} (raw {raw:.2f}) cal {rows[-1][6]:.3f}/{rows[-1][7]:.3f} | c8 accepted {acc(c8, 2)}, "
          f"t16 {acc(t16, 3)}" if rows else f"prompts {lo}-{lo + 4}: -", flush=True)
