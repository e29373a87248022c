"""Twenty-fifth session: auto's startup cost table (TorchEngine.budget -> step_runner.measure_costs) timed alone and
timed while BUSY other processes run the fixture pair's AR decode (as when the server benchmark started its three
servers at once: one warming up or loading while another timed its table). Prints, per run, the entries at n = 1, 8,
16 of chain:4 / chain:8 / tree:16 over chain:1 (cache length 128), which decide auto's choice.
`PYTHONPATH=. python bench/results/2026-11-28-cpu-s25/startup_contention.py [RUNS=2] [BUSY=2]`"""
import subprocess, sys, time, torch
from dflash_trt.engines.torch_engine import TorchEngine
from dflash_trt.spec.budget import Draft

torch.set_num_threads(1)
runs = int(sys.argv[1]) if len(sys.argv) > 1 else 2
busy = int(sys.argv[2]) if len(sys.argv) > 2 else 2
fx = 'tests/fixtures/gsm8k-tiny/'
HOG = ("import torch; torch.set_num_threads(1)\n"
       "from dflash_trt import SamplingParams\n"
       "from dflash_trt.engines.torch_engine import TorchEngine\n"
       f"e = TorchEngine.from_pretrained('{fx}target', None, device='cpu', max_batch_size=16, max_seq_len=512)\n"
       "while True: e.generate([[1, 2, 3, 4, 5, 6, 7, 8]] * 16, SamplingParams(max_new_tokens=64))\n")


def table():
    eng = TorchEngine.from_pretrained(fx + 'target', fx + 'drafter', device='cpu', max_batch_size=16, max_seq_len=512)
    t = time.perf_counter()
    eng.new_scheduler(draft='auto')
    took = time.perf_counter() - t
    s = eng.cost_table.seconds
    return took, {(n, d): s[(n, Draft(*d.split(':')[:1], int(d.split(':')[1])), 128)] / s[(n, Draft('chain', 1), 128)]
                  for n in (1, 8, 16) for d in ('chain:4', 'chain:8', 'tree:16')}, \
        {n: 1e3 * s[(n, Draft('chain', 1), 128)] for n in (1, 8, 16)}


for r in range(runs):
    for label in ('alone', f'beside {busy} busy'):
        hogs = []
        if label != 'alone':
            hogs = [subprocess.Popen([sys.executable, '-c', HOG]) for _ in range(busy)]
            time.sleep(4)  # (their load done: they decode)
        try:
            took, ratios, ar = table()
        finally:
            for h in hogs:
                h.kill()
        print(f"run {r} {label:14s} ({took:.1f} s): " + "  ".join(
            f"n={n} {d} {v:.2f}" for (n, d), v in ratios.items()) + "  | AR ms " +
            " ".join(f"n={n} {v:.2f}" for n, v in ar.items()), flush=True)
