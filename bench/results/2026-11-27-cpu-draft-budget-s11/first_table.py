# first_table.py: the first startup cost table of a fresh process (batch 1), each round's timing of chain:1 / chain:8 / tree:16
# at both lengths (spec/step.py measure_costs' loop); run from a tree's root, several times
import sys, torch, time
from dflash_trt.engines.torch_engine import TorchEngine
from dflash_trt.spec.budget import auto_drafts
from dflash_trt.spec.step import COST_LENGTHS, bucket_sizes
torch.set_num_threads(1)
fx = 'tests/fixtures/gsm8k-tiny/'  # (run from a tree's root)
eng = TorchEngine.from_pretrained(fx + 'target', fx + 'drafter', device='cpu', max_batch_size=1, max_seq_len=512)
sr = eng.step_runner
drafts = auto_drafts(eng.drafter.block_size, eng.auto_trees)
lengths = sorted({sr._timing_length(L, max(d.size for d in drafts)) for L in COST_LENGTHS})
shapes = [(n, d, L) for L in lengths for n in bucket_sizes(sr.max_batch_size) for d in drafts]
rounds = []
with torch.inference_mode():
    for _ in range(3):
        row = {}
        for n, d, L in shapes:
            spent = sum(sr._timed_step(n, d.size, True, L, d.tree) for _ in range(3))
            while spent < 0.02:
                spent += sr._timed_step(n, d.size, True, L, d.tree)
            row[(str(d), L)] = sr._timed_step(n, d.size, True, L, d.tree) * 1e3
        rounds.append(row)
keys = list(rounds[0])
print(' '.join(f"{k[0]}@{k[1]}:" + '/'.join(f"{r[k]:.1f}" for r in rounds) for k in keys if k[0] in ('chain:1', 'chain:8', 'tree:16')))
