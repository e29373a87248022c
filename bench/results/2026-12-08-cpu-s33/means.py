"""Standard bench runs by means: per code copy (bench-<name>-<i>/results.json in the DIRs) and batch size, each mode's
mean x AR over the runs, auto / the fixed mode best by mean, and the mean of the per-run auto / best fixed.
`python means.py DIR...` (section 1 of NOTES.md: the s31 and s32 directories)."""
import collections, glob, json, re, statistics as st, sys

runs = collections.defaultdict(list)
for d in sys.argv[1:]:
    for p in glob.glob(f"{d}/bench-*-*/results.json"):
        name = re.match(r"bench-(.+)-\d+$", p.split("/")[-2]).group(1)
        runs[name].append(json.load(open(p))["results"])
for size in ("1", "8"):
    for name, rs in sorted(runs.items()):
        rows = [{m: v["vs_ar"] for m, v in r[size]["rows"].items()} for r in rs]
        fixed = [m for m in rows[0] if m not in ("ar", "auto")]
        means = {m: st.mean(x[m] for x in rows) for m in fixed + ["auto"]}
        best = max(fixed, key=means.get)
        per_run = st.mean(x["auto"] / max(x[m] for m in fixed) for x in rows)
        print(f"batch {size} {name:5} n={len(rows):2} " + " ".join(f"{m} {v:.3f}" for m, v in means.items())
              + f" | auto / {best} (best by mean) {means['auto'] / means[best]:.3f}, per-run auto / best fixed {per_run:.3f}")
