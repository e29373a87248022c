"""The startup cost table's noise: SpecStep.measure_costs N times in one process (args: rounds per measurement, measurements),
printing the ratios auto's near choices turn on. Run from a tree's root."""
import sys, time, statistics as st, torch
from dflash_trt.engines.torch_engine import TorchEngine
from dflash_trt.spec.budget import auto_drafts, Draft
torch.set_num_threads(1)
fx='tests/fixtures/gsm8k-tiny/'
e=TorchEngine.from_pretrained(fx+'target', fx+'drafter', device='cpu', max_batch_size=8, max_seq_len=512)
drafts=auto_drafts(16,e.auto_trees)
repeats=int(sys.argv[1]) if len(sys.argv)>1 else 3
C8,T16,T32,C1=Draft('chain',8),Draft('tree',16),Draft('tree',32),Draft('chain',1)
for i in range(int(sys.argv[2]) if len(sys.argv)>2 else 5):
    t=time.time(); m=e.step_runner.measure_costs(drafts, repeats=repeats); dt=time.time()-t
    L=min(k[2] for k in m)
    print(f"{dt:5.1f}s  n1 t16/c8 {m[(1,T16,L)]/m[(1,C8,L)]:.3f} t32/c8 {m[(1,T32,L)]/m[(1,C8,L)]:.3f}  n8 c8/c1 {m[(8,C8,L)]/m[(8,C1,L)]:.3f} n4 c8/c1 {m[(4,C8,L)]/m[(4,C1,L)]:.3f}", flush=True)
