"""Twenty-third session: at one request, should an AR window chosen on the request's own estimate (the drafter's curve
over every request would draft at this batch size) feed the drafter (taps, context rows) instead of running as a plain
AR step, after which the drafter's context restarts? needs_context feeds where one request fewer would draft
(`_drafts_fewer`, n > 1 only); variant B also asks it of a batch of one (defers_context(1)). Batch 1 in the engine, side
by side in one process: two engines (A: chain:8, tree:16 and auto; B: auto with the variant) sharing A's startup cost
table, 40 eagle_gsm8k prompts x 128 tokens, generate() per prompt, the four modes rotated per prompt, greedy, curves
reset after the warm-up. Prints each mode's tok/s, auto / best fixed for both autos, their AR steps, their plain (not
fed) AR windows, and whether every output equals chain:8's.
`PYTHONPATH=. python bench/results/2026-11-28-cpu-s23/feed1_ab.py [PROMPTS]`"""
import sys, time, collections, torch
from dflash_trt import SamplingParams
from dflash_trt.bench.datasets import encode_prompt, load_prompt_set
from dflash_trt.engines.torch_engine import TorchEngine
from dflash_trt.spec import budget as B
torch.set_num_threads(1)
N = int(sys.argv[1]) if len(sys.argv) > 1 else 40
orig = B.AutoBudget._choose


def _choose(self, requests, left, length):
    d = orig(self, requests, left, length)
    if getattr(self, "feed_one", False) and d.size == 1 and len(requests) == 1 and self._probe_wait is not None:
        self._drafts_fewer = not self.defers_context(1, length)
    return d


B.AutoBudget._choose = _choose
plain = collections.Counter()
onc = B.AutoBudget.needs_context


def needs(self, steps=1):
    r = onc(self, steps)
    if not r:
        plain["B" if getattr(self, "feed_one", False) else "A"] += 1
    return r


B.AutoBudget.needs_context = needs
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
    if kind == "auto":
        b.feed_one = True
    return b


Bm.draft_budget = db
params = SamplingParams(max_new_tokens=128)
modes = {"chain:8": (A, "chain:8"), "tree:16": (A, "tree:16"), "auto": (A, "auto"), "feed1": (Bm, "auto")}
for name, (e, d) in modes.items():  # warm, then forget what auto learnt
    e.generate(prompts[:1], params, draft=d)
for e in (A, Bm):
    e.draft_curve, e.tree_curves, e.draft_calibration = None, {}, B.Calibration()
plain.clear()
secs, toks, outs, ar = collections.Counter(), collections.Counter(), collections.defaultdict(list), collections.Counter()
names = list(modes)
for i, p in enumerate(prompts):
    for name in names[i % 4:] + names[: i % 4]:
        e, d = modes[name]
        t = time.perf_counter(); r = e.generate([p], params, draft=d)[0]; secs[name] += time.perf_counter() - t
        toks[name] += len(r.token_ids); outs[name].append(r.token_ids)
        ar[name] += r.stats.draft_steps.get("chain:1", 0)
rate = {m: toks[m] / secs[m] for m in names}
best = max(("chain:8", "tree:16"), key=rate.get)
print(", ".join(f"{m} {rate[m]:.1f} tok/s" for m in names)
      + f"; auto / best fixed ({best}) {rate['auto'] / rate[best]:.3f}, feed1 / best fixed {rate['feed1'] / rate[best]:.3f}"
      + f"; AR steps auto {ar['auto']}, feed1 {ar['feed1']}; plain AR windows auto {plain['A']}, feed1 {plain['B']}"
      + f"; outputs equal {all(outs[m] == outs['chain:8'] for m in names)}", flush=True)
