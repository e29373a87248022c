"""Twenty-first session: SpecStep.prefill at 1 and 8 requests, medians of 12: plain AR (spec False), auto's deferred
context (the prompt's last rows pending), and the drafter taking the whole prompt in. From the repository root."""
import json, time, torch, statistics as st
from dflash_trt.bench.datasets import encode_prompt
from dflash_trt.engines.torch_engine import TorchEngine
from dflash_trt.spec.step import SlotRequest
torch.set_num_threads(1)
fx='tests/fixtures/gsm8k-tiny/'
e = TorchEngine.from_pretrained(fx+'target', fx+'drafter', device='cpu', max_batch_size=16, max_seq_len=512)
turns=[json.loads(l)["turns"][0] for l in open('data/prompts/eagle_gsm8k.jsonl')][:16]
prompts=[encode_prompt(e.tokenizer,t,512-64)[0] for t in turns]
r = e.step_runner
def reqs(m, off): return [SlotRequest(i, prompts[(i + off) % 16], 0.0, 0, 1.0, 0, [], 64) for i in range(m)]
for m in (1, 8):
    res = {}
    for rep in range(12):
        for mode in ((False, False), (True, True), (True, False)):
            q = reqs(m, rep)
            t = time.perf_counter(); r.prefill(q, *mode); dt = time.perf_counter() - t
            res.setdefault(mode, []).append(dt)
    print(m, {str(k): round(1e3 * st.median(v), 2) for k, v in res.items()})
