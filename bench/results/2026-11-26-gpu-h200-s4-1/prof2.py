"""Per window on the GPU: where auto's extra host time sits, tree:32 vs auto, timestamps per window (not medians of
parts): late = host return of the read's sync - (launch start + device span); device idle between windows; GC."""
import gc, json, statistics, sys, time
import torch
from dflash_trt import SamplingParams
from dflash_trt.engines import scheduler as sm
from dflash_trt.engines.torch_engine import TorchEngine
from dflash_trt.bench.datasets import encode_prompt
F = "tests/fixtures/gsm8k-tiny/"
bs = int(sys.argv[1]) if len(sys.argv) > 1 else 1
FIX = sys.argv[2] if len(sys.argv) > 2 else "tree:32"
NP = int(sys.argv[3]) if len(sys.argv) > 3 else 32
cuda = torch.cuda.is_available()
e = TorchEngine.from_pretrained(F + "target", F + "drafter", device=("cuda" if cuda else "cpu"), max_batch_size=max(bs, 1), max_seq_len=512)
turns = [json.loads(l)["turns"][0] for l in open("data/prompts/eagle_gsm8k.jsonl")][:NP]
prompts = [encode_prompt(e.tokenizer, t, 384)[0] for t in turns]
batches = [prompts[i:i + bs] for i in range(0, len(prompts), bs)]
p = SamplingParams(max_new_tokens=128)
for b in batches[:6]:
    for m in (FIX, "auto"):
        e.generate(b, p, draft=m)
r = e.step_runner
rec, cur = [], {}
P = time.perf_counter
D = sm.BatchScheduler._decode
def decode(self, batch):
    cur.clear(); cur["t0"] = P(); cur["gc"] = 0.0; cur["gcn"] = 0
    out = D(self, batch)
    cur["t_end"] = P(); cur["n"] = len(batch)
    rec.append(dict(cur))
    return out
sm.BatchScheduler._decode = decode
L0, R0 = r.launch, r.read
def launch(slots, k, *a, **kw):
    e0 = torch.cuda.Event(enable_timing=True) if cuda else None
    if cuda: e0.record()
    cur["t_ls"] = P(); cur["k"] = k; cur["tree"] = kw.get("tree", False)
    out = L0(slots, k, *a, **kw)
    cur["t_le"] = P()
    if cuda:
        e1 = torch.cuda.Event(enable_timing=True); e1.record(); cur["ev"] = (e0, e1)
    return out
def read(launched):
    cur["t_rs"] = P()
    if cuda: torch.cuda.current_stream().synchronize()
    cur["t_sync"] = P()
    out = R0(launched)
    cur["t_re"] = P()
    return out
r.launch, r.read = launch, read
O = sm.BatchScheduler._observe
def observe(self, now=False):
    t = P(); O(self, now); cur["obs"] = cur.get("obs", 0) + P() - t
sm.BatchScheduler._observe = observe
_gct = [0.0]
def gccb(phase, info):
    if phase == "start": _gct[0] = P()
    else:
        cur["gc"] = cur.get("gc", 0.0) + P() - _gct[0]; cur["gcn"] = cur.get("gcn", 0) + 1
        cur.setdefault("gcg", []).append(info["generation"])
gc.callbacks.append(gccb)
def pct(xs, q):
    xs = sorted(xs); return xs[min(len(xs) - 1, int(q * len(xs)))] if xs else float("nan")
def report(m, tot):
    rows = [x for x in rec if "ev" in x or not cuda]
    for x in rows:
        x["span"] = x["ev"][0].elapsed_time(x["ev"][1]) * 1e-3 if cuda else x["t_re"] - x["t_ls"]
        x["late"] = x["t_sync"] - (x["t_ls"] + x["span"])
    idle = []
    for a, b in zip(rows, rows[1:]):
        if cuda and b["t0"] - a["t_end"] < 0.01:  # same generate
            idle.append(a["ev"][1].elapsed_time(b["ev"][0]) * 1e-3)
    def st(key, f=lambda x, k: x.get(k, 0.0)):
        v = [1e6 * f(x, key) for x in rows]
        return f"{key} mean {statistics.mean(v):.0f} med {statistics.median(v):.0f} p90 {pct(v, .9):.0f}"
    d = lambda x, k: x[k]
    parts = {
        "window": lambda x, k: x["t_end"] - x["t0"],
        "pre": lambda x, k: x["t_ls"] - x["t0"],
        "launch": lambda x, k: x["t_le"] - x["t_ls"],
        "between": lambda x, k: x["t_rs"] - x["t_le"],
        "span": d, "late": d,
        "readpost": lambda x, k: x["t_re"] - x["t_sync"],
        "post": lambda x, k: x["t_end"] - x["t_re"],
        "gc": d,
    }
    drafts = {}
    for x in rows: drafts[(x["k"], x["tree"])] = drafts.get((x["k"], x["tree"]), 0) + 1
    print(f"== {m} b{bs}: {len(rows)} windows {tot*1e3:.0f} ms drafts {drafts} gc runs {sum(x.get('gcn',0) for x in rows)} gens {sorted(set(g for x in rows for g in x.get('gcg', [])))}")
    print("   " + " | ".join(st(k, f) for k, f in parts.items()))
    if idle: print(f"   device idle between windows: mean {1e6*statistics.mean(idle):.0f} med {1e6*statistics.median(idle):.0f} p90 {1e6*pct(idle,.9):.0f} us")
    lates = sorted(1e6 * x["late"] for x in rows)
    print("   late percentiles", [round(pct(lates, q)) for q in (.1, .25, .5, .75, .9, .99)])
    sub = [x for x in rows if (x["k"], x["tree"]) == (32, True)]
    if sub and m == "auto":
        print("   auto tree:32 windows only: " + " | ".join(st(k, f).replace(k, k) for k, f in parts.items() if k in ("window", "pre", "launch", "span", "late", "post")).replace("mean", "m") + f" n={len(sub)}" if False else "")
        for k in ("window", "pre", "launch", "span", "late", "post"):
            v = [1e6 * parts[k](x, k) for x in sub]
            print(f"   tree:32-only {k}: mean {statistics.mean(v):.0f} med {statistics.median(v):.0f}")
for mode in sys.argv[4].split(",") if len(sys.argv) > 4 else ("base",):
    print("##### variant", mode, flush=True)
    if mode == "nogc": gc.disable()
    if mode == "freeze": gc.enable(); gc.collect(); gc.freeze()
    for rep in range(2):
        for m in (FIX, "auto"):
            rec.clear()
            t0 = P()
            for b in batches: e.generate(b, p, draft=m)
            report(m, P() - t0)
    gc.enable(); gc.unfreeze()
