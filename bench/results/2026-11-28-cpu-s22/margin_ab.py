"""Twenty-second session: batch 1 in the engine, auto against auto with a tie-break toward drafting (AR chosen only
where its priced rate beats the best drafting choice's by more than MARGIN: simmargin.py's rule), side by side in one
process: two engines (A: chain:8, tree:16 and auto; B: auto with the margin) sharing A's startup cost table, 40
eagle_gsm8k prompts x 128 tokens, generate() per prompt, the four modes rotated per prompt, greedy. Prints each mode's
tok/s, auto / best fixed for both autos, their AR windows, and whether every output equals chain:8's.
`PYTHONPATH=. python bench/results/2026-11-28-cpu-s22/margin_ab.py MARGIN [PROMPTS]`"""
import sys, time, collections, torch
from dflash_trt import SamplingParams
from dflash_trt.bench.datasets import encode_prompt, load_prompt_set
from dflash_trt.engines.torch_engine import TorchEngine
from dflash_trt.spec import budget as B
torch.set_num_threads(1)
MARGIN = float(sys.argv[1]); N = int(sys.argv[2]) if len(sys.argv) > 2 else 40
orig = B.AutoBudget._priced
def _priced(self, requests, left, length):
    p = orig(self, requests, left, length)
    m = getattr(self, "margin", 0.0)
    if m and p[4].size == 1 and p[5] is not None and p[3][p[5]] * (1 + m) >= p[3][p[4]]:
        p = p[:4] + (p[5],) + p[5:]
        self._pricing = (self._pricing[0], self._pricing[1], p)
    return p
B.AutoBudget._priced = _priced
F = "tests/fixtures/gsm8k-tiny"
A = TorchEngine.from_pretrained(F + "/target", F + "/drafter", max_batch_size=1, max_seq_len=512)
Bm = TorchEngine.from_pretrained(F + "/target", F + "/drafter", max_batch_size=1, max_seq_len=512)
turns = load_prompt_set("data/prompts/eagle_gsm8k.jsonl", N).turns
prompts = [encode_prompt(A.tokenizer, t, 384)[0] for t in turns]
A.generate(prompts[:1], SamplingParams(max_new_tokens=8), draft="auto")
Bm.draft_costs = A.draft_costs  # one startup table for both autos
_db = Bm.draft_budget
def db(kind, k):
    b = _db(kind, k)
    if kind == "auto": b.margin = MARGIN
    return b
Bm.draft_budget = db
params = SamplingParams(max_new_tokens=128)
modes = {"chain:8": (A, "chain:8"), "tree:16": (A, "tree:16"), "auto": (A, "auto"), "margin": (Bm, "auto")}
for name, (e, d) in modes.items():  # warm, then forget what auto learnt
    e.generate(prompts[:1], params, draft=d)
for e in (A, Bm):
    e.draft_curve, e.tree_curves, e.draft_calibration = None, {}, B.Calibration()
secs, toks, outs, ar = collections.Counter(), collections.Counter(), collections.defaultdict(list), collections.Counter()
names = list(modes)
for i, p in enumerate(prompts):
    for name in names[i % 4:] + names[: i % 4]:
        e, d = modes[name]
        t = time.perf_counter(); r = e.generate([p], params, draft=d)[0]; secs[name] += time.perf_counter() - t
        toks[name] += len(r.token_ids); outs[name].append(r.token_ids)
        ar[name] += sum(1 for k in r.stats.ks if k == 1)
rate = {m: toks[m] / secs[m] for m in names}
best = max(("chain:8", "tree:16"), key=rate.get)
print(f"margin {MARGIN}: " + ", ".join(f"{m} {rate[m]:.1f} tok/s" for m in names)
      + f"; auto / best fixed ({best}) {rate['auto'] / rate[best]:.3f}, margin / best fixed {rate['margin'] / rate[best]:.3f}"
      + f"; AR steps auto {ar['auto']}, margin {ar['margin']}; outputs equal {all(outs[m] == outs['chain:8'] for m in names)}",
      flush=True)
