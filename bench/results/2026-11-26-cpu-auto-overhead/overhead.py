"""Pure overhead of auto's machinery on CPU at batch 1: auto held at chain:8 by a given cost table (trees and other
chains dear, AR dear) vs fixed chain:8, interleaved rounds; variants switch parts of auto off."""
import json, sys, time, statistics
import torch
from dflash_trt import SamplingParams
from dflash_trt.engines.torch_engine import TorchEngine
from dflash_trt.bench.datasets import encode_prompt
from dflash_trt.spec import budget as bm
from dflash_trt.spec.budget import Draft, auto_drafts
torch.set_num_threads(1)
F = "tests/fixtures/gsm8k-tiny/"
bs = int(sys.argv[1]) if len(sys.argv) > 1 else 1
variants = sys.argv[2].split(",") if len(sys.argv) > 2 else ["full"]
import os
e = TorchEngine.from_pretrained(F + "target", F + "drafter", device="cpu", max_batch_size=bs, max_seq_len=512, decode_loop=os.environ.get("LOOP", "host"), steps_per_sync=int(os.environ.get("SPS", "4")))
turns = [json.loads(l)["turns"][0] for l in open("data/prompts/eagle_gsm8k.jsonl")][:48]
prompts = [encode_prompt(e.tokenizer, t, 384)[0] for t in turns]
batches = [prompts[i:i + bs] for i in range(0, len(prompts), bs)]
costs = {}
for n in sorted({1, bs}):
    for d in auto_drafts(16, e.auto_trees):
        if os.environ.get("PIN") == "ar":
            costs[(n, d)] = 1.0 if d == Draft("chain", 1) else 50.0
        else:
            costs[(n, d)] = 1.0 if (not d.tree and d.size <= 8) else 50.0
e.draft_costs = costs
e.refine_draft_costs = False
p = SamplingParams(max_new_tokens=128)
orig = {n: getattr(bm.AutoBudget, n) for n in ("observe_window", "prepare", "choose", "observe_time")}
from dflash_trt.engines import scheduler as sm
from concurrent.futures import ThreadPoolExecutor
POOL = ThreadPoolExecutor(1)
D0 = sm.BatchScheduler._decode
import time as _t
def decode_thread(self, batch):
    if not getattr(bm, "_THREAD", False):
        return D0(self, batch)
    t0 = _t.perf_counter()
    if self._last_window is not None:
        n, draft, length, seconds, ended, prefill_s = self._last_window
        between = t0 - ended - (self.prefill_s - prefill_s)
        self.budget.observe_time(n, draft, (seconds + min(max(between, 0.0), seconds)) / self.steps_per_sync, length)
        self._last_window = None
    slots = [live.slot for live in batch]
    ids = [live.request_id for live in batch]
    left = [live.req.params.max_new_tokens - len(live.outputs) for live in batch]
    length = sm._longest_cache(batch)
    draft = self.budget.choose(ids, left, length)
    fut = POOL.submit(lambda: (self._observe(), self.budget.choose_ahead(ids, left, length + self.steps_per_sync, self.steps_per_sync)))
    launched = self.runner.launch(slots, draft.size, self.spec, self.steps_per_sync, free=self._free, tree=draft.tree)
    fut.result()
    out = self.runner.read(launched)
    elapsed = _t.perf_counter() - t0
    self.decode_s += elapsed
    for live, new, taus in zip(batch, out.new_tokens, out.taus):
        live.outputs.extend(new); live.stats.taus.extend(taus); live.stats.ks.extend([draft.size] * len(taus))
    self._unobserved = (batch, draft, out.taus, out.chain_equivalent, out.done)
    events = [self._finish(live, new) if done else sm.StepEvent(live.request_id, new, False)
              for live, new, done in zip(batch, out.new_tokens, out.done)]
    if not self._active:
        self._observe(now=True)
    if not out.warmup and self._active:
        self._last_window = (len(slots), draft, length, elapsed, _t.perf_counter(), self.prefill_s)
    elif not out.warmup:
        self.budget.observe_time(len(slots), draft, elapsed / self.steps_per_sync, length)
    return events
sm.BatchScheduler._decode = decode_thread
def setv(v):
    bm._THREAD = False
    for n, f in orig.items(): setattr(bm.AutoBudget, n, f)
    if v == "noobserve":
        bm.AutoBudget.observe_window = lambda self, *a, **k: None
    if v == "nochoose":
        bm.AutoBudget.choose = lambda self, *a, **k: Draft("chain", 1 if os.environ.get("PIN") == "ar" else 8)
    if v == "memo":
        C = orig["choose"]
        def memo(self, requests, left=None, length=None):
            key = (self._batch_key(requests, left), self._prefixes[0])
            if getattr(self, "_memo", None) == key and self._last is not None:
                return self._last
            d = C(self, requests, left, length)
            self._memo = (self._batch_key(requests, left), self._prefixes[0])
            return d
        bm.AutoBudget.choose = memo
    if v == "thread":
        bm._THREAD = True
    if v == "none":
        bm.AutoBudget.observe_window = lambda self, *a, **k: None
        bm.AutoBudget.choose = lambda self, *a, **k: Draft("chain", 1 if os.environ.get("PIN") == "ar" else 8)
        bm.AutoBudget.observe_time = lambda self, *a, **k: None
for b in batches[:3]:
    e.generate(b, p, draft="chain:8"); e.generate(b, p, draft="auto"); e.generate(b, p, use_drafter=False)
BASE = "ar" if os.environ.get("PIN") == "ar" else "chain:8"
modes = [BASE] + variants
t = {m: 0.0 for m in modes}; tok = {m: 0 for m in modes}; ks = {m: {} for m in modes}
for rnd in range(3):
    for i, b in enumerate(batches):
        order = modes[i % len(modes):] + modes[:i % len(modes)]
        for m in order:
            setv(m)
            t0 = time.perf_counter()
            r = (e.generate(b, p, use_drafter=False) if m == "ar" else e.generate(b, p, draft="chain:8" if m == "chain:8" else "auto"))
            t[m] += time.perf_counter() - t0
            tok[m] += sum(len(x.token_ids) for x in r)
            for x in r:
                for k in x.stats.ks: ks[m][k] = ks[m].get(k, 0) + 1
setv("full")
base = tok[BASE] / t[BASE]
print(f"batch {bs}: " + "  ".join(f"{m} {tok[m]/t[m]/base:.4f}" for m in modes), {m: ks[m] for m in modes if m != BASE})
