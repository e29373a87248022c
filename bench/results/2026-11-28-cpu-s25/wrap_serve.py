"""Twenty-fifth session: `dflash-trt serve` with auto's choices and window costs logged (for drive_server.py). Every
window: the batch size, the draft, its measured seconds per step and what the cost table priced it at just before;
every drafting-on-merit choice at n >= 13: its pricing; every window's launch-to-read time and the gap after it
(read to the next launch: prefills, streaming, host work). Appended to $LOG as JSON lines.
`LOG=FILE PYTHONPATH=. python bench/results/2026-11-28-cpu-s25/wrap_serve.py serve --api openai ...`"""
import json, os, sys
import dflash_trt.spec.budget as bm

out = open(os.environ['LOG'], 'a', buffering=1)
_observe = bm.CostTable.observe


def observe(self, n, k, seconds_per_step, length=None, switched=False):
    priced = (self.cost(n, k, length) + self.overhead.get(n, 0.0)) * self.drift
    out.write(json.dumps({"w": [n, str(k), seconds_per_step, priced, length, switched, self.drift]}) + "\n")
    return _observe(self, n, k, seconds_per_step, length, switched)


bm.CostTable.observe = observe
_choose = bm.AutoBudget._choose


def traced(self, requests, left, length):
    d = _choose(self, requests, left, length)
    if d.size > 1 and self._probing is None and len(requests) >= 13 and self._pricing is not None:
        pr = self._pricing[2]
        expected, now, rates, raw = pr[0], pr[2], pr[3], pr[6]
        ar = bm.Draft("chain", 1)
        out.write(json.dumps({"merit": [len(requests), str(d), expected[d], raw[d], now[d], expected[ar], now[ar],
                                        self.calibration.factor(d), self._optimism().get(d, 1.0),
                                        float(self.acceptance()[0]), self.cost.drift, length]}) + "\n")
    return d


bm.AutoBudget._choose = traced
import time  # noqa: E402
import dflash_trt.spec.step as st  # noqa: E402

_launch, _read = st.SpecStep.launch, st.SpecStep.read
last = {}  # the last window's read end, its n and k: the gap to the next launch is everything outside the windows


def launch(self, slots, k, spec, steps, *a, **kw):
    t = time.perf_counter()
    if last:
        out.write(json.dumps({"gap": [last["n"], last["k"], t - last["end"], last["window"]]}) + "\n")
    h = _launch(self, slots, k, spec, steps, *a, **kw)
    last.update(n=len(slots), k=(f"tree:{k}" if kw.get("tree") else f"chain:{k}"), start=t)
    return h


def read(self, launched):
    r = _read(self, launched)
    last["end"] = time.perf_counter()
    last["window"] = last["end"] - last["start"]
    return r


st.SpecStep.launch, st.SpecStep.read = launch, read
from dflash_trt.cli import main  # noqa: E402
sys.exit(main(sys.argv[1:]))
