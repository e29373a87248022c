"""Per batch of a price8.py trace: AR and chain:8 window times and tokens (the fixed modes), what auto ran, its first pricing. `python perbatch.py TRACE`"""
import json, sys, statistics as st, collections
ev=[json.loads(l) for l in open(sys.argv[1])]
cur=None; B=collections.defaultdict(lambda: collections.defaultdict(list)); order=[]
for e in ev:
    if e['ev']=='call':
        if e['n']==1: cur=None; continue
        cur=(e['p0'], e['draft']); 
        if e['p0'] not in order: order.append(e['p0'])
        B[cur]['calls'].append(1)
    elif cur is None: continue
    elif e['ev'] in ('taus','ftaus'): B[cur]['tok'].append(sum(sum(t) for t in e['taus'])); B[cur]['d'].append(e['d'])
    elif e['ev']=='time': B[cur]['ms'].append(e['ms']); B[cur]['td'].append(e['d'])
    elif e['ev']=='price': B[cur]['price'].append(e)
for i,p in enumerate(order):
    a=B[(p,'None')]; c=B[(p,'chain:8')]; u=B[(p,'auto')]
    ar_ms=st.median(a['ms']) if a['ms'] else float('nan')
    # first occurrence only (warm-up = first batch repeated)
    c8_ms=st.median(c['ms']); c8_tok=st.mean(c['tok'][-len(c['ms']):]) if c['tok'] else float('nan')
    ucnt=collections.Counter(u['td'])
    uc8=[m for m,d in zip(u['ms'],u['td']) if d=='chain:8']; ua=[m for m,d in zip(u['ms'],u['td']) if d=='chain:1']
    print(f"batch {i}: AR {ar_ms:.2f} ms | chain:8 {c8_ms:.2f} ms tok/window {c8_tok:.1f} -> rate vs AR {(c8_tok/c8_ms)/(8/ar_ms):.3f} | auto {dict(ucnt)} c8 {st.median(uc8) if uc8 else 0:.1f} ar {st.median(ua) if ua else 0:.2f}",
          'first price', {k: u['price'][0][k] for k in ('best',)} if u['price'] else '', u['price'][0]['e'].get('chain:8') if u['price'] else '', round(u['price'][0]['c']['chain:8']/u['price'][0]['c']['chain:1'],2) if u['price'] else '')
