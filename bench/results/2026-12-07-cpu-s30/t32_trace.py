"""Batch 1 (fixture pair, 40 eagle_gsm8k prompts x 128 tokens, generate() per prompt, auto only after a warm-up):
auto's tree:32 windows, and where it chose tree:32 over tree:16, what it priced: expected tokens, entries (ms),
switch factors, tree steps measured. `PYTHONPATH=CODE:. python t32_trace.py`"""
import collections, sys, time, torch
from dflash_trt import SamplingParams
from dflash_trt.bench.datasets import encode_prompt, load_prompt_set
from dflash_trt.engines.torch_engine import TorchEngine
from dflash_trt.spec import budget as bm
torch.set_num_threads(1)
fx = 'tests/fixtures/gsm8k-tiny/'
turns = load_prompt_set('data/prompts/eagle_gsm8k.jsonl', 40).turns
eng = TorchEngine.from_pretrained(fx + 'target', fx + 'drafter', device='cpu', max_batch_size=1, max_seq_len=512)
prompts = [encode_prompt(eng.tokenizer, t, 512 - 128)[0] for t in turns]
p = SamplingParams(max_new_tokens=128)
eng.generate(prompts[:1], SamplingParams(max_new_tokens=8), draft="auto")
t16, t32, c8 = bm.Draft("tree", 16), bm.Draft("tree", 32), bm.Draft("chain", 8)
print("startup ms t16/t32/c8 at L=128:", [round(eng.cost_table.cost(1, d, 128) * 1e3, 3) for d in (t16, t32, c8)])
for q in prompts[:2]:
    eng.generate([q], p, draft='auto')
eng.draft_curve, eng.tree_curves = None, {}
eng.draft_calibration = bm.Calibration()
chosen = collections.Counter(); log = []
_c = bm.AutoBudget.choose
def ch(self, req, left=None, length=None):
    d = _c(self, req, left, length)
    chosen[str(d)] += 1
    pr = self._pricing[2] if self._pricing else None
    if pr and chosen.total() % 20 == 0:
        log.append((chosen.total(), str(d), "E", [round(pr[0][x], 2) for x in (t16, t32, c8)], "ms", [round(pr[1][x] * 1e3, 2) for x in (t16, t32, c8)],
                    "rate", [round(pr[3][x]) for x in (t16, t32, c8)], "switch", {str(k): round(v, 2) for k, v in self.cost.switch.items()},
                    "steps t16/t32", [int(self.tree_curves[s].tree.steps()) for s in (16, 32)], "calib", round(self.calibration.factor(t16), 3)))
    return d
bm.AutoBudget.choose = ch
t = time.perf_counter()
for q in prompts: eng.generate([q], p, draft='auto')
print(f"{time.perf_counter() - t:.2f} s", dict(chosen))
for x in log[::3]: print(*x)
