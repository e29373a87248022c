"""Host time auto's budget takes per window (CPU, batch N, host loop): each AutoBudget method timed (outermost calls).
`budget_time.py SIZE PROMPTS [inner]`; with `inner` (fifteenth session), also the time inside each of the budget's
internals, inclusive (pricing, take-in, estimates, the cost table's observe and overhead fit); more internals after
`inner` by name (sixteenth session)."""
import json, sys, time, collections
from pathlib import Path
import torch
from dflash_trt import SamplingParams
from dflash_trt.bench.datasets import encode_prompt
from dflash_trt.engines.torch_engine import TorchEngine
from dflash_trt.spec import budget as B
torch.set_num_threads(1)
size, n = int(sys.argv[1]), int(sys.argv[2])
T = "tests/fixtures/gsm8k-tiny/"
e = TorchEngine.from_pretrained(T + "target", T + "drafter", device="cpu", max_batch_size=size, max_seq_len=512)
turns = [json.loads(l)["turns"][0] for l in Path("data/prompts/eagle_gsm8k.jsonl").read_text().splitlines()][:n]
prompts = [encode_prompt(e.tokenizer, t, 512 - 128)[0] for t in turns]
p = SamplingParams(max_new_tokens=128)
e.generate(prompts[:size], p, draft="auto")
acc = collections.Counter(); calls = collections.Counter(); depth = [0]
inner = collections.Counter(); inner_calls = collections.Counter()
def timed(cls, name, total, count, outermost):
    """cls.name timed into total/count: its outermost calls only (the budget's public methods call each other), or
    every call, inclusive (the internals)."""
    f = getattr(cls, name)
    def g(*a, **k):
        depth[0] += outermost; t = time.perf_counter()
        try: return f(*a, **k)
        finally:
            depth[0] -= outermost
            if not outermost or depth[0] == 0: total[name] += time.perf_counter() - t; count[name] += 1
    setattr(cls, name, g)
for name in ["choose", "choose_ahead", "observe_window", "observe_time", "prepare", "needs_context", "hold", "held", "defers_context", "forget"]:
    if hasattr(B.AutoBudget, name):
        timed(B.AutoBudget, name, acc, calls, True)
if "inner" in sys.argv[3:]:
    for cls, names in [(B.AutoBudget, ["_priced", "_take_in", "_estimates", "_depth_tables", "_expected_tokens",
                                       "_fade", "_count_steps", "_batch_key", "_at_caps"] + sys.argv[4:]),
                       (B.CostTable, ["observe", "_fit_overhead", "costs", "_entries", "observe_probe"])]:
        for name in names:
            timed(cls, name, inner, inner_calls, False)
reads = [0]; orig = e.step_runner.read
def read(*a, **k): reads[0] += 1; return orig(*a, **k)
e.step_runner.read = read
t = time.perf_counter()
for i in range(0, n, size):
    e.generate(prompts[i:i + size], p, draft="auto")
wall = time.perf_counter() - t
tot = sum(acc.values())
print(f"batch {size}: {reads[0]} windows, {1e3 * wall / reads[0]:.3f} ms per window; budget {1e6 * tot / reads[0]:.1f} us per window "
      f"({100 * tot / wall:.2f} % of the time):", {k: (calls[k], round(1e6 * v / reads[0], 1)) for k, v in acc.most_common()})
for k, v in inner.most_common():
    print(f"  inside {k:18s} calls {inner_calls[k]:5d}  us/window {1e6 * v / reads[0]:6.1f}  us/call {1e6 * v / inner_calls[k]:6.1f}")
