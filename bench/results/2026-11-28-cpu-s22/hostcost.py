"""Twenty-second session: where auto's extra time goes at batch 1 (CPU). One engine, 40 eagle_gsm8k prompts x 128
tokens, generate() per prompt, the modes interleaved (rotated per prompt). Prints per mode tok/s, each AutoBudget
method's own time (outermost and nested calls alike: `inner` adds the internals, which double-count), GC pauses, and
SpecStep.launch times per draft (on the CPU the launch runs the window's steps). Options: `force` (auto does all its
bookkeeping but every window runs tree:16: the bookkeeping's cost against fixed tree:16, choices aside), NAME=VALUE
(a spec.budget module constant), `freeze` (gc.freeze after loading).
`PYTHONPATH=. python bench/results/2026-11-28-cpu-s22/hostcost.py [PROMPTS] [MODES] [force] [inner] [NAME=VALUE]`"""
import collections, gc, sys, time
import torch
from dflash_trt import SamplingParams
from dflash_trt.bench.datasets import encode_prompt, load_prompt_set
from dflash_trt.engines.torch_engine import TorchEngine
from dflash_trt.spec import budget as B

torch.set_num_threads(1)
F = "tests/fixtures/gsm8k-tiny"
N = int(sys.argv[1]) if len(sys.argv) > 1 else 40
modes = sys.argv[2].split(",") if len(sys.argv) > 2 else ["tree:16", "auto", "chain:8"]
freeze = "freeze" in sys.argv
for a in sys.argv[3:]:
    if "=" in a:
        k, v = a.split("="); setattr(B, k, type(getattr(B, k))(v)); print("set", k, v)
eng = TorchEngine.from_pretrained(F + "/target", F + "/drafter", max_batch_size=1, max_seq_len=512)
turns = load_prompt_set("data/prompts/eagle_gsm8k.jsonl", N).turns
prompts = [encode_prompt(eng.tokenizer, t, 384)[0] for t in turns]
params = SamplingParams(max_new_tokens=128)
eng.generate(prompts[:1], SamplingParams(max_new_tokens=8), draft="auto")
for m in modes:
    eng.generate(prompts[:1], params, draft=m)
eng.draft_curve, eng.tree_curves = None, {}
eng.draft_calibration = B.Calibration()
cur = [None]
spent = collections.defaultdict(float)
calls = collections.Counter()
depth = [0]
def wrap(name):  # outermost calls only (the budget's public methods call each other: prepare inside choose)
    f = getattr(B.AutoBudget, name)
    def g(self, *a, **k):
        depth[0] += 1
        t = time.perf_counter()
        try:
            return f(self, *a, **k)
        finally:
            depth[0] -= 1
            if depth[0] == 0:
                spent[(cur[0], name)] += time.perf_counter() - t; calls[(cur[0], name)] += 1
    setattr(B.AutoBudget, name, g)
def wrapc(cls, name):
    f = getattr(cls, name)
    def g(self, *a, **k):
        t = time.perf_counter()
        try:
            return f(self, *a, **k)
        finally:
            spent[(cur[0], cls.__name__ + "." + name)] += time.perf_counter() - t; calls[(cur[0], cls.__name__ + "." + name)] += 1
    setattr(cls, name, g)
if "inner" in sys.argv:
    for name in ["_priced", "_take_in", "_prepare_tables", "_expected_tokens", "_calibrated", "_choose", "_unmeasured",
                 "_hold_drafting"]:
        wrapc(B.AutoBudget, name)
    for name in ["costs", "observe", "_fit_overhead"]:
        wrapc(B.CostTable, name)
for name in ["choose", "observe_window", "prepare", "observe_time", "hold", "held", "needs_context", "forget",
             "defers_context"]:
    wrap(name)
if "force" in sys.argv:
    orig = B.AutoBudget._choose
    def forced(self, *a, **k):
        orig(self, *a, **k)
        return B.Draft("tree", 16)
    B.AutoBudget._choose = forced
    print("forced tree:16")
gct = collections.defaultdict(float); gcn = collections.Counter(); gstart = [0]
def cb(phase, info):
    if phase == "start": gstart[0] = time.perf_counter()
    else:
        gct[(cur[0], info["generation"])] += time.perf_counter() - gstart[0]; gcn[(cur[0], info["generation"])] += 1
gc.collect()
if freeze: gc.freeze()
gc.callbacks.append(cb)
lt = collections.defaultdict(list)
_launch = eng.step_runner.launch
def tl(*a, **k):
    t = time.perf_counter(); r = _launch(*a, **k); lt[(cur[0], a[1], k.get('tree'))].append(time.perf_counter() - t); return r
eng.step_runner.launch = tl
secs = collections.defaultdict(float); toks = collections.Counter()
for i, p in enumerate(prompts):
    order = modes[i % len(modes):] + modes[: i % len(modes)]
    for m in order:
        cur[0] = m
        t = time.perf_counter()
        r = eng.generate([p], params, draft=m)
        secs[m] += time.perf_counter() - t
        toks[m] += len(r[0].token_ids)
gc.callbacks.remove(cb)
for m in modes:
    print(f"{m}: {toks[m]/secs[m]:.1f} tok/s, {secs[m]:.3f} s; budget calls "
          + ", ".join(f"{n} {1e3*spent[(m,n)]:.1f} ms/{calls[(m,n)]}" for (mm, n) in sorted(spent) if mm == m)
          + "; gc " + ", ".join(f"gen{g} {1e3*gct[(m,g)]:.1f} ms/{gcn[(m,g)]}" for (mm, g) in sorted(gct) if mm == m))
import statistics as S
for key, v in sorted(lt.items(), key=str):
    if len(v) > 20: print("launch", key, f"median {1e3*S.median(v):.3f} mean {1e3*S.fmean(v):.3f} n {len(v)}")
public = ["choose", "observe_window", "prepare", "observe_time", "hold", "held", "needs_context", "forget", "defers_context"]
wins = sum(len(v) for key, v in lt.items() if key[0] == "auto")
total = sum(v for (m, n), v in spent.items() if m == "auto" and n in public)
print(f"auto's budget calls (outermost) {1e3 * total:.1f} ms over {wins} windows: {1e6 * total / max(wins, 1):.0f} us a window, "
      f"{100 * total / secs['auto']:.2f} % of auto's time")
print("auto/" + modes[0], f"{(toks['auto']/secs['auto'])/(toks[modes[0]]/secs[modes[0]]):.3f}")
