"""Twenty-first session: auto from the build's measured curve (manifest acceptance.curve) against the default prior
(0.7 everywhere), fresh engine per run, batch 1, generate() per prompt (a client's calls), 128 tokens, greedy.
`prior_ab.py REPEATS [N_PROMPTS]` from the repository root, after `dflash-trt build --config
build_configs/tiny-gsm8k-cpu.yaml` (its manifest gives the curve). Per run: wall of the first 5 prompts and of all,
AR windows (chain:1) chosen in the first 5 prompts and in all; chain:8 fixed in the same rotation as the reference."""
import collections, json, sys, time, statistics as st
import torch
from dflash_trt import SamplingParams
from dflash_trt.bench.datasets import encode_prompt, load_prompt_set
from dflash_trt.engines.torch_engine import TorchEngine
from dflash_trt.spec import budget as B
torch.set_num_threads(1)
fx = 'tests/fixtures/gsm8k-tiny/'
curve = json.load(open('out/engines/tiny-gsm8k-cpu/manifest.json'))['acceptance']['curve']
repeats = int(sys.argv[1]); n = int(sys.argv[2]) if len(sys.argv) > 2 else 40
picks = collections.Counter()
oc = B.AutoBudget.choose
def choose(self, *a, **k):
    d = oc(self, *a, **k); picks[str(d)] += 1; return d
B.AutoBudget.choose = choose
res = collections.defaultdict(list)
for rep in range(repeats):
    modes = ['default', 'measured', 'chain:8']
    for mode in modes[rep % 3:] + modes[:rep % 3]:
        e = TorchEngine.from_pretrained(fx + 'target', fx + 'drafter', device='cpu', max_batch_size=1, max_seq_len=512,
                                        draft_prior=curve if mode == 'measured' else None)
        prompts = [encode_prompt(e.tokenizer, t, 512 - 128)[0] for t in load_prompt_set('data/prompts/eagle_gsm8k.jsonl', n).turns]
        p = SamplingParams(max_new_tokens=128)
        draft = 'chain:8' if mode == 'chain:8' else 'auto'
        if draft == 'auto':
            e.draft_budget('auto', 16)  # the startup cost table, outside the timed calls
        picks.clear(); toks = 0
        t0 = time.perf_counter()
        for i, x in enumerate(prompts):
            toks += len(e.generate([x], p, draft=draft)[0].token_ids)
            if i == 4:
                w5, ar5 = time.perf_counter() - t0, picks['chain:1']
        wall = time.perf_counter() - t0
        res[mode].append((w5, wall, ar5, picks['chain:1']))
        print(rep, mode, 'first5', round(w5, 2), 'all', round(wall, 2), 'AR windows first5', ar5, 'all', picks['chain:1'],
              dict(picks.most_common(4)), flush=True)
print('mean walls (first 5 / all):', {m: (round(st.mean(r[0] for r in v), 3), round(st.mean(r[1] for r in v), 3)) for m, v in res.items()})
for m in ('default', 'measured'):
    print(m, 'over chain:8, per run (first 5 / all):', [(round(res['chain:8'][i][0] / r[0], 3), round(res['chain:8'][i][1] / r[1], 3)) for i, r in enumerate(res[m])])
