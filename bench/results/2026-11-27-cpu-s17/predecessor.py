"""Does a generate's speed depend on the mode that ran just before it? Per prompt (batch 1, fixture pair), chain:8 runs
twice: once right after tree:32 and once right after AR (decode time per token, the prefill apart) (the order of the two pairs alternates per prompt, so drift
hits both alike); the same tokens each time. Prints the mean per-token time of each and their paired ratio.
`predecessor.py [N] [MODE] [HEAVY] [LIGHT]`"""
import json, statistics, sys, time
from pathlib import Path
import torch
from dflash_trt import SamplingParams
from dflash_trt.bench.datasets import encode_prompt
from dflash_trt.engines.torch_engine import TorchEngine
torch.set_num_threads(1)
n = int(sys.argv[1]) if len(sys.argv) > 1 else 40
mode, heavy, light = (sys.argv[2:5] + ["chain:8", "tree:32", "ar"][len(sys.argv[2:5]):])[:3]
T = "tests/fixtures/gsm8k-tiny/"
e = TorchEngine.from_pretrained(T + "target", T + "drafter", device="cpu", max_batch_size=1, max_seq_len=512)
turns = [json.loads(l)["turns"][0] for l in Path("data/prompts/eagle_gsm8k.jsonl").read_text().splitlines()][:n]
prompts = [encode_prompt(e.tokenizer, t, 512 - 128)[0] for t in turns]
p = SamplingParams(max_new_tokens=128)
kw = lambda m: {"use_drafter": False} if m == "ar" else {"draft": m}  # noqa: E731
for m in (heavy, light, mode):
    e.generate(prompts[:1], p, **kw(m))  # warm
after = {heavy: [], light: []}
for i, prompt in enumerate(prompts):
    pairs = [heavy, light] if i % 2 == 0 else [light, heavy]
    for before in pairs:
        e.generate([prompt], p, **kw(before))
        r = e.generate([prompt], p, **kw(mode))[0]
        after[before].append(r.stats.decode_s / len(r.token_ids))  # decode only (the prefill apart)
ratios = [a / b for a, b in zip(after[heavy], after[light])]
print(f"{mode} after {heavy}: {1e3 * statistics.mean(after[heavy]):.3f} ms/token; after {light}: "
      f"{1e3 * statistics.mean(after[light]):.3f}; paired ratio mean {statistics.mean(ratios):.4f} "
      f"(median {statistics.median(ratios):.4f}, {sum(r > 1 for r in ratios)} of {len(ratios)} slower after {heavy})")
