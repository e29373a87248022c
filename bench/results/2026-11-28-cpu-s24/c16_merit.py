"""Twenty-fourth session: why does auto draft on merit at 13-16 requests (c = 16, where every draft loses to AR on
this CPU)? Runs c16_one.py's workload (one engine, AR and auto alternating by round, 1 ms host work per step) and
prints, for every window auto chooses to draft on merit at n >= 13, what it priced: expected tokens and rate of the
draft and of AR, the chains' calibration factor, the draft's optimism factor, the drafter curve's steps, the requests'
mean own steps, and the previous window's draft. Then what such windows emitted.
`PYTHONPATH=. python bench/results/2026-11-28-cpu-s24/c16_merit.py [ROUNDS=5]`"""
import runpy, sys
import dflash_trt.spec.budget as bm

log = []
_choose = bm.AutoBudget._choose


def traced(self, requests, left, length):
    before = self._last
    d = _choose(self, requests, left, length)
    if d.size > 1 and self._probing is None and len(requests) >= 13 and self._pricing is not None:
        pr = self._pricing[2]
        expected, now, rates, raw = pr[0], pr[2], pr[3], pr[6]
        ar = bm.Draft("chain", 1)
        rows = [self._rows.get(r) for r in requests]
        own = [self._counts[r, 1, 0] for r in rows if r is not None]
        log.append(f"n={len(requests)} {d} after {before}: E {expected[d]:.1f} (raw {raw[d]:.1f}) at {1e3 * now[d]:.1f} ms "
                   f"= {rates[d]:.0f} tok/s vs AR {rates[ar]:.0f}; chains' factor "
                   f"{self.calibration.factor(d):.3f}, optimism {self._optimism().get(d, 1.0):.3f}, curve steps "
                   f"{self.curve.steps():.0f} (p1 {self.acceptance()[0]:.2f}), {len(own)} requests with own counts "
                   f"(mean first-position trials {sum(own) / max(len(own), 1):.2f})")
    return d


bm.AutoBudget._choose = traced
sys.argv = ['c16_one.py'] + sys.argv[1:]
runpy.run_path('bench/results/2026-11-28-cpu-s24/c16_one.py', run_name='__main__')
print("\n".join(log))
