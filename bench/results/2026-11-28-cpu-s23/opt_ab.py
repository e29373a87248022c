"""Twenty-third session: batch 1 in the engine, auto priced at its mean curve (optimism 0: the code before) against
auto priced optimistically (AutoBudget.optimism = OPT pseudo-steps), side by side in one process: two engines (A:
chain:8, tree:16 and auto at optimism 0; B: auto at OPT) sharing A's startup cost table, 40 eagle_gsm8k prompts x 128
tokens, generate() per prompt, the four modes rotated per prompt, greedy, each engine's curves reset after the warm-up.
Prints each mode's tok/s, auto / best fixed for both autos, their AR steps, and whether every output equals chain:8's.
`PYTHONPATH=. python bench/results/2026-11-28-cpu-s23/opt_ab.py OPT [PROMPTS]`"""
import sys, time, collections, torch
from dflash_trt import SamplingParams
from dflash_trt.bench.datasets import encode_prompt, load_prompt_set
from dflash_trt.engines.torch_engine import TorchEngine
from dflash_trt.spec import budget as B
torch.set_num_threads(1)
OPT = float(sys.argv[1]); N = int(sys.argv[2]) if len(sys.argv) > 2 else 40
F = "tests/fixtures/gsm8k-tiny"
A = TorchEngine.from_pretrained(F + "/target", F + "/drafter", max_batch_size=1, max_seq_len=512)
Bm = TorchEngine.from_pretrained(F + "/target", F + "/drafter", max_batch_size=1, max_seq_len=512)
turns = load_prompt_set("data/prompts/eagle_gsm8k.jsonl", N).turns
prompts = [encode_prompt(A.tokenizer, t, 384)[0] for t in turns]
A.generate(prompts[:1], SamplingParams(max_new_tokens=8), draft="auto")
Bm.draft_costs = A.draft_costs  # one startup table for both autos
_da = A.draft_budget
def da(kind, k):
    b = _da(kind, k)
    if kind == "auto": b.optimism = 0.0
    return b
A.draft_budget = da
_db = Bm.draft_budget
def db(kind, k):
    b = _db(kind, k)
    if kind == "auto": b.optimism = OPT
    return b
Bm.draft_budget = db
params = SamplingParams(max_new_tokens=128)
modes = {"chain:8": (A, "chain:8"), "tree:16": (A, "tree:16"), "auto": (A, "auto"), "opt": (Bm, "auto")}
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
print(f"optimism {OPT}: " + ", ".join(f"{m} {rate[m]:.1f} tok/s" for m in names)
      + f"; auto / best fixed ({best}) {rate['auto'] / rate[best]:.3f}, opt / best fixed {rate['opt'] / rate[best]:.3f}"
      + f"; AR steps auto {ar['auto']}, opt {ar['opt']}; outputs equal {all(outs[m] == outs['chain:8'] for m in names)}",
      flush=True)
