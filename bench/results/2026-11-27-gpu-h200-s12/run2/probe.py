"""GPU probe (session 12): where auto's extra non-window time goes at batch 8. Per prefill call: the wait for queued
work before it, the target forward, the drafter intake, the sampling, the rest; per mode the generate() totals."""
import collections, json, statistics, sys, time
from pathlib import Path
import torch
import dflash_trt
from dflash_trt import SamplingParams
from dflash_trt.bench.datasets import encode_prompt
from dflash_trt.engines.torch_engine import TorchEngine
from dflash_trt.spec import budget as B
print("dflash_trt from", dflash_trt.__file__)
dev, size, nb = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
variant = sys.argv[4] if len(sys.argv) > 4 else ""
torch.set_num_threads(1)
T = "tests/fixtures/gsm8k-tiny/"
e = TorchEngine.from_pretrained(T + "target", T + "drafter", device=dev, max_batch_size=size, max_seq_len=512)
turns = [json.loads(l)["turns"][0] for l in Path("data/prompts/eagle_gsm8k.jsonl").read_text().splitlines()][:nb * size]
prompts = [encode_prompt(e.tokenizer, t, 512 - 128)[0] for t in turns]
batches = [prompts[i:i + size] for i in range(0, len(prompts), size)]
e.generate(batches[0][:1], SamplingParams(max_new_tokens=8), draft="auto")
sync = (lambda: torch.cuda.synchronize()) if dev.startswith("cuda") else (lambda: None)
sr = e.step_runner
seg = collections.defaultdict(float)
def timed(name, fn):
    def w(*a, **k):
        sync(); t = time.perf_counter(); r = fn(*a, **k); sync(); seg[name] += time.perf_counter() - t; return r
    return w
sr.target.forward = timed("target", sr.target.forward)
if sr.drafter is not None:
    sr.drafter.ingest = timed("ingest", sr.drafter.ingest)
stats = collections.defaultdict(list)
cur = [None]
orig = sr.prefill
def prefill(reqs, spec, defer_context=False):
    t = time.perf_counter(); sync(); waited = time.perf_counter() - t
    seg.clear(); t = time.perf_counter(); r = orig(reqs, spec, defer_context); total = time.perf_counter() - t
    stats[cur[0]].append((len(reqs), spec, defer_context, waited, total, seg["target"], seg["ingest"]))
    return r
sr.prefill = prefill
dlog = collections.Counter()
if hasattr(B.AutoBudget, "defers_context"):
    od = B.AutoBudget.defers_context
    def dc(self, n, length=None):
        r = False if variant == "nodefer" else od(self, n, length); dlog[(n, r)] += 1; return r
    B.AutoBudget.defers_context = dc
p = SamplingParams(max_new_tokens=128)
modes = ["ar", "tree:32", "auto"]
for m in modes:  # warm-up
    e.generate(batches[0], p, **({"use_drafter": False} if m == "ar" else {"draft": m}))
stats.clear(); dlog.clear()
tot = collections.defaultdict(float); toks = collections.Counter()
for rep in range(2):
    for i, b in enumerate(batches):
        for m in modes[i % 3:] + modes[:i % 3]:
            cur[0] = m; t = time.perf_counter()
            res = e.generate(b, p, **({"use_drafter": False} if m == "ar" else {"draft": m}))
            tot[m] += time.perf_counter() - t; toks[m] += sum(len(r.token_ids) for r in res)
for m in modes:
    s = stats[m]
    f = lambda j: 1e3 * statistics.mean(x[j] for x in s)
    print(f"{variant or 'current'} {m}: {toks[m] / tot[m]:.0f} tok/s, {1e3 * tot[m] / len(s):.1f} ms per generate; "
          f"prefill calls {len(s)} (defer {sum(x[2] for x in s)}), mean ms: wait {f(3):.2f} total {f(4):.2f} "
          f"target {f(5):.2f} ingest {f(6):.2f}")
print("defers_context calls (n, result):", dict(dlog))
