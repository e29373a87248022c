"""(Twenty-second session: replays record_calls.py's recordings, the calibration's aged_at restored.) (Seventeenth session: the calibration shared and restored.) Replay a recorded call log against dflash_trt.spec.budget as imported (PYTHONPATH picks the tree): results compared
with the recording, time per window (outermost calls), optional cache thrash per window."""
import json, sys, time, collections
import numpy as np
from dflash_trt.spec import budget as B
rec = json.loads(open(sys.argv[1]).read())
reps = int(sys.argv[2]) if len(sys.argv) > 2 else 3
thrash = "thrash" in sys.argv[3:]
import cProfile, pstats
prof = cProfile.Profile() if "profile" in sys.argv[3:] else None  # the budget's calls only
st = rec["state"]
def dec(x):
    if isinstance(x, dict) and set(x) == {"D"}: return B.Draft(*x["D"])
    if isinstance(x, list): return [dec(v) for v in x]
    if isinstance(x, dict): return {k: dec(v) for k, v in x.items()}
    return x
def norm(x):  # results compared as the recording encoded them (tuples as lists)
    return json.loads(json.dumps(x, default=lambda d: {"D": [d.kind, d.size]} if isinstance(d, B.Draft) else str(d)))
def enc(x):
    if isinstance(x, B.Draft): return {"D": [x.kind, x.size]}
    if isinstance(x, (list, tuple)): return [enc(v) for v in x]
    if hasattr(x, "item"): return x.item()
    return x
big = np.ones(1 << 20)
def close(a, b):
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(close(x, y) for x, y in zip(a, b))
    if isinstance(a, float) or isinstance(b, float):
        return abs(a - b) <= 1e-9 * max(abs(a), abs(b), 1e-300)
    return a == b
best = collections.defaultdict(lambda: 1e9)
for rep in range(reps):
    seconds = {}
    for row in st["seconds"]:
        key = (row[0], B.Draft(row[1], row[2])) + tuple(row[3:-1])
        seconds[key] = row[-1]
    ct = B.CostTable(seconds)
    ct.drift, ct.probe_factor = st["drift"], st["probe_factor"]
    ct.switch = {B.Draft(k, s): v for k, s, v in st["switch"]}
    ct.overhead = {int(k): v for k, v in st["overhead"].items()}
    ct._fits = {int(k): list(v) for k, v in st["fits"].items()}
    curve = B.AcceptanceCounts(np.array(st["curve"][0]), np.array(st["curve"][1]), st["curve"][2])
    trees = {int(s): B.TreeCounts(B.AcceptanceCounts(np.array(a), np.array(b)), B.AcceptanceCounts(np.array(c), np.array(d)))
             for s, (a, b, c, d) in st["trees"].items()}
    clock = B.TreeClock(*st["clock"])
    cal = B.Calibration({(k if isinstance(k, str) else B.Draft(*k)): list(v) for k, v in st.get("calibration", [])}, aged_at=st.get("aged_at", 0))
    budgets, mism, tot, per = {}, 0, 0.0, collections.Counter()
    for ev in rec["log"]:
        if ev[0] == "new":
            budgets[ev[1]] = B.AutoBudget(ev[2], ct, prior=st["prior"], curve=curve, trees=st["trees_list"],
                                          tree_curves=trees, tree_clock=clock, calibration=cal)
            continue
        _, i, name, a, k, r = ev[:6]
        a, k = dec(a), dec(k)
        if thrash and name == "observe_time":
            big += 1.0
        f = getattr(budgets[i], name)
        if prof: prof.enable()
        t = time.perf_counter()
        out = f(*a, **k)
        dt = time.perf_counter() - t
        if prof: prof.disable()
        tot += dt; per[name] += dt
        if len(ev) > 6 and mism == 0:
            b = budgets[i]; c = b.cost
            f2 = json.loads(json.dumps([c.drift, c.probe_factor, b.curve.version, float(b.curve.trials.sum()), b.tree_clock.windows, b.tree_clock.since_s, b._at_one, b._held_s, b._probe_interval, float(b._counts.sum()), sorted(c.overhead.items()), sorted(c._fits.items()), len(c.seconds)]))
            if not close(f2, ev[6]):  # (floats within 1e-9: a change that sums in another order moves the last bits)
                print("state diverges after", name, a, "\n rec", ev[6], "\n got", f2); mism += 1
        if enc(out) != r:
            mism += 1
            if mism <= 5: print("mismatch", name, a, k, "recorded", r, "got", enc(out))
    windows = sum(1 for ev in rec["log"] if ev[0] == "call" and ev[2] == "observe_time")
    for nm, v in per.items(): best[nm] = min(best[nm], v)
    best["total"] = min(best["total"], tot)
    print(f"rep {rep}: {windows} windows, {mism} mismatches, {1e6 * tot / windows:.1f} us per window")
print({k: round(1e6 * v / windows, 1) for k, v in sorted(best.items(), key=lambda kv: -kv[1])})
if prof:
    pstats.Stats(prof).sort_stats("tottime").print_stats(40)
