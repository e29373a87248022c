"""Batch 1, 40 prompts, fixed chain:8 runs observed by an auto budget window by window (its choices unused): what the
chain:8 windows accepted against (a) the budget's raw per-request estimate of chain:8 then (its decayed counts shrunk
toward the drafter's curve, capped by the tokens left) and (b) the drafter's curve alone at the same cap. Says where the
chains' raw estimate runs low. `chainbias.py`"""
import statistics as st, torch
from dflash_trt import SamplingParams
from dflash_trt.bench.datasets import encode_prompt, load_prompt_set
from dflash_trt.engines.torch_engine import TorchEngine
from dflash_trt.spec import budget as B
torch.set_num_threads(1)
fx = 'tests/fixtures/gsm8k-tiny/'
e = TorchEngine.from_pretrained(fx + 'target', fx + 'drafter', device='cpu', max_batch_size=1, max_seq_len=512)
prompts = [encode_prompt(e.tokenizer, t, 512 - 128)[0] for t in load_prompt_set('data/prompts/eagle_gsm8k.jsonl', 41).turns]
p = SamplingParams(max_new_tokens=128)
c8 = B.Draft('chain', 8)
budget = B.AutoBudget(16, B.CostTable({(1, d): 1.0 for d in B.auto_drafts(16, ())}, refine=False))
rows = []
for i, x in enumerate(prompts[1:]):
    rid = f"r{i}"
    res = e.generate([x], p, draft='chain:8')[0]
    left = 128 - 1
    for tau in res.stats.taus:  # window by window, as the budget would have seen them (one step a window)
        budget.prepare()
        est = budget._expected_tokens([rid], [left])[c8]
        g, _ = budget._estimates()
        glob = float(B._expected_by_depth(g)[min(8, max(1, min(left, 16)))])
        rows.append((i, tau, est, glob, left))
        budget.observe_window([rid], c8, [[tau]], (), [False])
        left -= tau
    budget.prepare(now=True)
    budget.forget(rid)
full = [r for r in rows if r[4] >= 16]  # (not a request's last block: no cap)
for name, sel in (("every window", rows), ("uncapped windows", full)):
    print(f"{name} ({len(sel)}): accepted τ {st.mean(r[1] for r in sel):.3f}, per-request estimate "
          f"{st.mean(r[2] for r in sel):.3f}, the drafter's curve alone {st.mean(r[3] for r in sel):.3f}")
for lo in range(0, 40, 10):
    sel = [r for r in full if lo <= r[0] < lo + 10]
    print(f"  prompts {lo}-{lo + 9}: accepted {st.mean(r[1] for r in sel):.2f}, per-request {st.mean(r[2] for r in sel):.2f}, "
          f"curve {st.mean(r[3] for r in sel):.2f}")
