"""Means per (kind, size, version) of replay_ratios.py's lines (replays.sh, replays_new.sh, s29's replays.sh, s31's
cost_replays.sh, whose recorded cost-replays-*.txt lack auto / AR): in this directory's replays*.txt, in DIR's, or in
the FILEs given. `python bench/results/2026-11-28-cpu-s28/summarize_replays.py [DIR | FILE...]`."""
import collections, re, statistics, sys
from pathlib import Path
rows = collections.defaultdict(list)
args = [Path(a) for a in sys.argv[1:]] or [Path(__file__).resolve().parent]
files = [f for a in args for f in (sorted(a.glob("replays*.txt")) if a.is_dir() else [a])]
for f in files:
    for line in f.read_text().splitlines():
        m = re.match(r"seed (\d+) (\S+) (\w+)\s+(\d+) (?:auto/AR ([0-9.]+) )?auto/best fixed \((\S+)\) ([0-9.]+)", line)
        if m:
            rows[(m[3], int(m[4]), m[2])].append((None if m[5] is None else float(m[5]), float(m[7])))
for k in sorted(rows):
    a = rows[k]
    ar = [x for x, _ in a if x is not None]
    print(f"{k[0]:11s} {k[1]:2d} {k[2]:10s} n={len(a)} auto/AR {f'{statistics.mean(ar):.3f}' if ar else '-'} "
          f"auto/best fixed {statistics.mean(y for _, y in a):.4f} (min {min(y for _, y in a):.3f}, "
          f"below 0.95: {sum(y < 0.95 for _, y in a)})")
