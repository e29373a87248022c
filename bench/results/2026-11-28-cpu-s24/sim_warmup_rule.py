"""Twenty-fourth session: a candidate for the cold start, replayed (sim_consts.py's runs: 8 seeds, cold or SHARED=1):
while the drafter's curve holds fewer than WARM steps, a batch whose best choice is AR runs the best drafting choice
instead (its windows measure the curve). `[SHARED=1] PYTHONPATH=. python .../sim_warmup_rule.py WARM [NAME=value ...]`"""
import runpy, sys
import dflash_trt.spec.budget as bm

WARM = float(sys.argv.pop(1))
_choose = bm.AutoBudget._choose


def choose(self, requests, left, length):
    d = _choose(self, requests, left, length)
    if d.size == 1 and self.curve.steps() < WARM and (left is None or max(left) > 1) and self._pricing is not None:
        self._at_one, self._held_s = 0, 0.0  # (as a drafting choice leaves them)
        return self._pricing[2][5]  # the best drafting choice
    return d


bm.AutoBudget._choose = choose
runpy.run_path('bench/results/2026-11-28-cpu-s24/sim_consts.py', run_name='__main__')
