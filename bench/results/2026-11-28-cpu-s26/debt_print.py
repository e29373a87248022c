"""Twenty-sixth session: c16_one.py with every exploration charge printed (needs attempts/explore_charge.patch applied:
AutoBudget._charge). `PYTHONPATH=. python bench/results/2026-11-28-cpu-s26/debt_print.py`"""
import runpy, sys, dflash_trt.spec.budget as bm
orig = bm.AutoBudget._charge
def charge(self, taus):
    d, sec, regret, rate, cost = self._explore_timed
    steps = max(map(len, taus), default=0)
    orig(self, taus)
    tok = sum(map(sum, taus))
    print(f"CHARGE {d} n={len(taus)}: {sec*1e3:.1f} table-ms/step (priced cost {cost*1e3:.1f}), {tok} tokens "
          f"(AR would take {tok/max(steps,1)/rate*1e3:.1f}), regret {regret*1e3:.1f} -> debt {self._debt*1e3:.1f} ms")
bm.AutoBudget._charge = charge
sys.argv = ['c16_one.py', '5', '0.001', '16']
runpy.run_path('bench/results/2026-11-28-cpu-s24/c16_one.py', run_name='__main__')
