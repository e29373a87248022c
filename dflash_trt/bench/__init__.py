"""`dflash-trt bench`: DFlash vs AR on prompt sets (τ, acceptance, decode speedup, losslessness), and transformers'
own generate on the target as a baseline (greedy, torch backend).

datasets.py  FastChat JSONL prompt sets, chat-template formatting, left truncation
metrics.py   pure arithmetic: TPOT, tokens/s (decode-only and end-to-end), speedups, efficiency, pooled τ statistics,
             output comparison
runner.py    drives the engine (AR and spec on the same batches, transformers one prompt at a time), writes
             report.json, terminal table
plots.py     acceptance-per-position and τ-histogram PNGs
cli.py       add_bench_parser(subparsers) for dflash_trt/cli.py
"""

from dflash_trt.bench.datasets import DatasetError

__all__ = ["DatasetError", "BenchConfig", "run_bench"]


def __getattr__(name):
    # Keep `import dflash_trt.bench` light (no torch) for CLI argument parsing.
    if name in ("BenchConfig", "run_bench", "format_table"):
        from dflash_trt.bench import runner

        return getattr(runner, name)
    raise AttributeError(name)
