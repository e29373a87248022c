"""A rarer draft's unswitched windows in a traced run (cost_trace.py) against the anchor's nearest unswitched windows
(up to 3 before and 3 after), each over its entry + overhead: the log-ratio per window, the entry before / after, its
windows seen, the cache length, its ms, the neighbours' ms, the anchor's kept residual and the window's residual.
`python burst_ratio.py traces/trace-N.jsonl.gz RARE ANCHOR` (e.g. tree:32 tree:16)"""
import gzip, json, sys, math, statistics
recs=[json.loads(l) for l in (gzip.open if sys.argv[1].endswith(".gz") else open)(sys.argv[1], "rt")]
rare=sys.argv[2]; anchor=sys.argv[3]
seq=[r for r in recs if 'call' not in r]
out=[]
for i,r in enumerate(seq):
    if r['k']==rare and not r['sw'] and not r['pr']:
        # nearest previous unswitched anchor windows (up to 3)
        prev=[s for s in seq[max(0,i-12):i] if s['k']==anchor and not s['sw']][-3:]
        nxt=[s for s in seq[i+1:i+12] if s['k']==anchor and not s['sw']][:3]
        ref=[s['ms']/((s['entry']+s['over'])) for s in prev+nxt]
        if ref:
            x=r['ms']/(r['entry']+r['over'])
            out.append((math.log(x/statistics.median(ref)), r['entry'], r['after'], r['seen'], r['L'], r['ms'], [round(s['ms'],2) for s in prev], [round(s['ms'],2) for s in nxt], r['anchor'][2], math.log(r['ms']/((r['entry']+r['over'])*r['drift']))))
for o in out: print(' '.join(str(round(v,3)) if isinstance(v,float) else str(v) for v in o))
print('mean log ratio vs neighbours', statistics.mean(o[0] for o in out), 'n', len(out))
