"""scripts/bench_draft_budget.py with some startup cost-table entries scaled (a startup timing wrong in every round):
`perturbed.py DRAFT@N=FACTOR[,...] -- <bench_draft_budget.py arguments>`, e.g. `chain:8@1=1.08 -- --batch-sizes 1`.
Every entry of that draft at that batch size (every cache length) is multiplied by FACTOR as measured, before auto's
table is made from them."""
import sys
from pathlib import Path

from dflash_trt.spec import step

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "scripts"))
import bench_draft_budget  # noqa: E402

spec, rest = sys.argv[1], sys.argv[sys.argv.index("--") + 1:]
scales = {}
for item in spec.split(","):
    what, factor = item.split("=")
    draft, n = what.split("@")
    scales[(int(n), draft)] = float(factor)
measure = step.SpecStep.measure_costs


def measured(self, *a, **k):
    seconds = measure(self, *a, **k)
    for key in seconds:
        f = scales.get((key[0], str(key[1])))
        if f is not None:
            seconds[key] *= f
    print("perturbed:", {f"{d}@{n}": f for (n, d), f in scales.items()}, flush=True)
    return seconds


step.SpecStep.measure_costs = measured
sys.exit(bench_draft_budget.main(rest))
