"""scripts/bench_draft_budget.py with auto's expected drafted tokens scaled by fixed factors per kind (an oracle
calibration): `FACT=tree=0.92,chain=1.06 oracle.py <bench arguments>` (run on the code before Calibration)."""
import sys, os
from pathlib import Path
sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "scripts"))
from dflash_trt.spec import budget as B
import bench_draft_budget
f = {k: float(v) for k, v in (kv.split("=") for kv in os.environ["FACT"].split(","))}
orig = B.AutoBudget._expected_tokens
def ex(self, requests, left=None):
    e = orig(self, requests, left); n = len(requests)
    return {d: (n + f.get(d.kind, 1.0) * (v - n)) for d, v in e.items()}
B.AutoBudget._expected_tokens = ex
sys.exit(bench_draft_budget.main(sys.argv[1:]))
