"""CPU, batch 1, host loop: auto with the engine's tree clock (new) vs a fresh clock per generate() (old), same cost
table, interleaved per prompt; plus AR and chain:8 for reference."""
import json, sys, time, collections
from pathlib import Path
import torch
from dflash_trt import SamplingParams
from dflash_trt.bench.datasets import encode_prompt
from dflash_trt.engines.torch_engine import TorchEngine
from dflash_trt.spec.budget import TreeClock
torch.set_num_threads(1)
FIX = Path("/work/main/tests/fixtures/gsm8k-tiny")
loop = sys.argv[1] if len(sys.argv) > 1 else "host"
turns = [json.loads(l)["turns"][0] for l in Path("/work/main/data/prompts/eagle_gsm8k.jsonl").read_text().splitlines()][:80]
mk = lambda: TorchEngine.from_pretrained(FIX / "target", FIX / "drafter", device="cpu", max_batch_size=1, max_seq_len=512, decode_loop=loop)
new, old = mk(), mk()
prompts = [encode_prompt(new.tokenizer, t, 384)[0] for t in turns]
p = SamplingParams(max_new_tokens=128)
new.generate(prompts[:1], SamplingParams(max_new_tokens=8), draft="auto")
old.draft_costs = dict(new.draft_costs)
new.draft_curve, new.tree_curves, new.tree_clock = None, {}, TreeClock()
modes = {"ar": (new, {"use_drafter": False}), "chain:8": (new, {"draft": "chain:8"}), "auto-engine-clock": (new, {"draft": "auto"}), "auto-fresh-clock": (old, {"draft": "auto"})}
sec = collections.Counter(); tok = collections.Counter(); outs = collections.defaultdict(list)
for i, pr in enumerate(prompts):
    names = list(modes); names = names[i % 4:] + names[: i % 4]
    for m in names:
        e, kw = modes[m]
        if m == "auto-fresh-clock":
            e.tree_clock = TreeClock()
        t0 = time.perf_counter(); r = e.generate([pr], p, **kw)[0]; sec[m] += time.perf_counter() - t0
        tok[m] += len(r.token_ids); outs[m].append(r.token_ids)
ar = tok["ar"] / sec["ar"]
print(loop, {m: f"{tok[m]/sec[m]/ar:.3f}x" for m in modes}, "equal:", all(outs[m] == outs["ar"] for m in modes))
print("tree steps measured: engine clock", {n: c.tree.trials[0] for n, c in new.tree_curves.items()}, "fresh", {n: c.tree.trials[0] for n, c in old.tree_curves.items()})
