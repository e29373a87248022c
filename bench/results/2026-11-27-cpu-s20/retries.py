"""The synthetic case of test_the_estimates_are_calibrated_by_what_the_chosen_drafts_accepted run 1,000 windows: a
tree whose estimate is 15 % high against a chain:8 10 % low; per 100 windows what auto chose (the cost of the fade:
how often the tree is tried again once chain:8 runs). `python aging.py R retries.py` for a fade rate."""
import numpy as np, sys
from dflash_trt.spec.budget import AutoBudget, CostTable, Draft, auto_drafts
chain = lambda k: Draft("chain", k)
rng = np.random.default_rng(0)
tree = Draft("tree", 16)
costs = {(1, d): {1: 0.5, 2: 0.85, 4: 0.9, 8: 1.0}.get(d.size, 3.0) for d in auto_drafts(16, ())}
costs[(1, tree)] = 1.85
budget = AutoBudget(16, CostTable(costs, refine=False), trees=(16,), probe_every=10 ** 6)
big = 10 ** 6
budget.curve.accepted[:], budget.curve.trials[:] = 0.7 * big, big
counts = budget.tree_curves[16]
counts.chain.accepted[:], counts.chain.trials[:] = 0.7 * big, big
counts.tree.accepted[:], counts.tree.trials[:] = 0.85 * big, big
true = {chain(8): 1.1, tree: 0.85}
picks = []
for window in range(1000):
    request = f"r{window}"
    d = budget.choose([request])
    picks.append(d)
    drafted = true.get(d, 1.0) * (budget._expected_tokens([request])[d] - 1)
    steps = [1 + int(drafted) + (rng.random() < drafted % 1) for _ in range(4)]
    budget.observe_window([request], d, [steps], [[(16, 4)] * 4] if d.tree else ())
    budget.prepare(now=True)
    budget.forget(request)
import collections
for lo in range(0, 1000, 100): print(lo, dict(collections.Counter(str(p) for p in picks[lo:lo+100])))
print(budget.calibration.factor(chain(8)), budget.calibration.factor(tree))
