"""Twenty-fifth session: the drafter's acceptance by where in the answer the step is (s24's sim-fresh traces: anchor t =
tokens emitted before the step, up to each request's end): per-depth acceptance (depth j accepted given 1..j-1 were)
and the mean τ of chain:8 for anchors in the first 16 / 64 tokens, at 64-127, and all.
`python bench/results/2026-11-28-cpu-s25/trace_by_position.py`"""
import json

t = json.load(open('bench/results/2026-11-28-cpu-s24/sim-fresh/traces.json'))


def curve(sel):
    reached, n, tau = [0] * 17, 0, 0
    for r in t:
        for i, L in enumerate(r['chain'][:r['tokens']]):
            if sel(i):
                n += 1
                tau += min(L, 7) + 1
                for k in range(min(L, 15) + 1):
                    reached[k] += 1
    return n, [round(reached[k + 1] / reached[k], 3) for k in range(8)], round(tau / n, 2)


for name, sel in [("t < 16", lambda i: i < 16), ("t < 64", lambda i: i < 64), ("64 <= t < 128", lambda i: 64 <= i < 128),
                  ("all", lambda i: True)]:
    n, acc, tau = curve(sel)
    print(f"{name:14s} {n:5d} anchors, per-depth acceptance {acc}, chain:8 tau {tau}")
