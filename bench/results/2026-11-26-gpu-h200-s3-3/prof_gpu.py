"""Where an auto window's extra host time goes on the GPU: per window, the scheduler's phases, tree:32 vs auto, b1."""
import cProfile, io, json, pstats, statistics, sys, time
import torch
from dflash_trt import SamplingParams
from dflash_trt.engines import scheduler as sm
from dflash_trt.engines.torch_engine import TorchEngine
from dflash_trt.bench.datasets import encode_prompt
F = "tests/fixtures/gsm8k-tiny/"
bs = int(sys.argv[1]) if len(sys.argv) > 1 else 1
FIX = sys.argv[2] if len(sys.argv) > 2 else "tree:32"
e = TorchEngine.from_pretrained(F + "target", F + "drafter", device=("cuda" if torch.cuda.is_available() else "cpu"), max_batch_size=max(bs, 1), max_seq_len=512)
turns = [json.loads(l)["turns"][0] for l in open("data/prompts/eagle_gsm8k.jsonl")][:32]
prompts = [encode_prompt(e.tokenizer, t, 384)[0] for t in turns]
batches = [prompts[i:i + bs] for i in range(0, len(prompts), bs)]
p = SamplingParams(max_new_tokens=128)
for b in batches[:6]:
    for m in (FIX, "auto"):
        e.generate(b, p, draft=m)
r = e.step_runner
rec = []
cur = {}
def wrap(obj, name, key):
    f = getattr(obj, name)
    def g(*a, **kw):
        t = time.perf_counter()
        try:
            return f(*a, **kw)
        finally:
            cur[key] = cur.get(key, 0.0) + time.perf_counter() - t
    setattr(obj, name, g)
    return f
orig = {}
D = sm.BatchScheduler._decode
def decode(self, batch):
    t = time.perf_counter()
    cur.clear(); cur["start"] = t
    out = D(self, batch)
    cur["end"] = time.perf_counter()
    rec.append(dict(cur))
    return out
sm.BatchScheduler._decode = decode
L0 = r.launch
def launch(*a, **kw):
    e0 = torch.cuda.Event(enable_timing=True); e1 = torch.cuda.Event(enable_timing=True)
    e0.record(); t = time.perf_counter(); cur["pre"] = t - cur["start"]
    try:
        return L0(*a, **kw)
    finally:
        cur["launch"] = time.perf_counter() - t; e1.record(); cur["ev"] = (e0, e1)
if torch.cuda.is_available():
    r.launch = launch
else:
    orig["launch"] = wrap(r, "launch", "launch")
orig["read"] = wrap(r, "read", "read")
O = sm.BatchScheduler._observe
def observe(self, now=False):
    t = time.perf_counter(); O(self, now); cur["observe"] = cur.get("observe", 0) + time.perf_counter() - t
sm.BatchScheduler._observe = observe
from dflash_trt.spec import budget as bm
for cls in (bm.AutoBudget, bm.Fixed):
    for name in ("choose", "observe_time", "choose_ahead"):
        f = getattr(cls, name)
        def g(self, *a, _f=f, _k=name, **kw):
            t = time.perf_counter()
            try: return _f(self, *a, **kw)
            finally: cur[_k] = cur.get(_k, 0.0) + time.perf_counter() - t
        setattr(cls, name, g)
calls = {"choose": 0, "_choose": 0, "choose_ahead": 0}
for name in calls:
    f0 = getattr(bm.AutoBudget, name)
    def cnt(self, *a, _f=f0, _k=name, **kw):
        calls[_k] += 1
        return _f(self, *a, **kw)
    setattr(bm.AutoBudget, name, cnt)
for rep in range(2):
    for m in (FIX, "auto"):
        rec.clear(); calls.update(dict.fromkeys(calls, 0))
        t0 = time.perf_counter()
        for b in batches: e.generate(b, p, draft=m)
        tot = time.perf_counter() - t0
        gaps = [rec[i + 1]["start"] - rec[i]["end"] for i in range(len(rec) - 1)]
        for x in rec:
            x["gpu"] = x["ev"][0].elapsed_time(x["ev"][1]) * 1e-3 if "ev" in x else 0.0
        med = lambda k: 1e6 * statistics.median([x.get(k, 0.0) for x in rec])
        print(f"{m:8s} {len(rec)} windows, {tot*1e3:.0f} ms; per window median us: decode {1e6*statistics.median([x['end']-x['start'] for x in rec]):.0f}"
              f" choose {med('choose'):.0f} observe_time {med('observe_time'):.0f} ahead {med('choose_ahead'):.0f} launch {med('launch'):.0f} observe {med('observe'):.0f}"
              f" read {med('read'):.0f} pre-launch {med('pre'):.0f} calls {calls} gap-to-next {1e6*statistics.median(gaps):.0f} gpu-span {med('gpu'):.0f}", flush=True)
for m in (FIX, "auto"):
    pr = cProfile.Profile(); pr.enable()
    for b in batches[:16]: e.generate(b, p, draft=m)
    pr.disable()
    s = io.StringIO(); st = pstats.Stats(pr, stream=s); st.sort_stats("tottime"); st.print_stats(22)
    print("=====", m); print("\n".join(l[:170] for l in s.getvalue().splitlines() if l.strip())[:6000])
