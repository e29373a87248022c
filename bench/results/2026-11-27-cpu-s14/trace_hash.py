"""Hash of every choice auto makes in the simgrid replays (PYTHONPATH=<tree>, run from <tree>'s root)."""
import hashlib, json, sys
from pathlib import Path
sys.path.insert(0, "scripts")
import sim_draft_budget as S
from dflash_trt.spec import budget as B
sys.path.insert(0, "bench/results/2026-11-26-cpu-draft-budget-s10")
import simgrid as G
log = []
orig = B.AutoBudget.choose
def choose(self, *a, **k):
    d = orig(self, *a, **k)
    log.append(str(d))
    return d
B.AutoBudget.choose = choose
orig_ot = B.AutoBudget.observe_time
def ot(self, *a, **k):
    orig_ot(self, *a, **k)
    log.append(f"{self.cost.drift:.12g}")
B.AutoBudget.observe_time = ot
G.main(int(sys.argv[1]) if len(sys.argv) > 1 else 3)
print(len(log), hashlib.sha256("\n".join(log).encode()).hexdigest()[:16])
