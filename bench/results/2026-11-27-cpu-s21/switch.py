"""Twenty-first session: batch 1, 40 prompts, generate() per prompt with auto; each window's ms per step grouped by
whether the window before ran the same draft (the cost of a switch of draft). From the repository root."""
import collections, statistics as st, sys, torch
from dflash_trt import SamplingParams
from dflash_trt.bench.datasets import encode_prompt, load_prompt_set
from dflash_trt.engines.torch_engine import TorchEngine
from dflash_trt.spec import budget as B
torch.set_num_threads(1)
fx = 'tests/fixtures/gsm8k-tiny/'
e = TorchEngine.from_pretrained(fx + 'target', fx + 'drafter', device='cpu', max_batch_size=1, max_seq_len=512)
prompts = [encode_prompt(e.tokenizer, t, 512 - 128)[0] for t in load_prompt_set('data/prompts/eagle_gsm8k.jsonl', 40).turns]
seq = []
ot = B.AutoBudget.observe_time
def obs(self, n, draft, s, length=None):
    seq.append((str(draft), s * 1e3)); return ot(self, n, draft, s, length)
B.AutoBudget.observe_time = obs
e.generate([prompts[0]], SamplingParams(max_new_tokens=128), draft='chain:8')
for x in prompts: e.generate([x], SamplingParams(max_new_tokens=128), draft='auto')
g = collections.defaultdict(list)
for (pd, _), (d, ms) in zip(seq, seq[1:]):
    g[(d, 'same' if pd == d else 'after ' + pd)].append(ms)
for k, v in sorted(g.items()):
    if len(v) >= 3: print(k, len(v), 'median', round(st.median(v), 3), 'mean', round(st.mean(v), 3))
print('switches', sum(1 for a, b in zip(seq, seq[1:]) if a[0] != b[0]), 'of', len(seq))
