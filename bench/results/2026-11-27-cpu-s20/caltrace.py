"""Batch 1, 40 prompts, generate() per prompt, auto: every 60 windows, the drafts of those windows and the calibration
(chains' / trees' factor and sums); at the end the wall time of the 40 calls and the windows by draft. Shows the
chains' factor falling to ~0.85 in the first ~120 windows and AR then running for hundreds of windows while it stands."""
import sys, collections, torch, time
from dflash_trt import SamplingParams
from dflash_trt.bench.datasets import encode_prompt, load_prompt_set
from dflash_trt.engines.torch_engine import TorchEngine
from dflash_trt.spec import budget as B
torch.set_num_threads(1)
fx = 'tests/fixtures/gsm8k-tiny/'
e = TorchEngine.from_pretrained(fx + 'target', fx + 'drafter', device='cpu', max_batch_size=1, max_seq_len=512)
prompts = [encode_prompt(e.tokenizer, t, 512 - 128)[0] for t in load_prompt_set('data/prompts/eagle_gsm8k.jsonl', 41).turns]
p = SamplingParams(max_new_tokens=128)
c = collections.Counter(); blk = collections.Counter(); n = [0]
c8, t16 = B.Draft('chain', 8), B.Draft('tree', 16)
oc = B.AutoBudget.observe_window
def ch(self, *a, **k):
    c[str(a[1])] += 1; blk[str(a[1])] += 1; n[0] += 1
    r = oc(self, *a, **k)
    if n[0] % 60 == 0 and 'quiet' not in sys.argv[2:]:
        cal = self.calibration
        print(f"{n[0]:4d} {dict(blk)} cal c {cal.factor(c8):.3f} t {cal.factor(t16):.3f} sums {[ (k, round(v[0],1), round(v[1],1)) for k, v in cal.sums.items()]}", flush=True)
        blk.clear()
    return r
B.AutoBudget.observe_window = ch
e.generate([prompts[0]], p, draft='chain:8')
t0 = time.perf_counter()
for x in prompts[1:]: e.generate([x], p, draft='auto')
print(sys.argv[1:2], 'wall', round(time.perf_counter() - t0, 2), dict(sorted(c.items())), 'cal',
      round(e.draft_calibration.factor(c8), 3), round(e.draft_calibration.factor(t16), 3), flush=True)
