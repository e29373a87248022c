"""cold_c8.py (s25) with a look inside: at every 10th choice at the full batch, auto's priced rates (chain:1, chain:4,
chain:8), its believed costs (ms), the batch's E per request; then the windows' measured times per draft at n=C.
`TOKENS=128 PYTHONPATH=CODE:. python cold_dbg.py RUN [C=8]`"""
import collections, json, os, sys, time, torch
from dflash_trt import SamplingParams
from dflash_trt.bench.datasets import encode_prompt
from dflash_trt.engines.torch_engine import TorchEngine
import dflash_trt.spec.budget as bm
torch.set_num_threads(1)
run = int(sys.argv[1]); C = int(sys.argv[2]) if len(sys.argv) > 2 else 8
fx = 'tests/fixtures/gsm8k-tiny/'
turns = [json.loads(l)["turns"][0] for l in open('data/prompts/eagle_gsm8k.jsonl')][:40]
eng = TorchEngine.from_pretrained(fx + 'target', fx + 'drafter', device='cpu', max_batch_size=C, max_seq_len=512)
prompts = [encode_prompt(eng.tokenizer, t, 512 - 64)[0] for t in turns]
TOKENS = int(os.environ.get('TOKENS', '64')); p = SamplingParams(max_new_tokens=TOKENS)
chosen = collections.Counter(); log = []; times = collections.defaultdict(list)
_choose = bm.AutoBudget.choose; _ot = bm.AutoBudget.observe_time
D = {k: bm.Draft("chain", k) for k in (1, 4, 8)}
def counted(self, req, left=None, length=None):
    d = _choose(self, req, left, length)
    chosen[str(d)] += 1
    if len(req) == C and self._pricing and chosen.total() % 5 == 0:
        pr = self._pricing[2]
        log.append((str(d), [round(pr[3][D[k]]) for k in (1, 4, 8)], [round(pr[1][D[k]] * 1e3, 2) for k in (1, 4, 8)],
                    [round(pr[0][D[k]] / C, 2) for k in (4, 8)], round(self.calibration.factor(D[8]), 3), int(self.curve.steps())))
    return d
def ot(self, n, draft, s, length=None, *a, **k):
    if n == C: times[str(draft)].append(s * 1e3)
    return _ot(self, n, draft, s, length, *a, **k)
bm.AutoBudget.choose = counted; bm.AutoBudget.observe_time = ot
sch = eng.new_scheduler(draft='auto'); eng.cache_owner = sch
print("startup table ms at n=C:", {k: round(sch.budget.cost.cost(C, D[k]) * 1e3, 2) for k in (1, 4, 8)})
todo = list(range(len(prompts))); live = set(); n = 0
while todo or live:
    while todo and len(live) < C:
        i = todo.pop(0); rid = f"a-{n}"; n += 1; sch.add(rid, prompts[i], p); live.add(rid)
    evs = sch.step()
    t1 = time.perf_counter()
    while time.perf_counter() - t1 < 0.001: pass
    for ev in evs:
        if ev.finished: live.discard(ev.index)
print(dict(chosen))
for x in log: print(x)
import statistics as st
print("measured ms per step at n=C:", {k: (len(v), round(st.median(v), 2)) for k, v in times.items()})
print("end table ms at n=C:", {k: round(sch.budget.cost.cost(C, D[k]) * 1e3, 2) for k in (1, 4, 8)}, "probe_factor", round(sch.budget.cost.probe_factor, 3))
