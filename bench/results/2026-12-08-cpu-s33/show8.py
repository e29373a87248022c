"""obs8.py trace, compactly: per generate() call its windows (fixed: ms; auto: draft, S switched, P probe, ms, residual over the drift, the anchor and its reference residual @ windows since, drift, chain:8 / AR entry ratio). `python show8.py TRACE`"""
import json, sys, statistics as st
ev=[json.loads(l) for l in open(sys.argv[1])]
buf=[]; mode=None
def flush():
    global buf
    if buf: print(f"  [{mode}] " + ' '.join(buf)); buf=[]
for e in ev:
    if 'call' in e:
        flush(); mode=e['call']; continue
    if 'fixed' in e:
        buf.append(f"{e['ms']:.0f}")
    else:
        a=e['anchor']
        buf.append(f"{e['k'].replace('chain:','c').replace('tree:','t')}{'S' if e['sw'] else ''}{'P' if e['pr'] else ''}:{e['ms']:.0f}(res{e['res']:+.2f} a{a[0].replace('chain:','c') if a else '-'}{a[2] if a else 0:+.2f}@{a[3] if a else 0} d{e['drift']:.2f} r{e['ratio81']:.2f})")
flush()
