"""Means of c16_one.py's SUMMARY lines in a queue's output, by code version (`== c16 old|new` headers), and the pairs
in the order they ran. `python bench/results/2026-11-28-cpu-s27/summarize_c16.py QUEUE.txt`"""
import re, sys
cur, runs = None, []
for line in open(sys.argv[1]):
    if line.startswith('== c16 '):
        cur = line.split()[-1]
    m = re.search(r'SUMMARY auto/AR ([0-9.]+), probes (\d+).*= ([0-9.]+) %', line)
    if m:
        runs.append((cur, float(m[1]), int(m[2]), float(m[3])))
for v in ('old', 'new'):
    r = [x for x in runs if x[0] == v]
    print(f"{v}: auto/AR {[x[1] for x in r]} mean {sum(x[1] for x in r) / len(r):.3f}; probes mean "
          f"{sum(x[2] for x in r) / len(r):.1f}; their loss mean {sum(x[3] for x in r) / len(r):.1f} % of auto's decode")
pairs = [runs[i:i + 2] for i in range(0, len(runs) - 1, 2)]
better = sum(1 for a, b in pairs if {a[0], b[0]} == {'old', 'new'} and
             (a[1] if a[0] == 'new' else b[1]) > (b[1] if a[0] == 'new' else a[1]))
print(f"pairs (in running order): new better in {better} of {len(pairs)}")
