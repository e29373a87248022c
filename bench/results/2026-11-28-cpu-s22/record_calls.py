"""(Twenty-second session: the seventeenth session's record.py with the calibration's aging clock, aged_at, recorded too: without it its replay's hold() differed in 7 of 378 calls.) (Seventeenth session: the calibration's sums recorded too.) Record every outermost AutoBudget call of a real run (args, result) and the shared state at the first budget's
creation; `replay.py` replays them against a tree's budget module and compares results and times them."""
import json, sys, copy, collections
from pathlib import Path
import torch
from dflash_trt import SamplingParams
from dflash_trt.bench.datasets import encode_prompt
from dflash_trt.engines.torch_engine import TorchEngine
from dflash_trt.spec import budget as B
torch.set_num_threads(1)
size, n, out = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
T = "tests/fixtures/gsm8k-tiny/"
e = TorchEngine.from_pretrained(T + "target", T + "drafter", device="cpu", max_batch_size=size, max_seq_len=512)
turns = [json.loads(l)["turns"][0] for l in Path("data/prompts/eagle_gsm8k.jsonl").read_text().splitlines()][:n]
prompts = [encode_prompt(e.tokenizer, t, 512 - 128)[0] for t in turns]
p = SamplingParams(max_new_tokens=128)
e.generate(prompts[:size], p, draft="auto")  # warm: the table measured, the curve started
ct = e.cost_table
state = {"seconds": [[k[0], k[1].kind, k[1].size] + list(k[2:]) + [v] for k, v in ct.seconds.items()],
         "drift": ct.drift, "probe_factor": ct.probe_factor, "switch": [[d.kind, d.size, v] for d, v in ct.switch.items()],
         "overhead": {str(k): v for k, v in ct.overhead.items()}, "fits": {str(k): list(v) for k, v in ct._fits.items()},
         "curve": [e.draft_curve.accepted.tolist(), e.draft_curve.trials.tolist(), e.draft_curve.version],
         "trees": {str(s): [t.tree.accepted.tolist(), t.tree.trials.tolist(), t.chain.accepted.tolist(), t.chain.trials.tolist()] for s, t in e.tree_curves.items()},
         "clock": [e.tree_clock.windows, e.tree_clock.since_s], "block": e.drafter.cfg.block_size if hasattr(e, "drafter") else None,
         "trees_list": list(e.auto_trees), "prior": e.draft_prior,
         "calibration": [[k if isinstance(k, str) else [k.kind, k.size], list(v)] for k, v in e.draft_calibration.sums.items()], "aged_at": e.draft_calibration.aged_at}
def enc(x):
    if isinstance(x, B.Draft): return {"D": [x.kind, x.size]}
    if isinstance(x, (list, tuple)): return [enc(v) for v in x]
    if isinstance(x, dict): return {k: enc(v) for k, v in x.items()}
    if isinstance(x, (bool, int, float, str)) or x is None: return x
    if hasattr(x, "item"): return x.item()
    raise TypeError(type(x))
log, ids, depth = [], {}, [0]
def fp(b):
    c = b.cost
    return json.loads(json.dumps([c.drift, c.probe_factor, b.curve.version, float(b.curve.trials.sum()), b.tree_clock.windows, b.tree_clock.since_s, b._at_one, b._held_s, b._probe_interval, float(b._counts.sum()), sorted(c.overhead.items()), sorted(c._fits.items()), len(c.seconds)]))
orig_init = B.AutoBudget.__post_init__
def init(self):
    orig_init(self); ids[id(self)] = len(ids); log.append(["new", ids[id(self)], self.block_size])
B.AutoBudget.__post_init__ = init
for name in ["choose", "choose_ahead", "commit_ahead", "hold", "held", "needs_context", "defers_context",
             "observe_window", "observe_time", "prepare", "forget"]:
    f = getattr(B.AutoBudget, name)
    def g(self, *a, _f=f, _n=name, **k):
        depth[0] += 1
        try: r = _f(self, *a, **k)
        finally: depth[0] -= 1
        if depth[0] == 0: log.append(["call", ids[id(self)], _n, enc(list(a)), enc(k), enc(r), fp(self)])
        return r
    setattr(B.AutoBudget, name, g)
for i in range(0, n, size):
    e.generate(prompts[i:i + size], p, draft="auto")
Path(out).write_text(json.dumps({"state": state, "log": log}))
print(len(log), collections.Counter(x[2] for x in log if x[0] == "call"))
