import gc, json, sys, time, collections
from pathlib import Path
import torch
from dflash_trt import SamplingParams
from dflash_trt.bench.datasets import encode_prompt
from dflash_trt.engines.torch_engine import TorchEngine
torch.set_num_threads(1)
size = int(sys.argv[1]); modes = sys.argv[2].split(",")
T = "tests/fixtures/gsm8k-tiny/"
e = TorchEngine.from_pretrained(T + "target", T + "drafter", device="cpu", max_batch_size=size, max_seq_len=512)
turns = [json.loads(l)["turns"][0] for l in Path("data/prompts/eagle_gsm8k.jsonl").read_text().splitlines()][:40]
prompts = [encode_prompt(e.tokenizer, t, 512 - 128)[0] for t in turns]
p = SamplingParams(max_new_tokens=128)
e.generate(prompts[:size], p, draft="auto")
stat = collections.defaultdict(list); t0 = [0.0]
def cb(phase, info):
    if phase == "start": t0[0] = time.perf_counter()
    else: stat[info["generation"]].append(time.perf_counter() - t0[0])
print("objects tracked:", len(gc.get_objects()))
for m in modes:
    gc.collect(); stat.clear(); gc.callbacks.append(cb); t = time.perf_counter()
    for i in range(0, 40, size):
        e.generate(prompts[i:i + size], p, **({"use_drafter": False} if m == "ar" else {"draft": m}))
    wall = time.perf_counter() - t; gc.callbacks.remove(cb)
    print(m, f"wall {wall:.2f} s;", {g: (len(v), round(1e3 * sum(v), 1), round(1e3 * max(v), 2)) for g, v in sorted(stat.items())})
