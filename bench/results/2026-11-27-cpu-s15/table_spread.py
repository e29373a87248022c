"""Fresh process: time the batch-1 cost table as the engine does (measure_costs), keeping every timing; print each
entry's 3 timings and the ratios that decide at batch 1 (chain:8 / tree:16 / chain:16 against chain:8), median vs min."""
import sys, json, torch
from dflash_trt.engines.torch_engine import TorchEngine
from dflash_trt.spec import step as S
from dflash_trt.spec.budget import auto_drafts, Draft
torch.set_num_threads(1)
T = "tests/fixtures/gsm8k-tiny/"
e = TorchEngine.from_pretrained(T + "target", T + "drafter", device="cpu", max_batch_size=int(sys.argv[1]), max_seq_len=512)
runner = e.step_runner
raw = {}
orig = runner._timed_step
cur = {}
import collections
rec = collections.defaultdict(list)
# wrap measure_costs's loop: record the timed (last) step per shape per round: patch _timed_step to log every call
calls = []
def timed(n, k, spec, length, tree):
    t = orig(n, k, spec, length, tree); calls.append(((n, k, tree, length), t)); return t
runner._timed_step = timed
table = runner.measure_costs(auto_drafts(16, e.auto_trees))
# the timed ones: the last call of each shape's run of calls
runs = []
for key, t in calls:
    if runs and runs[-1][0] == key: runs[-1][1].append(t)
    else: runs.append((key, [t]))
for key, ts in runs: rec[key].append(ts[-1])
out = {}
for (n, k, tree, length), ts in rec.items():
    out[f"n{n} {'tree' if tree else 'chain'}:{k} L{length}"] = [round(1e3 * t, 3) for t in ts]
print(json.dumps(out))
