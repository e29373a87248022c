"""cProfile of auto's budget calls only (outermost AutoBudget calls), in-process: a real run at batch SIZE over N
prompts, the model's steps between the calls (so the budget runs as cold as it does there). The profiler's own cost
inflates Python calls over numpy's; read the ranking, not the totals. `profile_inprocess.py SIZE N [ROWS]`"""
import cProfile, json, pstats, sys, time
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
prof, depth = cProfile.Profile(), [0]
for name in ["choose", "choose_ahead", "commit_ahead", "hold", "held", "needs_context", "defers_context",
             "observe_window", "observe_time", "prepare", "forget"]:
    f = getattr(B.AutoBudget, name)
    def g(self, *a, _f=f, **k):
        depth[0] += 1
        if depth[0] == 1: prof.enable()
        try: return _f(self, *a, **k)
        finally:
            depth[0] -= 1
            if depth[0] == 0: prof.disable()
    setattr(B.AutoBudget, name, g)
for i in range(0, n, size):
    e.generate(prompts[i:i + size], p, draft="auto")
pstats.Stats(prof).sort_stats("tottime").print_stats(int(sys.argv[3]) if len(sys.argv) > 3 else 35)
