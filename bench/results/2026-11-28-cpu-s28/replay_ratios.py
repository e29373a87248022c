"""The replay scripts' line for each `batch` / `concurrency` line of scripts/sim_draft_budget.py on stdin: auto / AR
and auto / the best fixed draft, labelled with the seed and the code copy's name.
`... sim_draft_budget.py ... | python bench/results/2026-11-28-cpu-s28/replay_ratios.py SEED NAME`
(replays.sh and replays_new.sh here, s29's replays.sh, s31's cost_replays.sh; summarize_replays.py reads the lines)."""
import re, sys

seed, name = sys.argv[1], sys.argv[2]
for line in sys.stdin:
    if not line.startswith(("batch", "concurrency")):
        continue
    kind, n = line.split()[0], line.split()[1].rstrip(":")
    vals = dict(re.findall(r"(\S+) ([0-9.]+)x", line))
    fixed = {k: float(v) for k, v in vals.items() if k not in ("auto", "oracle", "ar")}
    best = max(fixed, key=fixed.get)
    auto = float(vals["auto"])
    print(f"seed {seed} {name} {kind:11s} {n:>2s} auto/AR {auto:.3f} auto/best fixed ({best}) {auto / fixed[best]:.3f}")
