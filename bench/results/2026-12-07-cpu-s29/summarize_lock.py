"""The engine lock-in repro's runs (lock-VERSION-PAIR.log, costlock_engine.py): per run, auto / the best fixed draft at
batch 1, the best fixed draft, auto's tree:16 and chain:8 windows, and tree:16's cost entry over chain:8's in auto's
table after the run (at the shorter length; the fixed drafts' windows: their true ratio); then means per version.
`python bench/results/2026-12-07-cpu-s29/summarize_lock.py`"""
import ast
import re
import statistics
from pathlib import Path

here = Path(__file__).resolve().parent
rows = []
for f in sorted(here.glob("lock-*.log")):
    text = f.read_text()
    best = re.search(r"auto / best fixed \(([^)]*)\): ([0-9.]+); auto chose (\{[^}]*\})", text)
    table = re.search(r"auto's cost table after the run: .*", text)
    fixed = re.search(r"ms per step at n=1 .*", text)
    if not (best and table and fixed):
        continue
    chose = ast.literal_eval(best[3])
    entry = {d: float(ms) for d, ms in re.findall(r"n=1 (\S+) L=128 ([0-9.]+) ms", table[0])}
    true = {d: float(ms) for d, ms in re.findall(r", (\S+) \1 ([0-9.]+) /", fixed[0])}
    version, pair = f.stem.split("-")[1:]
    rows.append((int(pair), version, float(best[2]), best[1], chose.get("n=1 tree:16", 0), chose.get("n=1 chain:8", 0),
                 entry["tree:16"] / entry["chain:8"], true["tree:16"] / true["chain:8"]))
rows.sort()
for pair, version, ratio, best, t16, c8, entry, true in rows:
    print(f"pair {pair} {version:4s} auto / best fixed ({best}) {ratio:.3f}; tree:16 {t16:3d} windows, chain:8 {c8:3d}; "
          f"tree:16 / chain:8 entry {entry:.2f} (fixed windows {true:.2f})")
for version in sorted({r[1] for r in rows}):
    rs = [r for r in rows if r[1] == version]
    print(f"{version:4s} {len(rs)} runs: auto / best fixed mean {statistics.mean(r[2] for r in rs):.3f} "
          f"(min {min(r[2] for r in rs):.3f}), tree:16 windows mean {statistics.mean(r[4] for r in rs):.0f}, "
          f"runs with tree:16 in its measurement windows only (<= 20) {sum(r[4] <= 20 for r in rs)}")
