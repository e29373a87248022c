"""AR engine (use_drafter=False) vs auto with no exploration, at a batch held at AR: where auto's extra time goes.
`arcost.py C ROUNDS [prof]`: continuous arrivals at concurrency C over 16 prompts x 64 tokens, rounds alternating."""
import json, sys, time, collections, cProfile, pstats, torch
from dflash_trt import SamplingParams
from dflash_trt.bench.datasets import encode_prompt, load_prompt_set
from dflash_trt.engines.torch_engine import TorchEngine
torch.set_num_threads(1)
fx = 'tests/fixtures/gsm8k-tiny/'
c, rounds, prof = int(sys.argv[1]), int(sys.argv[2]), 'prof' in sys.argv
turns = load_prompt_set('data/prompts/eagle_gsm8k.jsonl', 16).turns
eng = {m: TorchEngine.from_pretrained(fx + 'target', fx + 'drafter', device='cpu', max_batch_size=16, max_seq_len=512) for m in ('ar', 'auto')}
prompts = [encode_prompt(eng['ar'].tokenizer, t, 512 - 64)[0] for t in turns]
p = SamplingParams(max_new_tokens=64)
sch = {'ar': eng['ar'].new_scheduler(use_drafter=False), 'auto': eng['auto'].new_scheduler(draft='auto')}
sch['auto'].budget.explore_share = 1e-6
ids = collections.Counter()
profs = {m: cProfile.Profile() for m in sch}
def run_round(m):
    s = sch[m]; todo = list(range(len(prompts))); live = set(); toks = 0
    t = time.perf_counter()
    while todo or live:
        while todo and len(live) < c:
            i = todo.pop(0); rid = f"{m}-{ids[m]}"; ids[m] += 1; s.add(rid, prompts[i], p); live.add(rid)
        if prof: profs[m].enable()
        evs = s.step()
        if prof: profs[m].disable()
        for ev in evs:
            toks += len(ev.token_ids)
            if ev.finished: live.discard(ev.index)
    return toks, time.perf_counter() - t
for m in sch: run_round(m)
for m in sch: sch[m].prefill_s = sch[m].decode_s = 0.0
profs = {m: cProfile.Profile() for m in sch}
res = collections.defaultdict(lambda: [0, 0.0])
for r in range(rounds):
    for m in (('ar', 'auto') if r % 2 == 0 else ('auto', 'ar')):
        k, t = run_round(m); res[m][0] += k; res[m][1] += t
print('auto/AR', round(res['auto'][0] / res['auto'][1] / (res['ar'][0] / res['ar'][1]), 3))
for m in sch: print(m, 'prefill s', round(sch[m].prefill_s, 3), 'decode s', round(sch[m].decode_s, 3))
if prof:
    for m in sch:
        print('=====', m); pstats.Stats(profs[m]).sort_stats('tottime').print_stats(25)
