"""Per draft at one request: how its cost entry moved over a traced run (cost_trace.py's JSON lines), split into the
moves made as the anchor (slow) and as a rarer draft against the anchor's windows; the largest single moves listed.
`python entry_moves.py traces/trace-N.jsonl.gz [top]`"""
import collections, gzip, json, math, sys
recs = [json.loads(line) for line in (gzip.open if sys.argv[1].endswith(".gz") else open)(sys.argv[1], "rt")]
top = int(sys.argv[2]) if len(sys.argv) > 2 else 8
calls, moves, total = 0, [], collections.defaultdict(lambda: [0.0, 0.0, 0, 0])
for r in recs:
    if "call" in r:
        calls += 1
        continue
    k = r["k"]
    m = math.log(r["after"] / r["entry"])
    is_anchor = r["anchor"] is None or r["anchor"][0] == k
    t = total[k]
    if is_anchor:
        t[0] += m; t[2] += 1
    else:
        t[1] += m; t[3] += 1
    if not is_anchor and abs(m) > 0.01:
        res = math.log(r["ms"] / ((r["entry"] + r["over"]) * r["drift"]))
        moves.append((abs(m), calls, k, round(m, 3), r["ms"], round(res, 3), r["anchor"], r["seen"]))
print("draft: log move as anchor (windows) / as rarer draft (windows)")
for k, (a, b, na, nb) in sorted(total.items()):
    print(f"  {k}: {a:+.3f} ({na}) / {b:+.3f} ({nb})  total x{math.exp(a + b):.3f}")
print("largest rarer-draft moves: |move|, call, draft, move, ms, residual, anchor [draft, seen, kept, window], seen")
for m in sorted(moves, reverse=True)[:top]:
    print("  ", m[1:])
