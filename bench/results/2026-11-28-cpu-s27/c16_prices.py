"""Twenty-seventh session: s24's c16_one.py run in place (same arguments), then what auto's cost table prices an AR
window and a chain:8 window at at its batch sizes, against the windows' measured ms (launch to read): is AR priced
right at 16 requests? `PYTHONPATH=. python bench/results/2026-11-28-cpu-s27/c16_prices.py [ROUNDS] [DELAY] [C]`"""
import runpy, sys
from dflash_trt.spec.budget import Draft
sys.argv = ["c16_one.py"] + sys.argv[1:]
g = runpy.run_path("bench/results/2026-11-28-cpu-s24/c16_one.py", run_name="__main__")
b = g["sch"]["auto"].budget
t = b.cost
for n in (16, 15, 12, 8):
    for d in (Draft("chain", 1), Draft("chain", 4), Draft("chain", 8)):
        print(f"  PRICE n={n} {d}: entry L=128 {1e3 * t.cost(n, d, 128):.2f} ms, L=192 {1e3 * t.cost(n, d, 192):.2f} ms"
              f" (drift {t.drift:.3f}, overhead {1e3 * t.overhead.get(n, 0.0) if hasattr(t, 'overhead') and isinstance(t.overhead, dict) else float('nan'):.2f} ms)")
for (m, cls), (w, sec, tok) in sorted(g["stats"].items()):
    if "AR" in cls:
        print(f"  MEASURED {m} {cls}: {w} windows {1e3 * sec / w:.2f} ms/window, {tok / w:.1f} tokens/window")
print("  auto's curve p:", [round(x, 3) for x in b.acceptance()[:8]], "steps", b.curve.steps())
