"""GPU probe 2 (session 12): per generate() at one batch size, where the time outside the decode windows goes
(prefill, waiting for queued work before it, graph capture, the rest), by mode; auto's per-generate rest listed."""
import collections, json, sys, time
from pathlib import Path
import torch
from dflash_trt import SamplingParams
from dflash_trt.bench.datasets import encode_prompt
from dflash_trt.engines.torch_engine import TorchEngine
dev, size, nb = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
torch.set_num_threads(1)
T = "tests/fixtures/gsm8k-tiny/"
e = TorchEngine.from_pretrained(T + "target", T + "drafter", device=dev, max_batch_size=size, max_seq_len=512)
turns = [json.loads(l)["turns"][0] for l in Path("data/prompts/eagle_gsm8k.jsonl").read_text().splitlines()][:nb * size]
prompts = [encode_prompt(e.tokenizer, t, 512 - 128)[0] for t in turns]
batches = [prompts[i:i + size] for i in range(0, len(prompts), size)]
e.generate(batches[0][:1], SamplingParams(max_new_tokens=8), draft="auto")
if len(sys.argv) > 4 and sys.argv[4] == "nodefer":
    from dflash_trt.spec import budget as B
    B.AutoBudget.defers_context = lambda self, n, length=None: False
    print("variant: defers_context always False")
sync = (lambda: torch.cuda.synchronize()) if dev.startswith("cuda") else (lambda: None)
sr = e.step_runner
acc = collections.Counter()
orig_prefill, orig_read = sr.prefill, sr.read
def prefill(*a, **k):
    t = time.perf_counter(); sync(); t1 = time.perf_counter(); acc["wait"] += t1 - t
    r = orig_prefill(*a, **k); acc["prefill"] += time.perf_counter() - t1; acc["prefills"] += 1; return r
def read(*a, **k):
    t = time.perf_counter(); r = orig_read(*a, **k); acc["read"] += time.perf_counter() - t; acc["reads"] += 1
    acc["first_read"] = acc["first_read"] or time.perf_counter(); acc["last_read"] = time.perf_counter(); return r
sr.prefill, sr.read = prefill, read
p = SamplingParams(max_new_tokens=128)
modes = ["ar", "chain:8", "tree:32", "auto"]
for b in batches[:3]:
    for m in modes:
        e.generate(b, p, **({"use_drafter": False} if m == "ar" else {"draft": m}))
rows = collections.defaultdict(list)
for rep in range(2):
    for i, b in enumerate(batches):
        for m in modes[i % 4:] + modes[:i % 4]:
            acc.clear(); cap = sr.capture_s; t = time.perf_counter()
            res = e.generate(b, p, **({"use_drafter": False} if m == "ar" else {"draft": m}))
            end = time.perf_counter(); total = end - t
            rows[m].append(dict(total=total, toks=sum(len(r.token_ids) for r in res), wait=acc["wait"],
                                prefill=acc["prefill"], prefills=acc["prefills"], capture=sr.capture_s - cap,
                                reads=acc["reads"], before=acc["first_read"] - t if acc["first_read"] else 0,
                                after=end - acc["last_read"] if acc["last_read"] else 0,
                                mid=(acc["last_read"] - acc["first_read"]) if acc["first_read"] else 0))
for m in modes:
    r = rows[m]; s = lambda k: sum(x[k] for x in r)
    print(f"{m:8s} {s('toks') / s('total'):8.0f} tok/s | per generate ms: total {1e3 * s('total') / len(r):6.2f} "
          f"to first read {1e3 * s('before') / len(r):5.2f} (prefill {1e3 * s('prefill') / len(r):5.2f}, wait before "
          f"it {1e3 * s('wait') / len(r):4.2f}) reads..last {1e3 * s('mid') / len(r):6.2f} after {1e3 * s('after') / len(r):4.2f} "
          f"capture {1e3 * s('capture') / len(r):4.2f}; reads {s('reads') / len(r):.1f} prefills {s('prefills') / len(r):.1f}")
print("auto per generate, ms (to first read, after last read):",
      [(round(1e3 * x['before'], 1), round(1e3 * x['after'], 1)) for x in rows["auto"]])
print("tree:32 per generate, ms (to first read, after last read):",
      [(round(1e3 * x['before'], 1), round(1e3 * x['after'], 1)) for x in rows["tree:32"]])
