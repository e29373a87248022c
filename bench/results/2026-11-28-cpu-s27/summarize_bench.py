"""The standard bench runs of this directory (bench-*.log), in the order they ran: per run, auto / best fixed at
batch 1 and 8, batch 8's auto / AR, and auto's windows at n = 8 by draft; then means per code version (the name's
second part: old, varB, new = variant A at spread 0.25, new-s05 = at 0.5).
`python bench/results/2026-11-28-cpu-s27/summarize_bench.py [DIR]` (DIR: another results directory's bench-*.log;
s28's runs use it so)."""
import ast, re, statistics, sys
from pathlib import Path

here = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).resolve().parent
rows = []
for f in here.glob("bench-*.log"):
    text = f.read_text()
    best = re.findall(r"auto / best fixed \(([^)]*)\): ([0-9.]+); auto chose (\{[^}]*\})", text)
    b8 = re.search(r"^batch 8 \(cpu.*auto [0-9.]+ tok/s \(([0-9.]+)x AR", text, re.M)
    if len(best) < 2 or not b8:
        continue  # (a run stopped before batch 8)
    run = int(f.stem.rsplit("-", 1)[1])
    version = f.stem[len("bench-"):f.stem.rindex("-")]
    chose8 = ast.literal_eval(best[1][2])
    at8 = {k.split()[1]: v for k, v in chose8.items() if k.startswith("n=8 ")}
    trees1 = ast.literal_eval(best[0][2]).get("n=1 tree:16", 0)  # batch 1's tree:16 windows
    rows.append((run, version, float(best[0][1]), best[0][0], float(best[1][1]), float(b8[1]), at8, trees1))
rows.sort()
for run, version, b1, best1, b8, ar8, at8, trees1 in rows:
    print(f"run {run:2d} {version:8s} batch 1 {b1:.3f} (best {best1:7s}, tree:16 {trees1:3d} windows) batch 8 {b8:.3f}, "
          f"auto / AR {ar8:.3f}; n=8 {at8}")
for version in sorted({r[1] for r in rows}):
    rs = [r for r in rows if r[1] == version]
    print(f"{version:8s} {len(rs)} runs: batch 1 mean {statistics.mean(r[2] for r in rs):.3f}, batch 8 mean "
          f"{statistics.mean(r[4] for r in rs):.3f}, batch 8 auto / AR mean {statistics.mean(r[5] for r in rs):.3f}")
