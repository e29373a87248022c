"""Summary of cost_replays.sh output: per code copy and batch size, auto / best fixed mean, min, runs below 0.95."""
import collections, re, statistics, sys
vals = collections.defaultdict(list)
for line in open(sys.argv[1]):
    m = re.match(r"seed (\d+) (\S+) batch\s+(\d+) auto/best fixed \((\S+)\) ([0-9.]+)", line)
    if m:
        vals[(m[2], int(m[3]))].append(float(m[5]))
for (v, n), xs in sorted(vals.items()):
    print(f"{v:10s} batch {n:2d}: mean {statistics.mean(xs):.4f} min {min(xs):.3f} below 0.95: {sum(x < 0.95 for x in xs)} of {len(xs)}")
