"""Twenty-sixth session: the first 12 tokens of 8 AR answers (how the fixture target opens its answers).
`PYTHONPATH=. python bench/results/2026-11-28-cpu-s26/first_tokens.py`"""
import json, torch
from dflash_trt import SamplingParams
from dflash_trt.bench.datasets import encode_prompt
from dflash_trt.engines.torch_engine import TorchEngine
torch.set_num_threads(1)
fx = 'tests/fixtures/gsm8k-tiny/'
turns = [json.loads(l)["turns"][0] for l in open('data/prompts/eagle_gsm8k.jsonl')][:8]
eng = TorchEngine.from_pretrained(fx + 'target', fx + 'drafter', device='cpu', max_batch_size=8, max_seq_len=512)
prompts = [encode_prompt(eng.tokenizer, t, 448)[0] for t in turns]
outs = eng.generate(prompts, SamplingParams(max_new_tokens=12), use_drafter=False)
for o in outs:
    ids = o.token_ids if hasattr(o, 'token_ids') else o
    print([eng.tokenizer.decode([i]) for i in ids[:12]])
