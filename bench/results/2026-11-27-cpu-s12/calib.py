"""E per draft at the learnt curves vs the measured mean τ of each fixed mode (CPU, fixture pair, batch 8)."""
import json, sys
from pathlib import Path
import numpy as np, torch
from dflash_trt import SamplingParams
from dflash_trt.bench.datasets import encode_prompt
from dflash_trt.engines.torch_engine import TorchEngine
torch.set_num_threads(1)
T = "tests/fixtures/gsm8k-tiny/"
e = TorchEngine.from_pretrained(T + "target", T + "drafter", device="cpu", max_batch_size=8, max_seq_len=512)
turns = [json.loads(l)["turns"][0] for l in Path("data/prompts/eagle_gsm8k.jsonl").read_text().splitlines()][:int(sys.argv[1])]
prompts = [encode_prompt(e.tokenizer, t, 512 - 128)[0] for t in turns]
p = SamplingParams(max_new_tokens=128)
e.generate(prompts[:1], SamplingParams(max_new_tokens=4), draft="auto")  # cost table; curves
taus = {}
from dflash_trt.spec import budget as B
feed = e.draft_budget("auto", 16)
LOG = []
_ow = B.AutoBudget.observe_window
def ow(self, requests, draft, taus, chain_equivalent=(), finished=()):
    if self is feed: LOG.append((str(draft), [list(t) for t in taus], [list(c) for c in chain_equivalent], list(finished)))
    return _ow(self, requests, draft, taus, chain_equivalent, finished)
B.AutoBudget.observe_window = ow
B.Fixed.observe_window = lambda self, *a, **k: feed.observe_window(*a, **k)
for mode in sys.argv[2].split(","):
    ts, tl = [], []
    for i in range(0, len(prompts), 8):
        for r in e.generate(prompts[i:i + 8], p, draft=mode):
            ts += r.stats.taus; tl += r.stats.taus[:-1]
    taus[mode] = (float(np.mean(ts)), float(np.mean(tl)))
    feed.prepare(now=True); bud = feed
    g, misses = bud._estimates(); row = bud._at_caps(bud._depth_tables(g[None], misses), [16])[0]
    raw = bud._depth_tables(g[None], misses)[0][:, -1]
    from dflash_trt.spec.budget import _expected_by_depth
    c = e.draft_curve; raw_p = np.where(c.trials > 0, c.accepted / np.maximum(c.trials, 1), 0)
    print("   raw pooled E at cap 16:", round(float(_expected_by_depth(raw_p)[16]), 3), "trials by depth", c.trials[:10].astype(int), "p", np.round(raw_p[:10], 2), "g", np.round(g[:10], 2))
    print(f"after {mode}: E", {str(d): round(float(x), 2) for d, x in zip(bud.drafts, row)}, "raw tables at cap 16:", np.round(raw, 2),
          "tree trials:", {n: int(c.tree.trials[0]) for n, c in e.tree_curves.items()}, flush=True)
allt = [t for _, taus, _, _ in LOG for r in taus for t in r]
print("observed steps", len(allt), "mean tau", np.mean(allt), "windows", len(LOG), "finished", sum(sum(f) for *_, f in LOG))
print("measured mean tau:", {m: tuple(round(x, 2) for x in t) for m, t in taus.items()})
