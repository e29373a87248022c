"""Twenty-fifth session: the OpenAI server Pareto runs of this directory side by side: per run, auto / AR and chain:8 /
AR total tok/s at c = 1 / 2 / 4 / 8 / 16, auto's AR share of steps (chain:1), and the means per code version.
`python bench/results/2026-11-28-cpu-s25/pareto_table.py [DIR]` (DIR: another directory's pareto-* runs; s28's).
"""
import json, statistics, sys
from pathlib import Path

here = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).parent
runs = {}
for d in sorted(here.glob("pareto-*/results.json")):
    r = json.load(open(d))["results"]
    tot = {(x["mode"], x["concurrency"]): x for x in r}
    cs = sorted({x["concurrency"] for x in r})
    row = {}
    for c in cs:
        ar = tot[("ar", c)]["total_tokens_per_s"]
        auto = tot[("auto", c)]
        steps = auto["draft_steps"]
        row[c] = (auto["total_tokens_per_s"] / ar, tot[("chain:8", c)]["total_tokens_per_s"] / ar,
                  steps.get("chain:1", 0) / sum(steps.values()))
    runs[d.parent.name] = row
    print(f"{d.parent.name:12s} auto/AR " + " ".join(f"{row[c][0]:.2f}" for c in cs)
          + " | chain:8/AR " + " ".join(f"{row[c][1]:.2f}" for c in cs)
          + " | auto AR share " + " ".join(f"{row[c][2]:.2f}" for c in cs))
for v in ("old", "base", "new"):
    rs = [row for name, row in runs.items() if name.startswith(f"pareto-{v}")]
    if rs:
        cs = sorted(rs[0])
        print(f"{v} mean of {len(rs)}: auto/AR " + " ".join(f"{statistics.mean(r[c][0] for r in rs):.3f}" for c in cs)
              + " | chain:8/AR " + " ".join(f"{statistics.mean(r[c][1] for r in rs):.3f}" for c in cs))
