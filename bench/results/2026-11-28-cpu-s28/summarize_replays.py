"""Means per (kind, size, version) of replays*.txt lines in this directory (replays.sh, replays_new.sh), or in DIR:
`python bench/results/2026-11-28-cpu-s28/summarize_replays.py [DIR]`."""
import collections, re, statistics, sys
from pathlib import Path
rows = collections.defaultdict(list)
here = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).resolve().parent
for f in sorted(here.glob("replays*.txt")):
    for line in f.read_text().splitlines():
        m = re.match(r"seed (\d+) (\S+) (\w+)\s+(\d+) auto/AR ([0-9.]+) auto/best fixed \((\S+)\) ([0-9.]+)", line)
        if m:
            rows[(m[3], int(m[4]), m[2])].append((float(m[5]), float(m[7])))
for k in sorted(rows):
    a = rows[k]
    print(f"{k[0]:11s} {k[1]:2d} {k[2]:10s} n={len(a)} auto/AR {statistics.mean(x for x, _ in a):.3f} "
          f"auto/best fixed {statistics.mean(y for _, y in a):.3f} (min {min(y for _, y in a):.3f})")
