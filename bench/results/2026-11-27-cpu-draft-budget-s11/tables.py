"""Startup cost tables measured repeatedly (batch 1 engine), every round's timing kept: how often is an entry's median
off the consensus, and would the min of the rounds be steadier?"""
import sys, statistics as st, collections, torch
from dflash_trt.engines.torch_engine import TorchEngine
from dflash_trt.spec.budget import auto_drafts
from dflash_trt.spec.step import COST_LENGTHS, bucket_sizes
torch.set_num_threads(1)
fx = 'tests/fixtures/gsm8k-tiny/'  # (run from a tree's root)
eng = TorchEngine.from_pretrained(fx + 'target', fx + 'drafter', device='cpu', max_batch_size=int(sys.argv[2]), max_seq_len=512)
sr = eng.step_runner
drafts = auto_drafts(eng.drafter.block_size, eng.auto_trees)
runs = int(sys.argv[1])
med, mn = collections.defaultdict(list), collections.defaultdict(list)
for r in range(runs):
    lengths = sorted({sr._timing_length(L, max(d.size for d in drafts)) for L in COST_LENGTHS})
    shapes = [(n, d, L) for L in lengths for n in bucket_sizes(sr.max_batch_size) for d in drafts]
    times = {s: [] for s in shapes}
    with torch.inference_mode():
        for _ in range(3):
            for n, d, L in shapes:
                spent = sum(sr._timed_step(n, d.size, True, L, d.tree) for _ in range(3))
                while spent < 0.02:
                    spent += sr._timed_step(n, d.size, True, L, d.tree)
                times[(n, d, L)].append(sr._timed_step(n, d.size, True, L, d.tree))
    for s, t in times.items():
        med[s].append(sorted(t)[1]); mn[s].append(min(t))
def report(name, tab):
    worst = []
    for s, v in tab.items():
        c = st.median(v)
        worst.append((max(x / c for x in v), s))
    dev = [x / st.median(v) for v in tab.values() for x in v]
    print(name, "entries > 1.15x their consensus: %d of %d; > 1.3x: %d; max %.2f" % (
        sum(d > 1.15 for d in dev), len(dev), sum(d > 1.3 for d in dev), max(dev)))
report("median of 3", med)
report("min of 3", mn)
# the ratio that decides at batch 1: chain:8 / tree:16 at L=128 per run
for name, tab in (("median", med), ("min", mn)):
    keys = {str(d): (1, d, lengths[0]) for d in drafts}
    print(name, "tree:16/chain:8 per run:", ' '.join("%.2f" % (a / b) for a, b in zip(tab[keys['tree:16']], tab[keys['chain:8']])),
          "| chain:8/chain:1:", ' '.join("%.2f" % (a / b) for a, b in zip(tab[keys['chain:8']], tab[keys['chain:1']])))
