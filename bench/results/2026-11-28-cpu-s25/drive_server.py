"""Twenty-fifth session: one auto server (wrap_serve.py: its windows and merit choices logged to LOG) driven as
scripts/bench_openai_server.py drives it (a warm-up round at c = 16, then ROUNDS rounds at c = 1, 2, 4, 8, 16; 16
eagle_gsm8k prompts x 64 tokens), then a summary of the log: per level, windows by draft; at n >= 13, per draft,
windows and median measured / priced; the merit choices at n >= 13.
`[MODE=auto|ar|chain:8] [IDLE=k] PYTHONPATH=. python bench/results/2026-11-28-cpu-s25/drive_server.py LOG [ROUNDS=3]`"""
import asyncio, collections, importlib.util, json, os, statistics, subprocess, sys, time
from pathlib import Path

spec = importlib.util.spec_from_file_location("bos", "scripts/bench_openai_server.py")
bos = importlib.util.module_from_spec(spec)
spec.loader.exec_module(bos)
log = Path(sys.argv[1])
rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 3
log.unlink(missing_ok=True)
port = bos.free_port()
fx = 'tests/fixtures/gsm8k-tiny/'
cmd = [sys.executable, 'bench/results/2026-11-28-cpu-s25/wrap_serve.py', 'serve', '--api', 'openai', '--host',
       '127.0.0.1', '--port', str(port), '--torch-threads', '1', '--max-batch-size', '16', '--max-seq-len', '512',
       '--served-model-name', 'bench', '--target', fx + 'target', '--device', 'cpu', '--dtype', 'float32',
       ] + {'ar': ['--no-draft'], 'auto': ['--drafter', fx + 'drafter', '--draft', 'auto']}.get(
           os.environ.get('MODE', 'auto'), ['--drafter', fx + 'drafter', '--draft', os.environ.get('MODE', 'auto')])
env = dict(os.environ, OMP_NUM_THREADS='1', LOG=str(log))
proc = subprocess.Popen(cmd, env=env, stdout=open(str(log) + '.server', 'wb'), stderr=subprocess.STDOUT)
idle = []  # IDLE=k: k more servers of the pair (AR) up beside it and idle, as in the three-mode benchmark
for i in range(int(os.environ.get('IDLE', '0'))):
    c2 = list(cmd)
    c2[c2.index('--port') + 1] = str(bos.free_port())
    idle.append(subprocess.Popen(c2[:c2.index('--drafter')] if '--drafter' in c2 else c2, env=dict(env, LOG='/dev/null'),
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
url = f"http://127.0.0.1:{port}"
marks = []
try:
    import httpx
    for _ in range(600):
        try:
            if httpx.get(url + "/health", timeout=2).status_code == 200:
                break
        except Exception:
            pass
        time.sleep(0.5)
    turns = bos.load_prompt_set(bos.DEFAULT_DATASET if hasattr(bos, 'DEFAULT_DATASET') else 'data/prompts/eagle_gsm8k.jsonl', 16).turns
    asyncio.run(bos.run_level(url, turns[:1], 1, 8))
    asyncio.run(bos.run_level(url, turns, 16, 64))
    for c in (1, 2, 4, 8, 16):
        marks.append((c, sum(1 for _ in open(log))))
        wall = 0.0
        for _ in range(rounds):
            w, _res = asyncio.run(bos.run_level(url, turns, c, 64))
            wall += w
        print(f"c={c}: {rounds * 16 * 64 / wall:.0f} tok/s (approx.)", flush=True)
finally:
    for p_ in [proc] + idle:
        p_.terminate()
        p_.wait(30)
lines = [json.loads(l) for l in open(log)]
marks.append((None, len(lines)))
for (c, a), (_, b) in zip(marks, marks[1:]):
    ws = [l["w"] for l in lines[a:b] if "w" in l]
    print(f"c={c}: windows by draft {dict(collections.Counter(w[1] for w in ws))}")
    big = [w for w in ws if w[0] >= 13]
    for d in sorted({w[1] for w in big}):
        v = [w for w in big if w[1] == d and not w[5]]
        if v:
            print(f"   n>=13 {d:9s} {len(v):5d} windows: measured {1e3 * statistics.median(w[2] for w in v):.2f} ms, "
                  f"priced {1e3 * statistics.median(w[3] for w in v):.2f} ms, ratio "
                  f"{statistics.median(w[2] / w[3] for w in v):.3f}, drift {statistics.median(w[6] for w in v):.2f}")
    merit = [l["merit"] for l in lines[a:b] if "merit" in l]
    for m in merit[:8]:
        print(f"   merit n={m[0]} {m[1]}: E {m[2]:.1f} (raw {m[3]:.1f}) at {1e3 * m[4]:.1f} ms vs AR E {m[5]:.1f} at "
              f"{1e3 * m[6]:.2f} ms; factor {m[7]:.3f} optimism {m[8]:.3f} p1 {m[9]:.2f} drift {m[10]:.2f} L {m[11]}")
    gaps = [l["gap"] for l in lines[a:b] if "gap" in l and l["gap"][0] >= 13]
    for d in sorted({g[1] for g in gaps}):
        v = [g for g in gaps if g[1] == d]
        print(f"   n>=13 after {d:9s} {len(v):5d}: window {1e3 * statistics.median(g[3] for g in v):.2f} ms, gap to the "
              f"next launch {1e3 * statistics.median(g[2] for g in v):.2f} ms median, {1e3 * statistics.mean(g[2] for g in v):.2f} mean")
    if len(merit) > 8:
        print(f"   ... {len(merit)} merit choices at n >= 13")
