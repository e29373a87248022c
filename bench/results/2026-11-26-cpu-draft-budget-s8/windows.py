"""Where auto's time goes against AR at concurrency c, in-process like the server (one long-lived scheduler per mode,
continuous arrivals, 16 eagle_gsm8k prompts x 64 tokens, rounds alternating after a warm-up round). Run from a tree's
root: `windows.py C ROUNDS`. Prints auto/AR; each mode's decode windows without a prefill by (batch n, the draft,
whether the AR window fed the drafter, whether it came right after a drafting window): count and mean ms; auto's
drafting windows by (n, draft, kind: merit / probe / tree measurement): ms, tokens emitted, ms per token and the tokens
the pricing expected; the startup cost table's ratios to AR at n = 4 and the table after the run."""
import collections, json, sys, time
import torch
from dflash_trt import SamplingParams
from dflash_trt.bench.datasets import encode_prompt
from dflash_trt.engines import scheduler as S
from dflash_trt.engines.torch_engine import TorchEngine
from dflash_trt.spec import budget as B

torch.set_num_threads(1)
fx = 'tests/fixtures/gsm8k-tiny/'
c, rounds = int(sys.argv[1]), int(sys.argv[2])
turns = [json.loads(l)["turns"][0] for l in open('data/prompts/eagle_gsm8k.jsonl')][:16]
eng = {m: TorchEngine.from_pretrained(fx + 'target', fx + 'drafter', device='cpu', max_batch_size=16, max_seq_len=512)
       for m in ['ar', 'auto']}
prompts = [encode_prompt(eng['ar'].tokenizer, t, 512 - 64)[0] for t in turns]
p = SamplingParams(max_new_tokens=64)
sch = {'ar': eng['ar'].new_scheduler(use_drafter=False), 'auto': eng['auto'].new_scheduler(draft='auto')}
on, seen, chosen = [False], {}, []
drafting = collections.defaultdict(lambda: [0, 0.0, 0, 0.0])  # (n, draft, kind) -> windows, s, tokens, expected

def observe_time(self, n, d, s, length=None, _f=B.AutoBudget.observe_time):
    kind = 'probe' if self._probing == d else 'merit'
    if d.tree and self.tree_curves[d.size].tree.trials[0] < B.TREE_MEASURE_STEPS:
        kind = 'measure'
    seen['window'] = (n, str(d), kind, s)
    return _f(self, n, d, s, length)

def observe_window(self, reqs, d, taus, *a, _f=B.AutoBudget.observe_window, **k):
    if on[0] and 'window' in seen:  # (a window's time is observed just before its steps are)
        n, ds, kind, s = seen.pop('window')
        j = next((j for j, (rr, dd, _) in enumerate(chosen) if dd == d and set(reqs) <= set(rr)), None)
        if j is not None:
            rr, _, e = chosen[j]
            del chosen[:j + 1]
            r = drafting[(n, ds, kind)]
            r[0] += 1; r[1] += s * max(len(t) for t in taus); r[2] += sum(map(sum, taus)); r[3] += e * len(reqs) / len(rr)
    return _f(self, reqs, d, taus, *a, **k)

def choose(self, reqs, left=None, length=None, _f=B.AutoBudget.choose):
    d = _f(self, reqs, left, length)
    chosen.append((tuple(reqs), d, self._pricing[2][0][d] if self._pricing is not None else float(len(reqs))))
    return d

def feeds(self, d, _f=S.BatchScheduler._feeds_drafter):
    r = _f(self, d); seen['fed'] = (d, r); return r

B.AutoBudget.observe_time, B.AutoBudget.observe_window, B.AutoBudget.choose = observe_time, observe_window, choose
S.BatchScheduler._feeds_drafter = feeds
steps = collections.defaultdict(lambda: [0, 0.0])
ids = collections.Counter()

def run_round(m):
    s = sch[m]; todo = list(range(len(prompts))); live = set(); toks = 0; t = time.perf_counter(); before = None
    while todo or live:
        while todo and len(live) < c:
            i = todo.pop(0); rid = f"{m}-{ids[m]}"; ids[m] += 1; s.add(rid, prompts[i], p); live.add(rid)
        n, pf, t0 = len(live), s.prefill_s, time.perf_counter()
        seen.pop('fed', None)
        evs = s.step()
        if on[0] and s.prefill_s == pf:
            d, fed = seen.get('fed', (B.Draft('chain', 1), False))
            after = d.size == 1 and before is not None and before.size > 1
            key = (m, n, str(d), 'fed' if fed and d.size == 1 else '', 'after a drafting window' if after else '')
            steps[key][0] += 1; steps[key][1] += time.perf_counter() - t0
            before = d
        for ev in evs:
            toks += len(ev.token_ids)
            if ev.finished:
                assert ev.finish_reason != "error", ev.result.error  # a failed request emits nothing: its rate would lie
                live.discard(ev.index)
    return toks, time.perf_counter() - t

for m in sch:
    run_round(m)
on[0] = True
total = {m: [0, 0.0] for m in sch}
for r in range(rounds):
    for m in (['ar', 'auto'] if r % 2 == 0 else ['auto', 'ar']):
        k, t = run_round(m); total[m][0] += k; total[m][1] += t
rate = {m: k / t for m, (k, t) in total.items()}
print(f"c = {c}: auto / AR {rate['auto'] / rate['ar']:.3f} (AR {rate['ar']:.0f} tok/s)")
print("decode windows without a prefill: (mode, n, draft, fed, after) windows, mean ms")
for key, (w, s) in sorted(steps.items(), key=str):
    print(' ', key, w, f"{s / w * 1e3:.3f}")
print("auto's drafting windows: (n, draft, kind) windows, ms, tokens, ms per token, tokens expected")
for key, (w, s, tok, e) in sorted(drafting.items()):
    if key[1] != 'chain:1':
        print(' ', key, w, f"{s * 1e3:.1f}", tok, f"{s * 1e3 / max(tok, 1):.2f}", f"{e:.1f}")
D = B.Draft
for name, table in [('startup table', eng['auto'].draft_costs), ('after the run', eng['auto'].cost_table.seconds)]:
    for L in sorted({k[2] for k in table}):
        a = table[(4, D('chain', 1), L)]
        print(f"{name}: n = 4, L = {L}: AR {a * 1e3:.2f} ms; over AR:",
              {str(d): round(table[(4, d, L)] / a, 2) for d in (D('chain', 4), D('chain', 8), D('tree', 16), D('tree', 32))})
